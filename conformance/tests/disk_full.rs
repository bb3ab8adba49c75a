//! A full disk heals without a restart: a sled store (and a hub on it) on a small tmpfs, filled
//! until its writes are refused, by the store itself as its free space falls under what it
//! keeps (`--sled-min-free-mb`) or, keeping none, by the disk (ENOSPC), keeps serving reads of
//! everything it acknowledged, refuses writes with "the store cannot write: <cause>" (503 over
//! REST, `/readyz` 500, `/livez` still 200), and once the filler is removed writes again on its
//! own; a watcher open throughout sees the same history as a watch replayed afterwards (no
//! revision names two contents), and after a restart every acknowledged write is still there.
//! Mounting the tmpfs needs root: without it the tests fail saying so (`OCM_SKIP_TMPFS=1` skips
//! them, reported as skips).

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash as _, Hasher as _};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use bytes::Bytes;
use futures::StreamExt as _;
use ocm_conformance::data::letters;
use ocm_conformance::hub::{Backend, TestHub, eventually};
use ocm_conformance::tmpfs::{self, Tmpfs};
use ocm_storage::{Engine, Error, EventKind, Revision, SledOptions, Storage, WatchEvent};
use reqwest::Method;
use serde_json::{Value, json};

/// How much room the filler leaves beyond what the store keeps free: a few writes' worth.
const LEAVE: u64 = 2 << 20;

/// The seeds from here on name small values.
const SMALL: u64 = 1_000_000;

/// The value written under `/k/<seed>`, different for every seed: below [`SMALL`] 24 KiB (stored
/// inline) or 96 KiB (stored by content), from it 2 to 4 KiB (sled then writes no blob file,
/// whose failure can wedge its log).
fn value(seed: u64) -> Bytes {
    let len = match seed {
        SMALL.. => (2 + seed % 3) << 10,
        _ if seed % 2 == 0 => 24 << 10,
        _ => 96 << 10,
    };
    Bytes::from(letters(len as usize, seed + 1))
}

fn key(seed: u64) -> String {
    format!("/k/{seed:07}")
}

fn seed_of(key: &str) -> anyhow::Result<u64> {
    key.strip_prefix("/k/").and_then(|s| s.parse().ok()).with_context(|| format!("key {key}"))
}

fn fingerprint(value: &[u8]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

/// An event as the tests compare them: revision, key, whether a put, and its value's print.
type Seen = (u64, String, bool, u64);

fn seen(event: &WatchEvent) -> Seen {
    let put = event.kind == EventKind::Put;
    (event.revision.get(), event.key.clone(), put, fingerprint(&event.value))
}

/// Every event of `/k/` after revision 0 up to `until`, from a new watch.
async fn history(store: &Storage, until: Revision) -> anyhow::Result<Vec<Seen>> {
    let mut watch = store.watch("/k/", Revision::ZERO).await?;
    let mut out = Vec::new();
    while out.last().is_none_or(|s: &Seen| s.0 < until.get()) {
        let event = tokio::time::timeout(Duration::from_secs(10), watch.next())
            .await
            .context("the replay stalled")?
            .context("the replay ended")??;
        out.push(seen(&event));
    }
    Ok(out)
}

/// Writes new keys from four writers until the store refuses one: the revision of each
/// acknowledged write by seed, and the seeds of the writes refused (whose outcome is unknown).
async fn write_until_refused(
    store: &Storage,
    next: Arc<std::sync::atomic::AtomicU64>,
) -> anyhow::Result<(BTreeMap<u64, Revision>, BTreeSet<u64>)> {
    let mut writers = Vec::new();
    for _ in 0..4 {
        let (store, next) = (store.clone(), Arc::clone(&next));
        writers.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            for _ in 0..1000 {
                let seed = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                match store.create(&key(seed), value(seed)).await {
                    Ok(kv) => acked.push((seed, kv.mod_revision)),
                    Err(e) => return Ok::<_, anyhow::Error>((acked, Some((seed, e)))),
                }
            }
            Ok((acked, None))
        }));
    }
    let (mut acked, mut refused) = (BTreeMap::new(), BTreeSet::new());
    for writer in writers {
        let (done, stop) = writer.await??;
        acked.extend(done);
        let (seed, e) = stop.context("a writer wrote 1,000 values and the disk never filled")?;
        let text = e.to_string();
        ensure!(
            matches!(e, Error::Unavailable { .. }) && text.contains("the store cannot write"),
            "a write on the full disk failed with {e:?}"
        );
        refused.insert(seed);
    }
    Ok((acked, refused))
}

