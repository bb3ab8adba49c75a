//! The engine shared by the embedded backends (memory and sled): write serialization and revision
//! assignment, group commit, snapshot reads at a revision, the watch fan-out and the history
//! window. A backend only stores records and events ([`Backend`]); it never sees a watcher.
//!
//! Writes go through a two-stage pipeline, each stage one task:
//! 1. The **committer** drains every queued write, and under the write side of `gate` checks each
//!    against the current records (and the earlier writes of the same batch), gives each
//!    successful one the next revision, and has the backend apply all of them (records and
//!    events) in **one atomic batch**. A write is a commit of one or more keys: every key of it
//!    passes its check and all get the one revision, or the commit fails whole and takes none.
//! 2. The **syncer** takes every applied batch handed to it, syncs the backend once for all of
//!    them (group commit), advances `durable`, publishes the events to watchers in revision order,
//!    one message per commit (so a watcher receives a commit's events together or, lagging, none
//!    of them), and only then answers the writers. While it syncs, the committer already applies
//!    the next batch.
//!
//! Writers only queue and wait: they never touch the backend or contend on its locks.
//!
//! Reads are served at a revision `R <= durable`: the backend's current records, with every key
//! changed after `R` rolled back to its value at `R` from the history (the `prev` of its first
//! later event). So a read never shows a write that is not yet durable, and a list at a past
//! revision inside the window is exact.
//!
//! A failed batch, sync or compaction makes the store read-only until it heals (`heal.rs`).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tokio::sync::{broadcast, mpsc, oneshot};

/// How a failed store goes on reading and heals. A child of this module, beside it as the sled
/// backend's children are beside `sled.rs`.
#[path = "heal.rs"]
mod heal;
#[path = "import.rs"]
mod import;

pub(crate) use heal::{Healing, keep_reserve};

use crate::engine::{HistoryWindow, LocalOptions};
use crate::error::{Error, Result};
use crate::{
    BackendPage, Commit, CommitStream, Committed, Deleted, EventKind, KeyValue, ListRequest,
    Preconditions, Revision, Store, WatchEvent, Write, Written,
};

/// History is read, compacted and replayed in chunks of this many revisions, so no single step
/// holds the gate for long.
const CHUNK: u64 = 1024;

/// History is deleted in chunks of this many revisions, so a compaction never holds the backend
/// (sled locks itself for a batch) long enough to stall writes.
const COMPACT_CHUNK: u64 = 64;

/// The pause between two chunks of the background compaction: about 20,000 revisions a second
/// at most, above what the store can write, so the window is still kept.
const COMPACT_PAUSE: std::time::Duration = std::time::Duration::from_millis(2);

/// The most writes the committer applies in one batch.
const MAX_BATCH: usize = 1024;

/// A stored record: the value and the revisions that describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) create: u64,
    pub(crate) modified: u64,
    pub(crate) value: Bytes,
}

impl Record {
    fn into_kv(self, key: &str) -> KeyValue {
        KeyValue {
            key: key.to_owned(),
            value: self.value,
            create_revision: Revision(self.create),
            mod_revision: Revision(self.modified),
        }
    }
}

/// One key's write as the backend applies it: the new record of `event.key` (or `None` for a
/// delete) and its event (which carries the key and the revision), stored together atomically.
/// The event is the one watchers receive, shared rather than copied. The changes of one commit
/// are adjacent, in key order, and share their revision.
pub(crate) struct Change<'a> {
    pub(crate) record: Option<&'a Record>,
    pub(crate) event: &'a Arc<WatchEvent>,
    /// Wall-clock time of the write, in milliseconds since the Unix epoch (for the age window).
    pub(crate) at_ms: u64,
}

/// What a backend found when it opened.
#[derive(Debug, Default)]
pub(crate) struct Recovered {
    /// The last revision written.
    pub(crate) revision: u64,
    /// The last compaction revision.
    pub(crate) compacted: u64,
    /// `(revision, at_ms)` of every event in the kept history, ascending.
    pub(crate) times: Vec<(u64, u64)>,
}

