//! Crash-kill loop for the sled backend (reliability.md §7 R1).
//!
//! A child process (`storage-crash-child`) writes concurrently and prints an acknowledgement only
//! after a write returned success; this test SIGKILLs it at random moments (10 % of cycles during
//! start-up, 10 % right as a compaction starts, the rest 20–500 ms into the run) and then checks:
//! the store opens; every acknowledged write is present, or the one write in flight for that key
//! replaced it; no value appears that was never written; revisions strictly increase and are
//! never reused after a restart; replaying the kept history from the compaction point rebuilds
//! exactly the current data. Half of one writer's values are large (stored by content, sharing
//! chunks), and must come back whole. `OCM_CRASH_CYCLES` raises the cycle count (default 100) for a soak.
//!
//! The negative control runs the same loop with acknowledgement before flush and must catch a
//! lost acknowledged write; if it does not, this test is too weak to trust.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use futures::StreamExt;
use ocm_conformance::data::{crash_value_is_large, large_suffix};
use ocm_storage::{Engine, Error, EventKind, ListOptions, Revision, SledOptions, Storage};
use rand::Rng;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

const CHILD: &str = env!("CARGO_BIN_EXE_storage-crash-child");

#[derive(Debug, Clone, Copy, PartialEq)]
enum KillAt {
    Startup(Duration),
    Compaction,
    Running(Duration),
}

/// A key's state: its value (`None` = absent) and the revision that produced it.
#[derive(Debug, Clone, PartialEq)]
struct State {
    value: Option<String>,
    revision: u64,
}

#[derive(Debug, Default)]
struct Model {
    /// The last acknowledged (or, after a verification, the observed) state of each key.
    acked: HashMap<String, State>,
    /// Per writer: the write announced but not yet acknowledged (`key`, value or `None` = delete).
    in_flight: HashMap<usize, (String, Option<String>)>,
    /// Every value ever attempted, per key.
    attempted: HashMap<String, HashSet<String>>,
    /// Every acknowledged revision.
    acked_revisions: HashSet<u64>,
    /// The store's revision at the last verification: later acknowledgements must exceed it.
    floor: u64,
    acks: u64,
}

impl Model {
    fn line(&mut self, line: &str) -> anyhow::Result<()> {
        let parts: Vec<&str> = line.split(' ').collect();
        match parts.as_slice() {
            ["READY", rev] => {
                let rev: u64 = rev.parse()?;
                if rev != self.floor {
                    bail!(
                        "store reopened at revision {rev}, but the last verification saw {}",
                        self.floor
                    );
                }
            }
            ["TRY", w, key, "PUT", value] => {
                self.attempted.entry((*key).to_owned()).or_default().insert((*value).to_owned());
                self.in_flight.insert(w.parse()?, ((*key).to_owned(), Some((*value).to_owned())));
            }
            ["TRY", w, key, "DEL"] => {
                self.in_flight.insert(w.parse()?, ((*key).to_owned(), None));
            }
            ["ACK", w, rev] => {
                let rev: u64 = rev.parse()?;
                let (key, value) = self
                    .in_flight
                    .remove(&w.parse()?)
                    .ok_or_else(|| anyhow!("ACK without TRY: {line}"))?;
                if rev <= self.floor {
                    bail!(
                        "revision {rev} acknowledged, but the store had already reached {} before this run: reused",
                        self.floor
                    );
                }
                if !self.acked_revisions.insert(rev) {
                    bail!("revision {rev} acknowledged twice");
                }
                if let Some(prev) = self.acked.get(&key) {
                    if prev.revision >= rev {
                        bail!("key {key}: revision went from {} to {rev}", prev.revision);
                    }
                }
                self.acked.insert(key, State { value, revision: rev });
                self.acks += 1;
            }
            ["COMPACTING", _] => {}
            _ => bail!("unexpected line from the child: {line:?}"),
        }
        Ok(())
    }
}

async fn open(dir: &Path) -> Result<Storage, Error> {
    Storage::open(Engine::Sled(SledOptions::new(dir))).await
}