/// Every acknowledged write reads back as written.
async fn check_acked(store: &Storage, acked: &BTreeMap<u64, Revision>) -> anyhow::Result<()> {
    for (&seed, &revision) in acked {
        let kv = store.get(&key(seed)).await?;
        ensure!(kv.value == value(seed) && kv.mod_revision == revision, "{} read back", key(seed));
    }
    Ok(())
}

/// The events of a history are puts of the values their keys name, each acknowledged one at
/// the revision its writer was told.
fn check_events(events: &[Seen], acked: &BTreeMap<u64, Revision>) -> anyhow::Result<()> {
    ensure!(events.windows(2).all(|w| w[0].0 < w[1].0), "revisions strictly increase");
    for (revision, key, put, print) in events.iter().filter(|e| e.1 != "/k/after") {
        let seed = seed_of(key)?;
        ensure!(*put && *print == fingerprint(&value(seed)), "{key} at {revision}");
        ensure!(acked.get(&seed).is_none_or(|r| r.get() == *revision), "{key} moved");
    }
    Ok(())
}

/// While the disk is full: writes and compactions are refused, and everything acknowledged
/// reads back by key, in a list and in a watch's replay.
async fn check_read_only(
    store: &Storage,
    acked: &BTreeMap<u64, Revision>,
    refused: &BTreeSet<u64>,
) -> anyhow::Result<()> {
    let refused_now = store.create("/k/refused", "x").await;
    ensure!(
        matches!(&refused_now, Err(e) if e.to_string().contains("the store cannot write: ")),
        "a write while the disk is full: {refused_now:?}"
    );
    let current = store.current_revision().await?;
    ensure!(store.compact(current).await.is_err(), "a compaction while the disk is full");
    let newest = acked.values().max().copied().context("writes were acknowledged")?;
    ensure!(current >= newest, "the store's revision {current} is before an acknowledged {newest}");
    // (A moment after the failure the store is reopened read-only, in the room its reserve
    // frees: until then a read the failed handle cannot serve is refused.)
    eventually("reads of all acknowledged on the full disk", Duration::from_secs(10), || async {
        match check_acked(store, acked).await {
            Ok(()) => Ok(Some(())),
            Err(e) if matches!(e.downcast_ref(), Some(Error::Unavailable { .. })) => Ok(None),
            Err(e) => Err(e),
        }
    })
    .await?;
    let listed = store.list("/k/", &Default::default()).await?;
    let listed: BTreeSet<u64> =
        listed.items.iter().map(|kv| seed_of(&kv.key)).collect::<Result<_, _>>()?;
    let written: BTreeSet<u64> = acked.keys().copied().collect();
    ensure!(listed.is_superset(&written), "the list on the full disk lacks acknowledged keys");
    ensure!(
        listed.difference(&written).all(|s| refused.contains(s)),
        "the list holds unknown keys"
    );
    let replayed = history(store, current).await.context("a replay on the full disk")?;
    check_events(&replayed, acked)
}

/// A sled store keeping `min_free` free on a tmpfs filled until its writes are refused (the
/// refusal saying `cause_says`), writing the values of the seeds from `first_seed`: reads,
/// lists and watches of all it acknowledged go on, writes and compactions are refused with the
/// cause, and once the filler is gone it writes again by itself, its history the one its
/// watcher saw, all of it still there after a restart.
async fn full_disk(min_free: u64, first_seed: u64, cause_says: &str) -> anyhow::Result<()> {
    let fs = Tmpfs::mount(64)?;
    let path = fs.path().join("db");
    let mut options = SledOptions::new(&path);
    options.min_free_bytes = min_free;
    let store = Storage::open(Engine::Sled(options.clone())).await?;
    let next = Arc::new(std::sync::atomic::AtomicU64::new(first_seed));
    // A watcher from the start, open through everything.
    let watched: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let mut watch = store.watch("/k/", Revision::ZERO).await?;
    let watcher = tokio::spawn({
        let watched = Arc::clone(&watched);
        async move {
            while let Some(event) = watch.next().await {
                let event = event?;
                watched.lock().unwrap().push(seen(&event));
            }
            Ok::<_, Error>(())
        }
    });
    let mut acked = BTreeMap::new();
    for _ in 0..10 {
        let seed = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        acked.insert(seed, store.create(&key(seed), value(seed)).await?.mod_revision);
    }

    fs.fill(min_free + LEAVE)?;
    let (more, refused) = write_until_refused(&store, Arc::clone(&next)).await?;
    acked.extend(more);
    let cause = store.cannot_write().context("the store says it cannot write")?;
    eprintln!("{} writes acknowledged, {} refused: {cause}", acked.len(), refused.len());
    ensure!(cause.contains(cause_says), "the cause says {cause_says:?}: {cause}");
    ensure!(!store.failed(), "the store can heal in place: {cause}");
    check_read_only(&store, &acked, &refused).await?;
    fs.free()?;
    let after = eventually("a write once the disk has room", Duration::from_secs(60), || async {
        Ok(store.create("/k/after", "after").await.ok())
    })
    .await?;
    ensure!(store.cannot_write().is_none(), "the store still says it cannot write");
    check_acked(&store, &acked).await?;
    // The watcher saw exactly the history a replay reads now: every revision once, in order,
    // none reused for another write.
    let replayed = history(&store, after.mod_revision).await?;
    check_events(&replayed, &acked)?;
    // A watcher that fell behind or missed a revision would have ended with an error.
    let reached = eventually(
        "the watcher to reach the write after healing",
        Duration::from_secs(10),
        || async {
            Ok((watcher.is_finished() || watched.lock().unwrap().iter().any(|s| s.1 == "/k/after"))
                .then_some(()))
        },
    )
    .await;
    if watcher.is_finished() {
        bail!("the watcher ended: {:?}", watcher.await);
    }
    reached?;
    let seen_live = watched.lock().unwrap().clone();
    ensure!(seen_live == replayed, "the watcher open throughout saw another history than a replay");
    watcher.abort();

    // A restart finds the same.
    drop(store);
    let store = Storage::open(Engine::Sled(options)).await?;
    check_acked(&store, &acked).await?;
    ensure!(history(&store, after.mod_revision).await? == replayed, "the history after a restart");
    Ok(())
}