/// What an embedded backend stores. Every call but `compact` is made with the gate held, so writes
/// never overlap each other or a read that needs a consistent view. `compact` runs outside the
/// gate, possibly alongside a write of new revisions, but only after the compaction revision was
/// advanced past the events it drops, so no reader asks for them any more.
pub(crate) trait Backend: Send + Sync + 'static {
    /// Whether [`Backend::sync`] does real work (and should run on a blocking thread).
    const SYNCS: bool;
    /// The current record of `key`.
    fn get(&self, key: &str) -> Result<Option<Record>>;
    /// The records with keys in `[start, end)`, ascending, at most `limit` of them.
    fn scan(&self, start: &str, end: &str, limit: usize) -> Result<Vec<(String, Record)>>;
    /// How many records have keys in `[start, end)`.
    fn count(&self, start: &str, end: &str) -> Result<u64>;
    /// The kept events with revisions in `[from, to]`, ascending (one revision's in key order).
    fn history(&self, from: u64, to: u64) -> Result<Vec<Arc<WatchEvent>>>;
    /// Stores the changes, records and events, in one atomic batch: all of them or none.
    fn apply(&self, changes: &[Change<'_>]) -> Result<()>;
    /// Drops the events in `(from, to]` and records `to` as the compaction revision, atomically.
    fn compact(&self, from: u64, to: u64) -> Result<()>;
    /// Restore only: stores `records` (keys absent until now) in one atomic batch, with no
    /// events, and marks the store as being restored (a store opened so is refused).
    fn import(&self, records: &[(String, Record)]) -> Result<()>;
    /// Restore only: records `at` as the compaction revision and clears the mark, atomically.
    fn finish_import(&self, at: u64) -> Result<()>;
    /// Makes every change applied so far durable.
    fn sync(&self) -> Result<()>;
}

struct Gate {
    /// The last revision applied to the backend (durable or not).
    applied: u64,
    /// `(revision, at_ms)` of the kept history, for the age window.
    times: VecDeque<(u64, u64)>,
}

/// The shared engine over one backend.
pub(crate) struct Core<B: Backend> {
    /// `None` only while a failed backend is being reopened, or could not be.
    backend: RwLock<Option<Arc<B>>>,
    /// How to reopen the backend after a failure (`None`: it never fails, or cannot heal).
    healing: Option<Healing<B>>,
    gate: RwLock<Gate>,
    /// The last durable revision; reads and watch replays never go past it.
    durable: AtomicU64,
    /// The compaction revision. Changed only with the gate's write side held.
    compacted: AtomicU64,
    /// Serializes compactions (the retention task and explicit calls).
    compacting: std::sync::Mutex<()>,
    /// Writes waiting for the committer.
    queue: mpsc::UnboundedSender<Queued>,
    /// Each durable commit's events, one message per revision.
    events: broadcast::Sender<Events>,
    /// Serving, read-only after a failed batch, sync or compaction, or worse (`heal.rs`).
    health: Arc<heal::Health>,
    /// The keys of a failed batch, read as they were before it until the backend is reopened.
    hidden: heal::Hidden,
    /// Counts the backend's reopenings: a batch applied to an earlier handle is never
    /// acknowledged by a later one's sync.
    epoch: AtomicU64,
    /// Held while batches are synced and published, and while the backend is reopened.
    syncing: std::sync::Mutex<()>,
    /// Where syncs run, bounded in time.
    sync_thread: heal::SyncThread<B>,
    window: HistoryWindow,
}

enum Op {
    Create(Bytes),
    Update(Bytes, Revision),
    Delete(Preconditions),
}

/// The events of one commit, in key order: what watchers are sent, one message per revision.
type Events = Arc<[Arc<WatchEvent>]>;

type Reply = oneshot::Sender<Result<Vec<Written>>>;

/// A commit waiting for the committer: its writes (distinct keys, in key order) and who waits.
struct Queued {
    ops: Vec<(String, Op)>,
    reply: Reply,
}

/// A batch the committer applied, waiting for the syncer.
struct Applied {
    /// The backend's epoch it was applied in.
    epoch: u64,
    /// The last revision applied when the batch was done.
    target: u64,
    /// The events of each commit applied, in revision order.
    commits: Vec<Events>,
    /// Each writer's answer, sent once the batch is durable.
    replies: Vec<(Reply, Result<Vec<Written>>)>,
}

/// A commit as checked: each key's new record and its event.
type Decided = Vec<(Option<Record>, Arc<WatchEvent>)>;

fn closed() -> Error {
    Error::Unavailable { message: "the store is closed".into(), source: None }
}

/// An error every write of a batch gets (errors carry sources and are not `Clone`).
fn shared(e: &Error) -> Error {
    let message = match e {
        Error::Unavailable { message, source: None } => message.clone(),
        other => other.to_string(),
    };
    Error::Unavailable { message, source: None }
}

/// The [`Store`] over a [`Core`].
pub(crate) struct Local<B: Backend>(Arc<Core<B>>);

impl<B: Backend> Local<B> {
    /// Starts the engine over an opened backend and its recovered state.
    pub(crate) fn start(backend: B, recovered: Recovered, options: LocalOptions) -> Arc<dyn Store> {
        Local::start_healing(backend, recovered, options, None)
    }

    /// Starts the engine over a backend that heals after a failure by `healing`.
    pub(crate) fn start_healing(
        backend: B,
        recovered: Recovered,
        options: LocalOptions,
        healing: Option<Healing<B>>,
    ) -> Arc<dyn Store> {
        // Out-of-range tuning is clamped rather than allowed to panic a background task.
        let (events, _) = broadcast::channel(options.watch_buffer.clamp(16, 1 << 20));
        let (queue, queued) = mpsc::unbounded_channel();
        let health = Arc::new(heal::Health::new());
        let core = Arc::new(Core {
            backend: RwLock::new(Some(Arc::new(backend))),
            healing,
            gate: RwLock::new(Gate { applied: recovered.revision, times: recovered.times.into() }),
            durable: AtomicU64::new(recovered.revision),
            compacted: AtomicU64::new(recovered.compacted),
            compacting: std::sync::Mutex::new(()),
            queue,
            events,
            health: Arc::clone(&health),
            hidden: heal::Hidden::default(),
            epoch: AtomicU64::new(0),
            syncing: std::sync::Mutex::new(()),
            sync_thread: heal::SyncThread::default(),
            window: options.history,
        });
        let (to_syncer, applied) = mpsc::unbounded_channel();
        tokio::spawn(committer(Arc::downgrade(&core), queued, to_syncer));
        tokio::spawn(syncer(Arc::downgrade(&core), applied));
        spawn_retention(Arc::downgrade(&core));
        heal::spawn_healer(Arc::downgrade(&core), health);
        Arc::new(Local(core))
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl<B: Backend> Drop for Core<B> {
    fn drop(&mut self) {
        self.health.close();
    }
}

impl<B: Backend> Core<B> {
    /// Refuses a write or compaction while the store cannot write.
    fn check_writable(&self) -> Result<()> {
        self.health.write_error().map_or(Ok(()), Err)
    }

    /// Refuses a read while there is no backend to read (a failed one not yet reopened); waits
    /// while one is being reopened.
    fn check_readable(&self) -> Result<()> {
        let _gate = self.read_gate();
        self.backend().map(drop)
    }

    /// The backend, while it is open.
    fn backend(&self) -> Result<Arc<B>> {
        let backend = self.backend.read().unwrap_or_else(|p| p.into_inner()).clone();
        backend.ok_or_else(|| self.health.read_error())
    }

    fn read_gate(&self) -> RwLockReadGuard<'_, Gate> {
        self.gate.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write_gate(&self) -> RwLockWriteGuard<'_, Gate> {
        self.gate.write().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues a commit and waits until it is durable (or refused).
    async fn write(&self, ops: Vec<(String, Op)>) -> Result<Vec<Written>> {
        self.check_writable()?;
        let (reply, answer) = oneshot::channel();
        self.queue.send(Queued { ops, reply }).map_err(|_| closed())?;
        answer.await.map_err(|_| closed())?
    }

    /// Queues a write of one key and waits for what it did.
    async fn write_one(&self, key: &str, op: Op) -> Result<Written> {
        let mut written = self.write(vec![(key.to_owned(), op)]).await?;
        written.pop().ok_or_else(|| Error::corrupt(key, "a write answered with nothing"))
    }

    /// Checks one write against the key's current record and builds what it stores.
    fn decide(
        key: &str,
        op: Op,
        current: Option<Record>,
        revision: u64,
    ) -> Result<(Option<Record>, WatchEvent, Written)> {
        let current = current.map(|r| r.into_kv(key));
        let (record, written) = match (op, current.clone()) {
            (Op::Create(_), Some(_)) => return Err(Error::AlreadyExists { key: key.to_owned() }),
            (Op::Update(..) | Op::Delete(_), None) => {
                return Err(Error::NotFound { key: key.to_owned() });
            }
            (Op::Create(value), None) => {
                let record = Record { create: revision, modified: revision, value };
                let kv = record.clone().into_kv(key);
                (Some(record), Written::Put(kv))
            }
            (Op::Update(value, expected), Some(kv)) => {
                Preconditions { mod_revision: Some(expected), create_revision: None }.check(&kv)?;
                let record = Record { create: kv.create_revision.0, modified: revision, value };
                let kv = record.clone().into_kv(key);
                (Some(record), Written::Put(kv))
            }
            (Op::Delete(pre), Some(kv)) => {
                pre.check(&kv)?;
                (None, Written::Deleted(Deleted { revision: Revision(revision), prev: kv }))
            }
        };
        let event = WatchEvent {
            kind: if record.is_some() { EventKind::Put } else { EventKind::Delete },
            revision: Revision(revision),
            key: key.to_owned(),
            value: record.as_ref().map(|r| r.value.clone()).unwrap_or_default(),
            create_revision: match (&record, &current) {
                (Some(r), _) => Revision(r.create),
                (None, Some(kv)) => kv.create_revision,
                (None, None) => Revision::ZERO,
            },
            prev: current,
        };
        Ok((record, event, written))
    }

    /// Checks every write of one commit against the records as the earlier commits of the
    /// batch left them (`None` = deleted) or as stored; the first key that fails fails it all.
    fn decide_commit(
        &self,
        backend: &B,
        batch_state: &HashMap<String, Option<Record>>,
        ops: Vec<(String, Op)>,
        revision: u64,
    ) -> Result<(Decided, Vec<Written>)> {
        let mut decided = Vec::with_capacity(ops.len());
        let mut written = Vec::with_capacity(ops.len());
        for (key, op) in ops {
            let current = match batch_state.get(&key) {
                Some(record) => record.clone(),
                None => self.stored(backend, &key)?,
            };
            let (record, event, w) = Self::decide(&key, op, current, revision)?;
            decided.push((record, Arc::new(event)));
            written.push(w);
        }
        Ok((decided, written))
    }

    /// The committer's step: checks and applies a batch of commits as one atomic backend batch.
    fn apply_batch(&self, batch: Vec<Queued>) -> Applied {
        let mut gate = self.write_gate();
        let epoch = self.epoch.load(Ordering::SeqCst);
        let mut replies = Vec::with_capacity(batch.len());
        let ready = self.check_writable().and_then(|()| self.check_room());
        let backend = match ready.and_then(|()| self.backend()) {
            Ok(backend) => backend,
            Err(e) => {
                let refused = self.health.write_error().unwrap_or(e);
                replies.extend(batch.into_iter().map(|q| (q.reply, Err(shared(&refused)))));
                return Applied { epoch, target: gate.applied, commits: Vec::new(), replies };
            }
        };
        // Records as the earlier commits of this batch left them (`None` = deleted).
        let mut batch_state: HashMap<String, Option<Record>> = HashMap::new();
        let mut decided: Vec<Decided> = Vec::new();
        let mut revision = gate.applied;
        for Queued { ops, reply } in batch {
            match self.decide_commit(&backend, &batch_state, ops, revision + 1) {
                Ok((commit, written)) => {
                    revision += 1;
                    for (record, event) in &commit {
                        batch_state.insert(event.key.clone(), record.clone());
                    }
                    decided.push(commit);
                    replies.push((reply, Ok(written)));
                }
                Err(e) => replies.push((reply, Err(e))),
            }
        }
        if decided.is_empty() {
            return Applied { epoch, target: gate.applied, commits: Vec::new(), replies };
        }
        let at_ms = now_ms();
        let changes: Vec<Change<'_>> = decided
            .iter()
            .flatten()
            .map(|(record, event)| Change { record: record.as_ref(), event, at_ms })
            .collect();
        if let Err(e) = backend.apply(&changes) {
            // Every write in the batch fails. sled applies a batch atomically only for crash
            // recovery: after an error part of it may be visible until the store is reopened, so
            // its keys are read as they were before it, and the store refuses writes until it
            // heals.
            drop(changes);
            self.hide(&decided);
            self.health.fail(heal::Level::ReadOnly, &e);
            let refused = self.health.write_error().unwrap_or(e);
            for (_, result) in &mut replies {
                if result.is_ok() {
                    *result = Err(shared(&refused));
                }
            }
            return Applied { epoch, target: gate.applied, commits: Vec::new(), replies };
        }
        drop(changes);
        // The successful commits took the revisions after the last applied, one each.
        let first = gate.applied + 1;
        gate.applied = revision;
        gate.times.extend((first..=revision).map(|r| (r, at_ms)));
        let commits = decided
            .into_iter()
            .map(|commit| commit.into_iter().map(|(_, event)| event).collect())
            .collect();
        Applied { epoch, target: revision, commits, replies }
    }

    /// The syncer's step, run with `syncing` held: syncs once for the batches of the current
    /// epoch, advances `durable` and publishes their commits; says for each batch whether its
    /// writes are durable. A batch of an earlier epoch was applied to a backend since reopened
    /// (the reopening published whatever of it was found durable), and a store whose backend
    /// failed acknowledges nothing more, not even by a later sync.
    fn settle(&self, batches: &[(u64, u64, Vec<Events>)]) -> Vec<Result<()>> {
        let _syncing = self.syncing.lock().unwrap_or_else(|p| p.into_inner());
        let epoch = self.epoch.load(Ordering::SeqCst);
        let current = batches.iter().filter(|(e, _, _)| *e == epoch);
        let target = current.clone().map(|(_, target, _)| *target).max().unwrap_or(0);
        // A store refusing writes for want of room still acknowledges what it applied before;
        // one whose backend failed acknowledges nothing more.
        let mut synced = self.health.backend_error().map_or(Ok(()), Err);
        if synced.is_ok() && target > self.durable.load(Ordering::SeqCst) {
            synced =
                self.backend().and_then(|backend| self.sync_thread.sync(backend, &self.health));
        }
        if synced.is_ok() {
            // Advance `durable` before publishing: a watcher that subscribes and then reads
            // `durable` either sees the new value (and replays these events from the history)
            // or subscribed before the sends below (and receives them live).
            self.durable.fetch_max(target, Ordering::SeqCst);
            for commit in current.flat_map(|(_, _, commits)| commits) {
                // No receivers is fine: nobody is watching.
                let _ = self.events.send(Arc::clone(commit));
            }
        }
        let refused = || {
            self.health.write_error().unwrap_or_else(|| Error::Unavailable {
                message: "the store was reopened before the write was durable".into(),
                source: None,
            })
        };
        batches
            .iter()
            .map(|(e, _, _)| match &synced {
                Ok(()) if *e == epoch => Ok(()),
                _ => Err(refused()),
            })
            .collect()
    }

    /// The revision a read should use, checked against the kept history.
    fn read_revision(&self, requested: Option<Revision>) -> Result<u64> {
        let durable = self.durable.load(Ordering::SeqCst);
        let Some(Revision(r)) = requested else { return Ok(durable) };
        if r > durable {
            return Err(Error::FutureRevision {
                requested: Revision(r),
                current: Revision(durable),
            });
        }
        let compacted = self.compacted.load(Ordering::SeqCst);
        if r < compacted {
            return Err(Error::Compacted { requested: Revision(r), oldest: Revision(compacted) });
        }
        Ok(r)
    }

    /// The kept events in `[from, to]`, checked to be complete: every revision has events (one
    /// per key its commit wrote), in order.
    fn history(&self, from: u64, to: u64) -> Result<Vec<Arc<WatchEvent>>> {
        if from > to {
            return Ok(Vec::new());
        }
        let compacted = self.compacted.load(Ordering::SeqCst);
        if from <= compacted {
            return Err(Error::Compacted {
                requested: Revision(from - 1),
                oldest: Revision(compacted),
            });
        }
        let events = self.backend()?.history(from, to)?;
        // The next revision expected; an event of the revision before it belongs to the same
        // commit as the one before.
        let mut expected = from;
        for event in &events {
            let r = event.revision.0;
            if r == expected {
                expected += 1;
            } else if r + 1 != expected || r < from {
                return Err(Error::corrupt(
                    format!("history@{expected}"),
                    format!("found revision {r} where {expected} was expected"),
                ));
            }
        }
        if expected != to + 1 {
            return Err(Error::corrupt(
                format!("history@{from}..={to}"),
                format!("events kept for {} of {} revisions", expected - from, to - from + 1),
            ));
        }
        Ok(events)
    }

    /// The kept events in `[from, to]` for a watch replay, read with the gate held.
    fn replay(&self, from: u64, to: u64) -> Result<Vec<Arc<WatchEvent>>> {
        let _gate = self.read_gate();
        self.history(from, to)
    }

    /// For every key in `[start, end)` changed after revision `at`: its value at `at`.
    fn rollback(
        &self,
        gate: &Gate,
        at: u64,
        start: &str,
        end: &str,
    ) -> Result<BTreeMap<String, Option<KeyValue>>> {
        let mut values = BTreeMap::new();
        let mut from = at + 1;
        while from <= gate.applied {
            let to = gate.applied.min(from + CHUNK - 1);
            for event in self.history(from, to)? {
                let key = event.key.as_str();
                if key >= start && key < end && !values.contains_key(key) {
                    values.insert(key.to_owned(), event.prev.clone());
                }
            }
            from = to + 1;
        }
        Ok(values)
    }

    fn get(&self, key: &str) -> Result<KeyValue> {
        let gate = self.read_gate();
        let at = self.read_revision(None)?;
        let record = self.stored(&*self.backend()?, key)?;
        let stored_is_newer = record.is_some();
        let value = match record {
            Some(r) if r.modified <= at => Some(r.into_kv(key)),
            None if gate.applied == at => None,
            _ => {
                let mut end = key.to_owned();
                end.push('\0');
                match self.rollback(&gate, at, key, &end)?.remove(key) {
                    Some(value) => value,
                    // Nothing happened to the key after `at`, and it is absent now.
                    None if !stored_is_newer => None,
                    None => {
                        return Err(Error::corrupt(
                            key,
                            "record is newer than the durable revision but has no event",
                        ));
                    }
                }
            }
        };
        value.ok_or_else(|| Error::NotFound { key: key.to_owned() })
    }

    fn list(&self, req: &ListRequest<'_>) -> Result<BackendPage> {
        let gate = self.read_gate();
        let backend = self.backend()?;
        let at = self.read_revision(req.revision)?;
        let start = match req.start_after {
            Some(after) => format!("{after}\0"),
            None => req.prefix.to_owned(),
        };
        let end = crate::key::prefix_end(req.prefix);
        let rolled = self.rollback(&gate, at, &start, &end)?;
        // Which rolled-back keys existed in the snapshot, for counting what follows a page.
        let existed: Vec<(String, bool)> = match req.limit {
            0 => Vec::new(),
            _ if !req.count_remaining => Vec::new(),
            _ => rolled.iter().map(|(k, v)| (k.clone(), v.is_some())).collect(),
        };
        // Rolled-back keys can hide at most `rolled.len()` current records, so this many current
        // records are enough to find `limit + 1` items of the snapshot.
        let want = if req.limit == 0 { usize::MAX } else { req.limit + 1 };
        let scan_limit = want.saturating_add(rolled.len());
        let current = self.stored_range(&backend, &start, &end, scan_limit)?;
        let truncated = current.len() == scan_limit;
        let horizon = if truncated { current.last().map(|(k, _)| k.clone()) } else { None };

        let mut items: Vec<KeyValue> = Vec::new();
        let mut rolled_iter = rolled.into_iter().peekable();
        let mut current_iter = current.into_iter().peekable();
        loop {
            let take_rolled = match (rolled_iter.peek(), current_iter.peek()) {
                (None, None) => break,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some((rk, _)), Some((ck, _))) => rk <= ck,
            };
            if take_rolled {
                let (key, value) = rolled_iter.next().expect("peeked");
                if horizon.as_ref().is_some_and(|h| &key > h) {
                    break;
                }
                if current_iter.peek().is_some_and(|(ck, _)| *ck == key) {
                    current_iter.next();
                }
                items.extend(value);
            } else {
                let (key, record) = current_iter.next().expect("peeked");
                items.push(record.into_kv(&key));
            }
            if items.len() >= want {
                break;
            }
        }
        let more = req.limit != 0 && items.len() > req.limit;
        items.truncate(if req.limit == 0 { items.len() } else { req.limit });
        let remaining = match items.last() {
            Some(last) if more && req.count_remaining => {
                self.count_at(&backend, &format!("{}\0", last.key), &end, &existed)?
            }
            _ => 0,
        };
        Ok(BackendPage { items, revision: Revision(at), more, remaining })
    }

    /// How many keys in `[from, end)` the snapshot holds: the current records, less the
    /// rolled-back keys that exist now, plus those that existed in the snapshot.
    fn count_at(
        &self,
        backend: &B,
        from: &str,
        end: &str,
        existed: &[(String, bool)],
    ) -> Result<u64> {
        let mut count = self.stored_count(backend, from, end)?;
        for (key, was) in existed.iter().filter(|(k, _)| k.as_str() >= from) {
            let is = self.stored(backend, key)?.is_some();
            match (*was, is) {
                (true, false) => count += 1,
                (false, true) => count = count.saturating_sub(1),
                _ => {}
            }
        }
        Ok(count)
    }

    fn watch(self: &Arc<Self>, prefix: &str, from: Revision) -> Result<CommitStream> {
        self.check_readable()?;
        // Subscribe before reading `durable`; see `syncer` for why this misses nothing.
        let mut live = self.events.subscribe();
        let replay_to = self.durable.load(Ordering::SeqCst);
        let compacted = self.compacted.load(Ordering::SeqCst);
        if from.0 < compacted {
            return Err(Error::Compacted { requested: from, oldest: Revision(compacted) });
        }
        let core = Arc::downgrade(self);
        let prefix = prefix.to_owned();
        let stream = async_stream::try_stream! {
            // `from` is below `u64::MAX` (checked by `Storage::watch`).
            let mut next = from.0 + 1;
            while next <= replay_to {
                let to = replay_to.min(next + CHUNK - 1);
                let Some(strong) = core.upgrade() else { return };
                let chunk = strong.replay(next, to);
                drop(strong);
                let chunk = chunk?;
                for commit in chunk.chunk_by(|a, b| a.revision == b.revision) {
                    if let Some(commit) = under(&prefix, commit) {
                        yield commit;
                    }
                }
                next = to + 1;
            }
            loop {
                match live.recv().await {
                    Ok(events) => {
                        let Some(revision) = events.first().map(|e| e.revision.0) else {
                            continue;
                        };
                        if revision < next {
                            continue;
                        }
                        if revision > next {
                            Err(Error::Lagged { resume_from: Revision(next - 1) })?;
                        }
                        next = revision + 1;
                        if let Some(commit) = under(&prefix, &events) {
                            yield commit;
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        Err(Error::Lagged { resume_from: Revision(next - 1) })?;
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                }
            }
        };
        Ok(Box::pin(stream))
    }

    /// Compacts one chunk towards `to`; `Ok(true)` once the compaction revision has reached it.
    ///
    /// The gate is held only to advance `compacted`: from then on no reader goes below it (reads
    /// check it under the gate), so the old events are deleted outside the gate and writers are
    /// not stalled behind the deletion. If the deletion fails, the store refuses writes until it
    /// heals.
    fn compact_step(&self, to: u64) -> Result<bool> {
        self.check_writable()?;
        let _one_at_a_time = self.compacting.lock().unwrap_or_else(|p| p.into_inner());
        let backend = self.backend()?;
        let (from, step) = {
            let mut gate = self.write_gate();
            let compacted = self.compacted.load(Ordering::SeqCst);
            if to <= compacted {
                return Ok(true);
            }
            let durable = self.durable.load(Ordering::SeqCst);
            if to > durable {
                return Err(Error::FutureRevision {
                    requested: Revision(to),
                    current: Revision(durable),
                });
            }
            let step = to.min(compacted + COMPACT_CHUNK);
            self.compacted.store(step, Ordering::SeqCst);
            while gate.times.front().is_some_and(|&(r, _)| r <= step) {
                gate.times.pop_front();
            }
            (compacted, step)
        };
        if let Err(e) = backend.compact(from, step) {
            // The batch may be half applied until the store is reopened (sled's recovery is
            // atomic, and the open cleans events left below the persisted compaction revision).
            // What it drops no reader asks for any more: only writes are refused.
            self.health.fail(heal::Level::ReadOnly, &e);
            return Err(e);
        }
        Ok(step == to)
    }

    /// The compaction revision the history window asks for now.
    fn retention_target(&self) -> u64 {
        let durable = self.durable.load(Ordering::SeqCst);
        let by_count = durable.saturating_sub(self.window.max_events);
        let cutoff = now_ms().saturating_sub(self.window.max_age.as_millis() as u64);
        let gate = self.read_gate();
        let by_age = gate
            .times
            .iter()
            .take_while(|&&(r, at)| at < cutoff && r <= durable)
            .last()
            .map_or(0, |&(r, _)| r);
        by_count.max(by_age)
    }
}

/// The events of one commit under `prefix`, or `None` when it wrote nothing there.
fn under(prefix: &str, events: &[Arc<WatchEvent>]) -> Option<Commit> {
    let revision = events.first()?.revision;
    let events: Vec<Arc<WatchEvent>> =
        events.iter().filter(|e| e.key.starts_with(prefix)).cloned().collect();
    (!events.is_empty()).then_some(Commit { revision, events })
}

/// The first pipeline stage: drains queued writes and applies them in batches.
async fn committer<B: Backend>(
    core: Weak<Core<B>>,
    mut queued: mpsc::UnboundedReceiver<Queued>,
    to_syncer: mpsc::UnboundedSender<Applied>,
) {
    while let Some(first) = queued.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queued.try_recv() {
                Ok(more) => batch.push(more),
                Err(_) => break,
            }
        }
        // The queue's sender lives in the core, so the core is alive while writes arrive.
        let Some(core) = core.upgrade() else { return };
        let applied = core.apply_batch(batch);
        drop(core);
        if to_syncer.send(applied).is_err() {
            return;
        }
    }
}

/// The second pipeline stage: one sync for every batch applied so far, then publish and answer.
async fn syncer<B: Backend>(core: Weak<Core<B>>, mut applied: mpsc::UnboundedReceiver<Applied>) {
    while let Some(first) = applied.recv().await {
        let mut batches = vec![first];
        while let Ok(more) = applied.try_recv() {
            batches.push(more);
        }
        let Some(core) = core.upgrade() else { return };
        let (settling, answers): (Vec<_>, Vec<_>) =
            batches.into_iter().map(|b| ((b.epoch, b.target, b.commits), b.replies)).unzip();
        let verdicts = if B::SYNCS {
            let syncing = Arc::clone(&core);
            let settled = tokio::task::spawn_blocking(move || syncing.settle(&settling)).await;
            settled.unwrap_or_else(|e| {
                let e = Error::unavailable("flush task failed", e);
                answers.iter().map(|_| Err(shared(&e))).collect()
            })
        } else {
            core.settle(&settling)
        };
        let replies: Vec<(Reply, Result<Vec<Written>>)> = answers
            .into_iter()
            .zip(verdicts)
            .flat_map(|(replies, verdict)| {
                replies.into_iter().map(move |(reply, result)| match &verdict {
                    Ok(()) => (reply, result),
                    Err(e) => (reply, Err(shared(e))),
                })
            })
            .collect();
        // Let go of the core before answering: a caller that drops its last handle right after
        // its write returns must find the backend closed (sled holds a file lock until then).
        drop(core);
        for (reply, result) in replies {
            let _ = reply.send(result);
        }
    }
}

fn spawn_retention<B: Backend>(core_ref: Weak<Core<B>>) {
    let Some(every) = core_ref.upgrade().map(|c| c.window.check_every) else { return };
    let every = every.max(std::time::Duration::from_millis(1));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(core) = core_ref.upgrade() else { return };
            if core.health.write_error().is_some() {
                continue;
            }
            let target = core.retention_target();
            drop(core);
            // One small chunk at a time with a pause between, holding the core only for the step:
            // deletion costs sled about as much as writing, so an unpaced burst would stall
            // writers and watchers (BENCHMARKS.md, Storage).
            loop {
                let Some(core) = core_ref.upgrade() else { return };
                match core.compact_step(target) {
                    Ok(false) => {}
                    Ok(true) => break,
                    Err(error) => {
                        tracing::warn!(%error, target, "history compaction failed");
                        break;
                    }
                }
                drop(core);
                tokio::time::sleep(COMPACT_PAUSE).await;
            }
        }
    });
}