/// Checks the reopened store against the model; then makes the model match the store.
async fn verify(dir: &Path, model: &mut Model) -> anyhow::Result<()> {
    let store = open(dir).await.map_err(|e| anyhow!("store failed to open: {e}"))?;
    let current = store.current_revision().await?.0;
    let max_acked = model.acked.values().map(|s| s.revision).max().unwrap_or(0);
    if current < max_acked {
        bail!("current revision {current} is below the acknowledged revision {max_acked}");
    }
    let listed: BTreeMap<String, (String, u64)> = store
        .list("/crash/", &ListOptions::default())
        .await?
        .items
        .into_iter()
        .map(|kv| {
            let value = String::from_utf8(kv.value.to_vec()).unwrap_or_default();
            // The model knows a value by its tag; a large one must come back whole, and only
            // the values written large may be.
            let tag = value.split_once('|').map_or(value.as_str(), |(tag, _)| tag);
            let suffix = if crash_value_is_large(tag) { large_suffix() } else { "" };
            let value = match value[tag.len()..] == *suffix {
                true => tag.to_owned(),
                false => format!("{tag} (its value damaged: {} bytes)", value.len()),
            };
            (kv.key, (value, kv.mod_revision.0))
        })
        .collect();
    let in_flight: HashMap<&String, &Option<String>> =
        model.in_flight.values().map(|(k, v)| (k, v)).collect();
    let mut keys: HashSet<String> = model.acked.keys().cloned().collect();
    keys.extend(listed.keys().cloned());
    let mut observed = Vec::new();
    for key in keys {
        let acked = model.acked.get(&key).cloned().unwrap_or(State { value: None, revision: 0 });
        let actual = listed.get(&key);
        if let Some((value, _)) = actual {
            if !model.attempted.get(&key).is_some_and(|set| set.contains(value)) {
                bail!("key {key} holds {value:?}, which was never written");
            }
        }
        let matches_acked = match (&acked.value, actual) {
            (None, None) => true,
            (Some(v), Some((value, rev))) => v == value && *rev == acked.revision,
            _ => false,
        };
        let matches_in_flight = match (in_flight.get(&key), actual) {
            (Some(None), None) => true,
            (Some(Some(v)), Some((value, rev))) => {
                v == value && *rev > acked.revision && *rev <= current
            }
            _ => false,
        };
        if !matches_acked && !matches_in_flight {
            bail!(
                "LOST ACKNOWLEDGED WRITE: key {key} should be {acked:?} (in flight: {:?}) but the store has {actual:?}",
                in_flight.get(&key)
            );
        }
        let state = match actual {
            Some((value, rev)) => State { value: Some(value.clone()), revision: *rev },
            // Absent: keep the revision of the last known change so ordering checks still hold.
            None => State { value: None, revision: acked.revision },
        };
        observed.push((key, state));
    }
    check_history_replay(&store, current).await?;
    model.acked.extend(observed);
    model.in_flight.clear();
    model.floor = current;
    Ok(())
}

/// Replaying the kept history from the compaction point onto the snapshot there must rebuild
/// exactly the current data (etcd's HashKV check, in spirit).
async fn check_history_replay(store: &Storage, current: u64) -> anyhow::Result<()> {
    let oldest = match store
        .list("/", &ListOptions { revision: Some(Revision(0)), ..Default::default() })
        .await
    {
        Ok(_) => 0,
        Err(Error::Compacted { oldest, .. }) => oldest.0,
        Err(e) => return Err(e.into()),
    };
    let snapshot = |items: Vec<ocm_storage::KeyValue>| -> BTreeMap<String, (bytes::Bytes, u64)> {
        items.into_iter().map(|kv| (kv.key, (kv.value, kv.mod_revision.0))).collect()
    };
    let at = ListOptions { revision: Some(Revision(oldest)), ..Default::default() };
    let mut rebuilt = snapshot(store.list("/", &at).await?.items);
    if oldest < current {
        let mut watch = store.watch("/", Revision(oldest)).await?;
        loop {
            let event = tokio::time::timeout(Duration::from_secs(10), watch.next())
                .await
                .context("history replay stalled")?
                .ok_or_else(|| anyhow!("history replay ended early"))??;
            match event.kind {
                EventKind::Put => {
                    rebuilt.insert(event.key.clone(), (event.value.clone(), event.revision.0));
                }
                EventKind::Delete => {
                    rebuilt.remove(&event.key);
                }
            }
            if event.revision.0 >= current {
                break;
            }
        }
    }
    let now = snapshot(store.list("/", &ListOptions::default()).await?.items);
    if rebuilt != now {
        bail!(
            "replaying the history from revision {oldest} does not rebuild the data at {current}"
        );
    }
    Ok(())
}