/// A store keeping room free refuses writes before its disk is full, serves reads, and writes
/// again once there is room: nothing failed, so nothing is reopened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_refuses_writes_before_its_disk_is_full_and_heals() -> anyhow::Result<()> {
    if tmpfs::skip("the whole test") {
        return Ok(());
    }
    full_disk(16 << 20, 0, "the store needs").await
}

/// A store keeping no room free meets the full disk (ENOSPC): it serves reads (the failed
/// handle reopened read-only in the room its reserve frees) and writes again once there is
/// room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_whose_disk_fills_serves_reads_and_heals() -> anyhow::Result<()> {
    if tmpfs::skip("the whole test") {
        return Ok(());
    }
    full_disk(0, SMALL, "No space left on device").await
}

async fn probe(hub: &TestHub, path: &str) -> anyhow::Result<(u16, Value)> {
    hub.call(&hub.anonymous()?, Method::GET, path, None, &[]).await
}

fn config_map(name: &str, data: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": data}})
}

/// A hub whose store keeps `min_free` free on a data dir that fills up, written ConfigMaps with
/// `data_len` bytes of data: it answers 503 "the store cannot write" (saying `cause_says`) to
/// writes and goes on serving gets, lists and watches; `/readyz` fails and `/livez` does not;
/// once the filler is gone it writes again without a restart, its open watch saw every
/// acknowledged object in order, and a restart finds them all.
async fn hub_on_a_full_disk(
    min_free: u64,
    data_len: usize,
    cause_says: &str,
) -> anyhow::Result<()> {
    const CMS: &str = "/api/v1/namespaces/default/configmaps";
    let fs = Tmpfs::mount(128)?;
    let mut hub =
        TestHub::start_in(fs.path(), Backend::Sled, |c| c.sled_min_free_bytes = min_free).await?;
    let admin = hub.http()?;
    let (code, body) =
        hub.call(&admin, Method::POST, CMS, Some(&config_map("before", "b")), &[]).await?;
    ensure!(code == 201, "POST before: {code} {body}");
    let (_, list) = hub.call(&admin, Method::GET, CMS, None, &[]).await?;
    let rv = list["metadata"]["resourceVersion"].as_str().context("a list's rv")?.to_owned();
    let watch = admin
        .get(format!("{}{CMS}?watch=true&timeoutSeconds=290&resourceVersion={rv}", hub.url))
        .send()
        .await?;
    ensure!(watch.status() == 200, "the watch: {}", watch.status());
    let mut lines = watch.bytes_stream();

    fs.fill(min_free + LEAVE)?;
    let data = |i: usize| letters(data_len, 1000 + i as u64);
    let mut acked: Vec<(String, String)> = Vec::new();
    let mut refusal = None;
    for i in 0..5000 {
        let name = format!("cm-{i:03}");
        let (code, body) =
            hub.call(&admin, Method::POST, CMS, Some(&config_map(&name, &data(i))), &[]).await?;
        match code {
            201 => acked.push((
                name,
                body["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_owned(),
            )),
            503 => {
                refusal = Some(body);
                break;
            }
            other => bail!("POST {name} on a full disk: {other} {body}"),
        }
    }
    let refusal = refusal.context("5,000 ConfigMaps and the disk never filled")?;
    let message = refusal["message"].as_str().unwrap_or_default();
    eprintln!("{} ConfigMaps acknowledged, then: {message}", acked.len());
    ensure!(message.contains("the store cannot write: "), "the refusal's Status: {refusal}");
    ensure!(message.contains(cause_says), "the refusal says {cause_says:?}: {refusal}");
    ensure!(!acked.is_empty(), "some writes were acknowledged before the disk filled");

    // Reads go on.
    for (i, (name, _)) in acked.iter().enumerate() {
        let (code, cm) = hub.call(&admin, Method::GET, &format!("{CMS}/{name}"), None, &[]).await?;
        ensure!(code == 200 && cm["data"]["v"] == data(i), "GET {name} on a full disk: {code}");
    }
    let (code, list) = hub.call(&admin, Method::GET, CMS, None, &[]).await?;
    ensure!(code == 200, "LIST on a full disk: {code} {list}");
    let names: BTreeSet<&str> = list["items"]
        .as_array()
        .context("items")?
        .iter()
        .filter_map(|c| c["metadata"]["name"].as_str())
        .collect();
    ensure!(
        acked.iter().all(|(n, _)| names.contains(n.as_str())),
        "the list lacks acknowledged objects"
    );
    let (code, text) = probe(&hub, "/readyz").await?;
    ensure!(
        code == 500 && text.to_string().contains("the store cannot write"),
        "/readyz: {code} {text}"
    );
    let (code, text) = probe(&hub, "/livez").await?;
    ensure!(code == 200, "/livez on a full disk: {code} {text}");
    let (code, body) =
        hub.call(&admin, Method::POST, CMS, Some(&config_map("refused", "r")), &[]).await?;
    ensure!(code == 503, "a write on a full disk: {code} {body}");

    fs.free()?;
    eventually("a write once the disk has room", Duration::from_secs(60), || async {
        let (code, _) =
            hub.call(&admin, Method::POST, CMS, Some(&config_map("after", "a")), &[]).await?;
        Ok((code == 201).then_some(()))
    })
    .await?;
    let (code, text) = probe(&hub, "/readyz").await?;
    ensure!(code == 200, "/readyz after the disk has room: {code} {text}");

    // The watch open throughout reports every acknowledged object, in order, then the next.
    let mut added: Vec<(String, u64)> = Vec::new();
    let mut pending = String::new();
    while !added.iter().any(|(n, _)| n == "after") {
        let chunk = tokio::time::timeout(Duration::from_secs(10), lines.next())
            .await
            .context("the watch open through the full disk stalled")?
            .context("the watch ended")??;
        pending.push_str(std::str::from_utf8(&chunk)?);
        while let Some((line, rest)) = pending.split_once('\n') {
            let event: Value = serde_json::from_str(line)?;
            ensure!(event["type"] == "ADDED", "the watch reported {}", event["type"]);
            let meta = &event["object"]["metadata"];
            let rv: u64 = meta["resourceVersion"].as_str().context("rv")?.parse()?;
            added.push((meta["name"].as_str().context("name")?.to_owned(), rv));
            pending = rest.to_owned();
        }
    }
    ensure!(added.windows(2).all(|w| w[0].1 < w[1].1), "the watch's resourceVersions increase");
    let reported: BTreeMap<&str, u64> = added.iter().map(|(n, rv)| (n.as_str(), *rv)).collect();
    for (name, rv) in &acked {
        ensure!(
            reported.get(name.as_str()).map(u64::to_string).as_ref() == Some(rv),
            "the watch's {name}"
        );
    }

    hub.restart().await?;
    let (code, list) = hub.call(&admin, Method::GET, CMS, None, &[]).await?;
    ensure!(code == 200, "LIST after a restart: {code}");
    let names: BTreeSet<&str> = list["items"]
        .as_array()
        .context("items")?
        .iter()
        .filter_map(|c| c["metadata"]["name"].as_str())
        .collect();
    ensure!(
        acked.iter().all(|(n, _)| names.contains(n.as_str())) && names.contains("after"),
        "after a restart"
    );
    hub.stop().await;
    Ok(())
}

/// A hub keeping the default room free refuses writes before its disk is full.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_refuses_writes_before_its_disk_is_full_and_heals() -> anyhow::Result<()> {
    if tmpfs::skip("the whole test") {
        return Ok(());
    }
    hub_on_a_full_disk(ocm_storage::DEFAULT_MIN_FREE_BYTES, 200 << 10, "the store needs").await
}

/// A hub keeping no room free meets the full disk (ENOSPC), its store reopened in place; small
/// objects, so that sled writes no blob file (see `value`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_whose_disk_fills_serves_reads_and_heals() -> anyhow::Result<()> {
    if tmpfs::skip("the whole test") {
        return Ok(());
    }
    hub_on_a_full_disk(0, 2 << 10, "No space left on device").await
}
