//! Module `local::heal` (a child of `local.rs`, beside it as `chunked.rs` is beside `sled.rs`):
//! how an embedded store lives through a failed write, sync or compaction (a full disk above
//! all) and heals without a restart.
//!
//! A failure makes the store **read-only**: writes and compactions are refused with
//! [`Error::Unavailable`] ("the store cannot write: <cause>"), while gets, lists, watches and the
//! current revision go on serving what is durable. A batch that failed may be half visible in
//! the backend (sled applies a batch atomically only for crash recovery), so the keys it wrote
//! are read as they were before it ([`Hidden`]) until the backend is reopened.
//!
//! The **healer** task then waits, backing off to [`MAX_PAUSE`], until the backend has room to
//! write again ([`room_in`]: a few MiB written and synced in its directory). Then, holding
//! everything that uses the backend (the compaction lock, the gate, the sync lock), it drops the
//! failed handle and opens the backend again from disk: what the old handle had made durable is
//! all there (else the store is **broken**, see below), and revisions it applied but never
//! acknowledged are either all there or gone, whole batches at a time. The ones found are synced,
//! then published to watchers in revision order as any durable write is (their writers were told
//! the write failed: its outcome was unknown, as after a time-out); the ones gone were never
//! read or watched, so the revisions taken again never name two contents. Batches the syncer
//! still holds from the old handle are refused (their epoch is over), and writes resume.
//!
//! Between dropping the old handle and opening the new one there is no backend: the store is
//! **unreadable**, and stays so if the open fails (it is tried again). A store whose reopening
//! finds acknowledged writes missing or damage, or that cannot be reopened although it has
//! room, is **broken**: nothing heals it in place, [`crate::Storage::failed`] says so, and the
//! hub's `/livez` fails so that its supervisor restarts it.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, Weak};
use std::time::Duration;

use tokio::sync::Notify;

use super::{Backend, CHUNK, Core, Decided, Events, Gate, Record, Recovered};
use crate::error::{Error, Result};

/// The first pause between two attempts to heal; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(100);

/// The longest pause between two attempts to heal: a disk freed is written again within this.
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// How many times in a row a backend with room may fail to reopen before the store is broken.
const REOPEN_TRIES: u32 = 10;

/// The room [`room_in`] asks for: a sled segment, a blob and a commit of the largest size, with
/// margin, so that the writes after healing do not fail again at once.
pub(crate) const ROOM_BYTES: usize = 4 << 20;

/// What the store can do now, from most to least.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    /// Everything.
    Serving = 0,
    /// Reads, watches and the current revision; no writes or compactions.
    ReadOnly = 1,
    /// Nothing, until the backend is open again.
    Unreadable = 2,
    /// Nothing, until the process opens the store again.
    Broken = 3,
}

/// The store's health, shared with the healer task.
pub(crate) struct Health {
    level: AtomicU8,
    /// Why the store is not serving: the first failure since it last served.
    cause: Mutex<String>,
    /// The backend failed since it was opened: it is reopened before it writes again.
    stale: AtomicBool,
    /// Reopenings in a row that failed although the backend had room.
    failed_reopens: AtomicU32,
    /// Wakes the healer (after a failure, and when the store closes).
    wake: Notify,
    closed: AtomicBool,
}

impl Health {
    pub(crate) fn new() -> Health {
        Health {
            level: AtomicU8::new(Level::Serving as u8),
            cause: Mutex::new(String::new()),
            stale: AtomicBool::new(false),
            failed_reopens: AtomicU32::new(0),
            wake: Notify::new(),
            closed: AtomicBool::new(false),
        }
    }

    pub(crate) fn level(&self) -> Level {
        match self.level.load(Ordering::SeqCst) {
            0 => Level::Serving,
            1 => Level::ReadOnly,
            2 => Level::Unreadable,
            _ => Level::Broken,
        }
    }

    fn cause(&self) -> MutexGuard<'_, String> {
        self.cause.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a failure: the store drops to `level` (never back up, which only healing does)
    /// and the backend is reopened before it writes again.
    pub(crate) fn fail(&self, level: Level, error: &Error) {
        let mut cause = self.cause();
        let before = self.level();
        if before == Level::Serving {
            *cause = describe(error);
            tracing::error!(cause = %*cause, "storage: a write failed; the store refuses writes until it heals");
        }
        if level > before {
            self.level.store(level as u8, Ordering::SeqCst);
        }
        if level == Level::Broken && before != Level::Broken {
            tracing::error!(error = %describe(error), "storage: the store cannot heal without a restart");
            *cause = describe(error);
        }
        self.stale.store(true, Ordering::SeqCst);
        drop(cause);
        self.wake.notify_one();
    }

    /// Sets the level the healer reached (it alone raises the store back).
    fn set(&self, level: Level) {
        self.level.store(level as u8, Ordering::SeqCst);
    }