/// Runs one child until it is killed; feeds every line it printed into the model.
async fn run_cycle(
    dir: &Path,
    run: u64,
    kill: KillAt,
    ack_before_flush: bool,
    model: &mut Model,
) -> anyhow::Result<()> {
    let mut command = Command::new(CHILD);
    command
        .arg("--dir")
        .arg(dir)
        .arg("--run")
        .arg(run.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if ack_before_flush {
        command.arg("--unsafe-ack-before-flush");
    }
    let mut child = command.spawn().context("spawning the crash child")?;
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let deadline = match kill {
        KillAt::Startup(after) => Some(tokio::time::Instant::now() + after),
        _ => None,
    };
    let mut ready_at = None;
    let mut killed = false;
    loop {
        let timer = async {
            match (deadline, ready_at, kill) {
                (Some(at), _, _) => tokio::time::sleep_until(at).await,
                (None, Some(at), KillAt::Running(after)) => {
                    tokio::time::sleep_until(at + after).await
                }
                _ => std::future::pending().await,
            }
        };
        tokio::select! {
            line = lines.next_line() => {
                let Some(line) = line? else { break };
                model.line(&line)?;
                if line.starts_with("READY") {
                    ready_at = Some(tokio::time::Instant::now());
                }
                if line.starts_with("COMPACTING") && kill == KillAt::Compaction && !killed {
                    child.start_kill()?;
                    killed = true;
                }
            }
            () = timer, if !killed => {
                child.start_kill()?;
                killed = true;
            }
        }
    }
    let status = child.wait().await?;
    if !killed {
        let mut stderr = String::new();
        if let Some(mut err) = child.stderr.take() {
            use tokio::io::AsyncReadExt;
            err.read_to_string(&mut stderr).await?;
        }
        bail!("the child exited by itself ({status}): {stderr}");
    }
    Ok(())
}

/// The seed of the kill schedule: `OCM_CRASH_SEED` when set (to replay a failed run's
/// schedule), else a fresh one; a failure names it.
fn schedule_seed() -> u64 {
    std::env::var("OCM_CRASH_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(rand::random)
}

/// Runs `cycles` kill/verify cycles on the schedule `seed` draws; returns the first violation,
/// with the cycle it happened in.
async fn crash_loop(
    cycles: u64,
    ack_before_flush: bool,
    seed: u64,
) -> (Model, Option<(u64, KillAt, anyhow::Error, tempfile::TempDir)>) {
    use rand::SeedableRng as _;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut model = Model::default();
    // Create the store once so every cycle starts from a verified state.
    drop(open(dir.path()).await.expect("initial open"));
    for cycle in 0..cycles {
        let kill = match rng.random_range(0..10) {
            0 => KillAt::Startup(Duration::from_millis(rng.random_range(0..50))),
            1 => KillAt::Compaction,
            _ => KillAt::Running(Duration::from_millis(rng.random_range(20..500))),
        };
        let result = match run_cycle(dir.path(), cycle, kill, ack_before_flush, &mut model).await {
            Ok(()) => verify(dir.path(), &mut model).await,
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            return (model, Some((cycle, kill, e, dir)));
        }
    }
    (model, None)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sled_survives_sigkill_with_every_acknowledged_write() {
    let cycles = std::env::var("OCM_CRASH_CYCLES").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    let seed = schedule_seed();
    let (model, failure) = crash_loop(cycles, false, seed).await;
    if let Some((cycle, kill, error, dir)) = failure {
        let kept = dir.keep();
        panic!(
            "cycle {cycle} ({kill:?}): {error:#}\nstore kept at {} for reproduction; the kill \
             schedule again with OCM_CRASH_SEED={seed}",
            kept.display()
        );
    }
    eprintln!(
        "{cycles} cycles, {} acknowledged writes, final revision {}",
        model.acks, model.floor
    );
    assert!(model.acks >= cycles * 10, "too few writes to mean anything: {}", model.acks);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_control_catches_ack_before_flush() {
    let (model, failure) = crash_loop(60, true, schedule_seed()).await;
    let Some((cycle, kill, error, _dir)) = failure else {
        panic!(
            "acknowledging before flush lost nothing in 60 cycles ({} acks): the crash test cannot tell a broken store from a good one",
            model.acks
        );
    };
    let message = format!("{error:#}");
    eprintln!("negative control caught at cycle {cycle} ({kill:?}): {message}");
    assert!(
        message.contains("LOST ACKNOWLEDGED WRITE")
            || message.contains("below the acknowledged revision")
            || message.contains("reused")
            || message.contains("reopened at revision"),
        "the control failed for another reason: {message}"
    );
}
