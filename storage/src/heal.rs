//! Module `local::heal` (a child of `local.rs`, beside it as `chunked.rs` is beside `sled.rs`):
//! how an embedded store lives through a full disk, or any failed write, sync or compaction,
//! and heals without a restart.
//!
//! A store that heals (sled) keeps [`Healing::min_free`] free on its disk: a batch that finds
//! less is refused, and the store turns **read-only** before the disk is full, since sled can
//! wedge its log when a large write of its own fails. A failed write, sync or compaction makes
//! it read-only too. Read-only, it refuses writes and compactions with [`Error::Unavailable`]
//! ("the store cannot write: <cause>"), while gets, lists, watches and the current revision go
//! on serving what is durable. A batch that failed may be half visible in the backend (sled
//! applies a batch atomically only for crash recovery), so the keys it wrote are read as they
//! were before it ([`Hidden`]) until the backend is reopened.
//!
//! The **healer** task then reopens a failed backend from disk. A failed sled handle refuses to
//! write, and may refuse a read that has to split a page, so it is reopened at once, read-only,
//! in the room its **reserve** frees ([`RESERVE_BYTES`] kept in the store's directory), or
//! else once its directory has [`ROOM_BYTES`] free. Holding everything that uses the backend
//! (the compaction lock, the sync lock, then the gate) it drops the failed handle and opens the
//! files again: what the old handle had made durable is all there (else the store is
//! **broken**, see below), and revisions it applied but never acknowledged are either all there
//! or gone, whole batches at a time. The ones found are synced, then published to watchers in
//! revision order as any durable write is (their writers were told the write failed: its
//! outcome was unknown, as after a time-out); the ones gone were never read or watched, so the
//! revisions taken again never name two contents. Batches the syncer still holds from the old
//! handle are refused (their epoch is over). Writes resume once the disk has [`ROOM_BYTES`]
//! more than the store keeps free and the reserve is whole again, the healer backing off to
//! [`MAX_PAUSE`] between tries.
//!
//! Readers wait at the gate while the backend is reopened; if the open fails there is no
//! backend and reads are refused until a later try succeeds. A store whose reopening finds
//! acknowledged writes missing or damage, that fails to reopen [`REOPEN_TRIES`] times in a row
//! although it has room, or whose handle is stuck (a sync that did not finish within
//! [`SYNC_WAIT`]: a wedged sled log never flushes, and such a handle can be neither closed nor
//! opened again in this process) is **broken**: nothing heals it in place,
//! [`crate::Storage::failed`] says so, and the hub exits for its supervisor to restart it.

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

/// How long a sync may take before the backend counts as stuck (a healthy `fdatasync` takes
/// milliseconds; sled's flush never returns once its log is wedged).
pub(crate) const SYNC_WAIT: Duration = Duration::from_secs(30);

/// The room a failed backend needs to be reopened without its reserve, and the margin above
/// [`Healing::min_free`] the disk needs before writes resume: a sled segment, a blob and a
/// commit of the largest size, with margin, so that the writes after healing do not fail again
/// at once.
pub(crate) const ROOM_BYTES: u64 = 4 << 20;