    /// The error a write gets now, if the store refuses writes.
    pub(crate) fn write_error(&self) -> Option<Error> {
        (self.level() != Level::Serving).then(|| Error::Unavailable {
            message: format!("the store cannot write: {}", self.cause()),
            source: None,
        })
    }

    /// The error a read gets now, if the store refuses reads.
    pub(crate) fn read_error(&self) -> Option<Error> {
        (self.level() >= Level::Unreadable).then(|| Error::Unavailable {
            message: format!("the store cannot read: {}", self.cause()),
            source: None,
        })
    }

    /// Why the store refuses writes, while it does.
    pub(crate) fn cannot_write(&self) -> Option<String> {
        (self.level() != Level::Serving).then(|| self.cause().clone())
    }

    /// Ends the healer: the store is closing.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }
}

/// An error and its sources on one line, without the variant's own prefix.
fn describe(error: &Error) -> String {
    let mut text = match error {
        Error::Unavailable { message, .. } => message.clone(),
        other => other.to_string(),
    };
    let mut source = std::error::Error::source(error);
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}

/// How a backend is opened again, for the stores that heal (sled).
pub(crate) struct Healing<B> {
    /// Opens the backend from what is on disk (the old handle is gone by then).
    pub(crate) reopen: Box<dyn Fn() -> Result<(B, Recovered)> + Send + Sync>,
    /// Whether the backend has room to write again; changes nothing in the store.
    pub(crate) room: Box<dyn Fn() -> Result<()> + Send + Sync>,
}

/// Whether [`ROOM_BYTES`] can be written and synced in `dir`: a probe file is written, synced
/// and removed (also when it fails), so nothing is left behind.
pub(crate) fn room_in(dir: &Path) -> Result<()> {
    let path = dir.join("room-probe");
    let written = (|| {
        let mut file = std::fs::File::create(&path)?;
        let block = vec![0u8; 64 << 10];
        for _ in 0..ROOM_BYTES / block.len() {
            file.write_all(&block)?;
        }
        file.sync_data()
    })();
    let removed = std::fs::remove_file(&path);
    written.map_err(|e| Error::unavailable(format!("no room to write in {}", dir.display()), e))?;
    removed.map_err(|e| Error::unavailable(format!("cannot remove {}", path.display()), e))
}

/// `[start, end)` as bounds a map of `String` keys takes.
fn bounds<'a>(start: &'a str, end: &'a str) -> (Bound<&'a str>, Bound<&'a str>) {
    (Bound::Included(start), Bound::Excluded(end))
}

/// The keys a failed batch wrote, each with its record before the batch (`None`: absent): the
/// backend may show part of the batch until it is reopened, so these keys are read from here.
pub(crate) type Hidden = RwLock<BTreeMap<String, Option<Record>>>;

impl<B: Backend> Core<B> {
    /// Hides the keys of a batch that failed behind their records before it: the first write of
    /// each key in the batch names them as its `prev`.
    pub(super) fn hide(&self, decided: &[Decided]) {
        let mut hidden = self.hidden.write().unwrap_or_else(PoisonError::into_inner);
        for (_, event) in decided.iter().flatten() {
            hidden.entry(event.key.clone()).or_insert_with(|| {
                event.prev.as_ref().map(|kv| Record {
                    create: kv.create_revision.0,
                    modified: kv.mod_revision.0,
                    value: kv.value.clone(),
                })
            });
        }
    }