#[async_trait::async_trait]
impl<B: Backend> Store for Local<B> {
    fn failed(&self) -> bool {
        self.0.health.level() == heal::Level::Broken
    }

    fn cannot_write(&self) -> Option<String> {
        self.0.health.cannot_write()
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue> {
        match self.0.write_one(key, Op::Create(value)).await? {
            Written::Put(kv) => Ok(kv),
            Written::Deleted(_) => unreachable!("a create never deletes"),
        }
    }

    async fn get(&self, key: &str) -> Result<KeyValue> {
        self.0.get(key)
    }

    async fn list(&self, req: ListRequest<'_>) -> Result<BackendPage> {
        self.0.list(&req)
    }

    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> Result<KeyValue> {
        match self.0.write_one(key, Op::Update(value, expected)).await? {
            Written::Put(kv) => Ok(kv),
            Written::Deleted(_) => unreachable!("an update never deletes"),
        }
    }

    async fn delete(&self, key: &str, pre: Preconditions) -> Result<Deleted> {
        match self.0.write_one(key, Op::Delete(pre)).await? {
            Written::Deleted(deleted) => Ok(deleted),
            Written::Put(_) => unreachable!("a delete never puts"),
        }
    }

    async fn commit(&self, writes: Vec<Write>) -> Result<Committed> {
        let ops = writes
            .into_iter()
            .map(|w| match w {
                Write::Create { key, value } => (key, Op::Create(value)),
                Write::Update { key, value, expected } => (key, Op::Update(value, expected)),
                Write::Delete { key, expected } => {
                    let pre = Preconditions { mod_revision: Some(expected), create_revision: None };
                    (key, Op::Delete(pre))
                }
            })
            .collect();
        let written = self.0.write(ops).await?;
        let revision = match written.first() {
            Some(Written::Put(kv)) => kv.mod_revision,
            Some(Written::Deleted(d)) => d.revision,
            None => return Err(Error::corrupt("commit", "a commit answered with nothing")),
        };
        Ok(Committed { revision, written })
    }

    async fn watch(&self, prefix: &str, from: Revision) -> Result<CommitStream> {
        self.0.watch(prefix, from)
    }

    async fn current_revision(&self) -> Result<Revision> {
        self.0.check_readable()?;
        Ok(Revision(self.0.durable.load(Ordering::SeqCst)))
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        while !self.0.compact_step(revision.0)? {
            tokio::task::yield_now().await;
        }
        Ok(())
    }

    async fn import(&self, at: Revision, items: Vec<(String, Bytes)>) -> Result<()> {
        let core = Arc::clone(&self.0);
        tokio::task::spawn_blocking(move || core.import(at.0, items))
            .await
            .unwrap_or_else(|e| Err(Error::unavailable("restore task failed", e)))
    }

    async fn finish_import(&self, at: Revision) -> Result<()> {
        let core = Arc::clone(&self.0);
        tokio::task::spawn_blocking(move || core.finish_import(at.0))
            .await
            .unwrap_or_else(|e| Err(Error::unavailable("restore task failed", e)))
    }
}