/// What the store can do now, from most to least.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    /// Everything.
    Serving = 0,
    /// Reads, watches and the current revision (while the backend is open); no writes or
    /// compactions.
    ReadOnly = 1,
    /// As read-only, and it will not heal until the process opens the store again.
    Broken = 2,
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
        let what = describe(error);
        if before == Level::Serving {
            tracing::error!(cause = %what, "storage: a write failed; the store refuses writes until it heals");
            cause.clone_from(&what);
        }
        if level == Level::Broken && before != Level::Broken {
            tracing::error!(cause = %what, "storage: the store cannot heal in place");
            if before != Level::Serving {
                *cause = format!("{cause}; it cannot heal in place: {what}");
            }
        }
        if level > before {
            self.level.store(level as u8, Ordering::SeqCst);
        }
        self.stale.store(true, Ordering::SeqCst);
        drop(cause);
        self.wake.notify_one();
    }

    /// Makes a serving store read-only for want of room: nothing failed, so nothing is reopened.
    pub(crate) fn refuse(&self, error: &Error) {
        let mut cause = self.cause();
        if self.level() == Level::Serving {
            *cause = describe(error);
            self.level.store(Level::ReadOnly as u8, Ordering::SeqCst);
            tracing::error!(cause = %*cause, "storage: the disk is nearly full; the store refuses writes until it has room");
        }
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

    /// The error a write gets while the backend has failed and is not yet reopened.
    pub(crate) fn backend_error(&self) -> Option<Error> {
        if self.stale.load(Ordering::SeqCst) {
            return self.write_error();
        }
        None
    }

    /// The error a read gets while there is no backend to read.
    pub(crate) fn read_error(&self) -> Error {
        Error::Unavailable {
            message: format!("the store cannot read: {}", self.cause()),
            source: None,
        }
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
    /// The backend's directory: where free space is read and the reserve is kept.
    pub(crate) dir: std::path::PathBuf,
    /// The free space below which writes are refused (`0`: none kept).
    pub(crate) min_free: u64,
    /// Opens the backend from what is on disk (the old handle is gone by then).
    pub(crate) reopen: Box<dyn Fn() -> Result<(B, Recovered)> + Send + Sync>,
}

/// The reserve's size: room to reopen a store on a full disk (sled writes as it opens, and as
/// it reads pages it has to split).
pub(crate) const RESERVE_BYTES: u64 = 8 << 20;

/// The reserve kept in a healing store's directory.
const RESERVE: &str = "reserve";

/// Writes `len` zero bytes to `path` (real blocks, not a hole) and syncs them; a file left
/// half written is removed.
fn write_zeros(path: &Path, len: u64) -> std::io::Result<()> {
    let written = (|| {
        let mut file = std::fs::File::create(path)?;
        let block = vec![0u8; 64 << 10];
        let mut left = len;
        while left > 0 {
            let n = left.min(block.len() as u64);
            file.write_all(&block[..n as usize])?;
            left -= n;
        }
        file.sync_data()
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(path);
    }
    written
}

/// Makes sure the reserve is whole: [`RESERVE_BYTES`] in the file `reserve` of `dir`, freed when
/// the store fails so that it can be reopened and read while its disk is full.
pub(crate) fn keep_reserve(dir: &Path) -> Result<()> {
    let path = dir.join(RESERVE);
    if std::fs::metadata(&path).is_ok_and(|m| m.len() == RESERVE_BYTES) {
        return Ok(());
    }
    write_zeros(&path, RESERVE_BYTES)
        .map_err(|e| Error::unavailable(format!("cannot keep the reserve {}", path.display()), e))
}

/// Frees the reserve; `true` if there was one.
fn release_reserve(dir: &Path) -> bool {
    std::fs::remove_file(dir.join(RESERVE)).is_ok()
}

/// The bytes an unprivileged writer may still write on the filesystem of `dir`.
fn free_bytes(dir: &Path) -> Result<u64> {
    let stat = rustix::fs::statvfs(dir).map_err(|e| {
        Error::unavailable(format!("cannot read the free space of {}", dir.display()), e)
    })?;
    Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
}

/// Whether the filesystem of `dir` has `need` bytes free; the error says how much it has.
fn room(dir: &Path, need: u64) -> Result<()> {
    let free = free_bytes(dir)?;
    if free >= need {
        return Ok(());
    }
    Err(Error::Unavailable {
        message: format!(
            "the disk of {} has {} free, under the {} the store needs",
            dir.display(),
            mib(free),
            mib(need)
        ),
        source: None,
    })
}

/// Bytes as MiB, for messages.
fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}

/// A sync waiting for the sync thread: the backend, and where its outcome goes.
type SyncRequest<B> = (Arc<B>, std::sync::mpsc::Sender<Result<()>>);

/// The thread a healing store syncs on, so that a sync that never returns (a wedged sled log)
/// holds that thread, not the syncer: started at the first sync, ended with the store.
pub(crate) struct SyncThread<B>(Mutex<Option<std::sync::mpsc::Sender<SyncRequest<B>>>>);

impl<B> Default for SyncThread<B> {
    fn default() -> Self {
        SyncThread(Mutex::new(None))
    }
}

impl<B: Backend> SyncThread<B> {
    /// Syncs `backend` on the sync thread. A sync that fails makes the store read-only; one
    /// that does not finish within [`SYNC_WAIT`] makes it broken (the thread keeps the handle,
    /// so it can be neither closed nor opened again).
    pub(crate) fn sync(&self, backend: Arc<B>, health: &Health) -> Result<()> {
        if !B::SYNCS {
            return backend.sync().inspect_err(|e| health.fail(Level::ReadOnly, e));
        }
        let (reply, outcome) = std::sync::mpsc::channel();
        let sent = {
            let mut thread = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            if thread.is_none() {
                let (requests, received) = std::sync::mpsc::channel::<SyncRequest<B>>();
                std::thread::Builder::new()
                    .name("storage-sync".into())
                    .spawn(move || {
                        for (backend, reply) in received {
                            let result = backend.sync();
                            // Let go of the handle before answering: the healer reads a
                            // handle held elsewhere as a stuck sync.
                            drop(backend);
                            let _ = reply.send(result);
                        }
                    })
                    .map_err(|e| Error::unavailable("no thread to sync on", e))?;
                *thread = Some(requests);
            }
            thread.as_ref().is_some_and(|t| t.send((backend, reply)).is_ok())
        };
        let result = match outcome.recv_timeout(SYNC_WAIT) {
            Ok(result) => result,
            Err(_) if !sent => {
                Err(Error::Unavailable { message: "the sync thread is gone".into(), source: None })
            }
            Err(_) => {
                let stuck = Error::Unavailable {
                    message: format!("a sync did not finish within {}s", SYNC_WAIT.as_secs()),
                    source: None,
                };
                health.fail(Level::Broken, &stuck);
                return Err(stuck);
            }
        };
        result.inspect_err(|e| health.fail(Level::ReadOnly, e))
    }
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
            hidden
                .range::<str, _>(bounds(start, end))
                .map(|(k, r)| (k.clone(), r.clone()))
                .collect()
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
            hidden
                .range::<str, _>(bounds(start, end))
                .map(|(k, r)| (k.clone(), r.is_some()))
                .collect()
        };
        let mut count = 0;
        let mut from = start.to_owned();
        for (key, existed) in &hidden {
            count += backend.count(&from, key)? + u64::from(*existed);
            from = format!("{key}\0");
        }
        Ok(count + backend.count(&from, end)?)
    }

    /// Refuses a batch when the disk has less free than the store keeps free: the store turns
    /// read-only before the disk fills (see the module docs).
    pub(super) fn check_room(&self) -> Result<()> {
        let Some(healing) = self.healing.as_ref().filter(|h| h.min_free > 0) else {
            return Ok(());
        };
        room(&healing.dir, healing.min_free).inspect_err(|e| self.health.refuse(e))
    }

    /// One attempt to heal: `true` once the store writes again (or never will in place).
    ///
    /// A failed backend is reopened first, read-only: with the room its reserve frees, at once,
    /// or else once its directory has room. Writes resume once the directory has room and the
    /// reserve is whole again.
    fn heal_step(&self) -> bool {
        let health = &self.health;
        let Some(healing) = &self.healing else { return true };
        if matches!(health.level(), Level::Serving | Level::Broken) {
            return true;
        }
        let dir = healing.dir.as_path();
        if health.stale.load(Ordering::SeqCst) {
            if !release_reserve(dir) {
                if let Err(e) = room(dir, ROOM_BYTES) {
                    tracing::debug!(error = %describe(&e), "storage: no room to reopen yet");
                    return false;
                }
            }
            // In this order, as the syncer (the sync lock) and the compaction (the compaction
            // lock, then the gate) take them; readers go on until the gate is taken.
            let _compacting = self.compacting.lock().unwrap_or_else(PoisonError::into_inner);
            let _syncing = self.syncing.lock().unwrap_or_else(PoisonError::into_inner);
            if health.level() == Level::Broken {
                return true;
            }
            // A handle whose log is wedged never finishes a flush, so it could be neither closed
            // nor opened again: find out before letting go of it (a failed one answers at once,
            // and reads go on meanwhile). The sync makes the store broken if it hangs.
            let old = self.backend.read().unwrap_or_else(PoisonError::into_inner).clone();
            if let Some(old) = old {
                let _ = self.sync_thread.sync(old, health);
                if health.level() == Level::Broken {
                    return true;
                }
            }
            let mut gate = self.write_gate();
            if let Err(e) = self.reopen(&mut gate, healing) {
                let tries = health.failed_reopens.fetch_add(1, Ordering::SeqCst) + 1;
                tracing::warn!(error = %describe(&e), tries, "storage: reopening the store failed");
                let broken = match &e {
                    Error::Corrupt { .. } => true,
                    _ if self.backend.read().unwrap_or_else(PoisonError::into_inner).is_some() => {
                        true // the old handle is stuck
                    }
                    _ => tries >= REOPEN_TRIES,
                };
                if broken {
                    health.fail(Level::Broken, &e);
                }
                return broken;
            }
            health.failed_reopens.store(0, Ordering::SeqCst);
            health.stale.store(false, Ordering::SeqCst);
            health.set(Level::ReadOnly);
            tracing::info!(
                revision = gate.applied,
                "storage: reopened, read-only until it has room"
            );
        }
        let resume_at = healing.min_free.saturating_add(ROOM_BYTES);
        if let Err(e) = room(dir, resume_at).and_then(|()| keep_reserve(dir)) {
            tracing::debug!(error = %describe(&e), "storage: no room to write yet");
            return false;
        }
        // Nothing fails while the store is read-only: no write, sync or compaction runs.
        health.set(Level::Serving);
        tracing::info!("storage: the store writes again");
        true
    }

    /// Drops the failed backend and opens it again from disk; see the module docs.
    fn reopen(&self, gate: &mut Gate, healing: &Healing<B>) -> Result<()> {
        // The files admit one handle at a time: the old one closes first. Everything that holds
        // it does so under the locks the caller holds, but a sync that did not finish: then the
        // old handle stays, and the store cannot heal in place.
        {
            let mut slot = self.backend.write().unwrap_or_else(PoisonError::into_inner);
            if slot.as_ref().is_some_and(|old| Arc::strong_count(old) > 1) {
                return Err(Error::Unavailable {
                    message: "the failed handle is still held by a sync that did not finish".into(),
                    source: None,
                });
            }
            drop(slot.take());
        }
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