    fn hidden(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Option<Record>>> {
        self.hidden.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The current record of `key`.
    pub(super) fn stored(&self, backend: &B, key: &str) -> Result<Option<Record>> {
        if let Some(before) = self.hidden().get(key) {
            return Ok(before.clone());
        }
        backend.get(key)
    }

    /// The records with keys in `[start, end)`, ascending, at most `limit`: the backend's,
    /// read around the hidden keys (never decoded: part of a failed batch may be missing).
    pub(super) fn stored_range(
        &self,
        backend: &B,
        start: &str,
        end: &str,
        limit: usize,
    ) -> Result<Vec<(String, Record)>> {
        let hidden: Vec<(String, Option<Record>)> = {
            let hidden = self.hidden();
            hidden.range::<str, _>(bounds(start, end)).map(|(k, r)| (k.clone(), r.clone())).collect()
        };
        if hidden.is_empty() {
            return backend.scan(start, end, limit);
        }
        let mut out = Vec::new();
        let mut from = start.to_owned();
        for key in hidden.into_iter().map(Some).chain([None]) {
            if out.len() >= limit {
                break;
            }
            let to = key.as_ref().map_or(end, |(k, _)| k.as_str());
            out.extend(backend.scan(&from, to, limit - out.len())?);
            if let Some((key, before)) = key {
                if let Some(record) = before.filter(|_| out.len() < limit) {
                    out.push((key.clone(), record));
                }
                from = format!("{key}\0");
            }
        }
        Ok(out)
    }

    /// How many records have keys in `[start, end)`.
    pub(super) fn stored_count(&self, backend: &B, start: &str, end: &str) -> Result<u64> {
        let hidden: Vec<(String, bool)> = {
            let hidden = self.hidden();
            hidden.range::<str, _>(bounds(start, end)).map(|(k, r)| (k.clone(), r.is_some())).collect()
        };
        let mut count = 0;
        let mut from = start.to_owned();
        for (key, existed) in &hidden {
            count += backend.count(&from, key)? + u64::from(*existed);
            from = format!("{key}\0");
        }
        Ok(count + backend.count(&from, end)?)
    }

    /// One attempt to heal: `true` once the store writes again (or never will in place).
    fn heal_step(&self) -> bool {
        let health = &self.health;
        let Some(healing) = &self.healing else { return true };
        if matches!(health.level(), Level::Serving | Level::Broken) {
            return true;
        }
        if let Err(e) = (healing.room)() {
            tracing::debug!(error = %describe(&e), "storage: no room to write yet");
            return false;
        }
        let _compacting = self.compacting.lock().unwrap_or_else(PoisonError::into_inner);
        let mut gate = self.write_gate();
        let _syncing = self.syncing.lock().unwrap_or_else(PoisonError::into_inner);
        if health.stale.load(Ordering::SeqCst) {
            if let Err(e) = self.reopen(&mut gate, healing) {
                let tries = health.failed_reopens.fetch_add(1, Ordering::SeqCst) + 1;
                tracing::warn!(error = %describe(&e), tries, "storage: reopening the store failed");
                let broken = matches!(e, Error::Corrupt { .. }) || tries >= REOPEN_TRIES;
                health.fail(if broken { Level::Broken } else { Level::Unreadable }, &e);
                return broken;
            }
            health.failed_reopens.store(0, Ordering::SeqCst);
            health.stale.store(false, Ordering::SeqCst);
        }
        health.set(Level::Serving);
        tracing::info!(revision = gate.applied, "storage: the store writes again");
        true
    }

    /// Drops the failed backend and opens it again from disk; see the module docs.
    fn reopen(&self, gate: &mut Gate, healing: &Healing<B>) -> Result<()> {
        // The files admit one handle at a time: the old one closes first. Everything else that
        // holds it does so under the locks the caller holds.
        let old = self.backend.write().unwrap_or_else(PoisonError::into_inner).take();
        if old.is_some() {
            self.health.set(Level::Unreadable.max(self.health.level()));
        }
        drop(old);
        let (backend, recovered) = (healing.reopen)()?;
        let durable = self.durable.load(Ordering::SeqCst);
        if recovered.revision < durable {
            return Err(Error::corrupt(
                format!("revision {durable}"),
                format!(
                    "the reopened store ends at revision {}, before the durable {durable}",
                    recovered.revision
                ),
            ));
        }
        // What the old handle wrote but never synced is made durable before anyone sees it.
        backend.sync()?;
        *self.backend.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(backend));
        self.hidden.write().unwrap_or_else(PoisonError::into_inner).clear();
        self.compacted.store(recovered.compacted, Ordering::SeqCst);
        gate.applied = recovered.revision;
        gate.times = recovered.times.into();
        self.epoch.fetch_add(1, Ordering::SeqCst);
        let mut found: Vec<Events> = Vec::new();
        let mut from = durable.max(recovered.compacted) + 1;
        while from <= recovered.revision {
            let to = recovered.revision.min(from + CHUNK - 1);
            let events = self.history(from, to)?;
            found.extend(events.chunk_by(|a, b| a.revision == b.revision).map(Events::from));
            from = to + 1;
        }
        if !found.is_empty() {
            tracing::warn!(
                from = durable + 1,
                to = recovered.revision,
                "storage: writes that failed were found durable when reopening; publishing them"
            );
        }
        // As the syncer does: `durable` first, then the events, in revision order.
        self.durable.store(recovered.revision, Ordering::SeqCst);
        for events in found {
            let _ = self.events.send(events);
        }
        Ok(())
    }
}

/// Spawns the healer of `core`: woken by each failure, it tries to heal (see the module docs)
/// until the store writes again, and ends when the store closes.
pub(super) fn spawn_healer<B: Backend>(core: Weak<Core<B>>, health: Arc<Health>) {
    tokio::spawn(async move {
        loop {
            health.wake.notified().await;
            let mut pause = FIRST_PAUSE;
            loop {
                if health.closed.load(Ordering::SeqCst) {
                    return;
                }
                let Some(strong) = core.upgrade() else { return };
                match tokio::task::spawn_blocking(move || strong.heal_step()).await {
                    Ok(true) => break,
                    Ok(false) => {}
                    Err(e) => tracing::error!(error = %e, "storage: the healing task failed"),
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
            }
        }
    });
}
