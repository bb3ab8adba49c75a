//! Revisioned key-value storage for the hub: the contract every backend keeps, and the handle
//! the rest of the hub uses.
//!
//! This crate knows nothing of resources, JSON or HTTP: it stores bytes under keys and issues
//! revisions, in the manner of Kubernetes' `storage.Interface` over etcd.
//!
//! # The contract
//!
//! * **Keys** are UTF-8 paths (`/registry/managedclusters/c1`); `list` and `watch` take a
//!   **prefix** that ends with `/`. The rules are in [`key`]; a broken rule is
//!   [`Error::InvalidKey`]. Values are at most [`MAX_VALUE_BYTES`] (1.5 MiB, etcd's default
//!   request limit); larger ones are [`Error::TooLarge`]. Nothing is written when a call fails.
//! * **One global revision per write.** Every successful create, update, delete or commit gets
//!   exactly one new [`Revision`], greater than all earlier ones, never reused (also across
//!   restarts); a failed one takes none. A key carries the revision that created it
//!   (`create_revision`, which changes when the key is deleted and created again) and the
//!   revision that last changed it (`mod_revision`).
//! * **A commit of several keys is one write.** [`Storage::commit`] takes up to
//!   [`MAX_COMMIT_KEYS`] (128, etcd's default `--max-txn-ops`) [`Write`]s on distinct keys, each a
//!   compare-and-swap (create-if-absent, update or delete at an expected mod revision), their
//!   keys and values together at most [`MAX_COMMIT_BYTES`] (more is [`Error::CommitTooLarge`]).
//!   Either every write holds and all are stored at one revision, or none is written and no
//!   revision is used; the error is the first failing key's own ([`Error::AlreadyExists`],
//!   [`Error::NotFound`] or [`Error::Conflict`], naming the key and the revision compared). Every
//!   key of a commit gets that revision as its `mod_revision` (`resourceVersion`s of objects
//!   written together are equal, as in etcd). sled stores a commit as one batch, etcd as one
//!   transaction.
//! * **Durability.** A write returns `Ok` only once it is durable: after the backend's flush
//!   (sled) or after etcd committed it. Reads never return a value that is not yet durable, and
//!   watchers receive an event only once its write is durable.
//! * **Failures.** An embedded store whose disk fills, or whose write, sync or compaction fails,
//!   turns read-only: writes get [`Error::Unavailable`] ("the store cannot write: <cause>",
//!   [`Storage::cannot_write`]) while reads and watches serve what is durable, and it heals by
//!   itself once it can write again, losing nothing it acknowledged; one that cannot heal in
//!   place says so ([`Storage::failed`]).
//! * **Reads.** [`Storage::get`] answers [`Error::NotFound`] for an absent key (see
//!   [`Storage::try_get`]). [`Storage::list`] returns a consistent snapshot in ascending key order,
//!   at the current revision or at a past one still in the kept history; pages of one list share
//!   the first page's revision through the continue token. A revision below the kept history is
//!   [`Error::Compacted`] (also for a continue token whose snapshot was compacted away), one above
//!   the current revision [`Error::FutureRevision`].
//! * **Writes.** [`Storage::create`] fails with [`Error::AlreadyExists`]; [`Storage::update`] is a
//!   compare-and-swap on `mod_revision` ([`Error::Conflict`], or [`Error::NotFound`] if the key is
//!   gone); [`Storage::delete`] checks [`Preconditions`] (mod revision and/or create revision).
//!   [`Storage::guaranteed_update`] is the read–modify–CAS loop: it calls the closure with the
//!   current value, retries on a conflicting concurrent write, and writes nothing (no new
//!   revision) when the closure answers [`Update::Unchanged`] or returns the bytes already stored.
//! * **Watch.** [`Storage::watch`]`(prefix, from)` streams every change under `prefix` with a
//!   revision greater than `from`, in revision order, each exactly once, with the previous value.
//!   The events of one commit share its revision and arrive one after another in key order;
//!   [`Storage::watch_commits`] hands each commit's events over together as one [`Commit`], so
//!   a watcher can apply a commit whole. Resuming "after `from`" skips every event of `from`.
//!   Events of the kept history are replayed first, then live events follow with no gap. `from`
//!   below the compaction revision is [`Error::Compacted`]; a `from` in the future simply waits. A
//!   watcher that cannot keep up with the live buffer is ended with [`Error::Lagged`] (it never
//!   stalls writers or other watchers) and resumes from the revision that error names. A stream
//!   ends (`None`) only when the store is closed.
//! * **History and compaction.** [`Storage::compact`]`(r)` discards the history below `r`:
//!   afterwards reads at revisions `< r` and watches from `< r` are [`Error::Compacted`]; reads at
//!   `r` and later still work. Embedded backends also compact on their own to keep a configured
//!   window ([`HistoryWindow`]). A backend may keep more than the contract promises (etcd keeps the
//!   event at exactly `r`), never less.
//! * **Restore.** [`Storage::restore`]`(engine, after)` makes a new store from a snapshot (keys
//!   and values, as a list at one revision reads them) on any backend; a target that holds any
//!   key or revision already (for etcd: any key under the prefix) is [`Error::NotEmpty`] and
//!   left as it was. Keys go in with [`Restore::put`] in strictly ascending order (else
//!   [`Error::Restore`]); [`Restore::finish`] returns the store and its revision `R > after`.
//!   Every key holds its value with create and mod revisions in `(after, R]` (the embedded
//!   backends write them all at `after + 1`, as one commit; etcd in transactions, its own
//!   revisions shifted by an offset the restore records under the prefix). `R` is also the
//!   compaction revision: reads at and watches from revisions below it are
//!   [`Error::Compacted`], so a reader of the original store, whose revisions are at most
//!   `after`, relists rather than resuming into a different history; at `R` and later
//!   everything works, and revisions go on after `R`, across restarts. A store whose restore
//!   did not finish is refused: opening it is [`Error::Restore`] (naming what to delete), and
//!   restoring into it again is `NotEmpty` (or that same error).
//!
//! Backends: `memory` (the reference semantics and the test double), `sled` (the embedded
//! default) and `etcd` (several hub replicas). They are chosen at start-up with [`Engine`]; no code
//! outside a backend's own module knows which one runs.

pub mod key;

mod engine;
mod error;
mod etcd;
mod fence;
mod local;
mod memory;
mod offset;
mod restore;
mod revision;
mod sled;
mod types;

use std::sync::Arc;

use bytes::Bytes;
use futures::stream::BoxStream;

pub use engine::{
    DEFAULT_MIN_FREE_BYTES, Engine, EtcdOptions, HistoryWindow, LocalOptions, SledOptions,
};
pub use error::{BoxError, Error, Result};
pub use fence::Fence;
pub use restore::Restore;
pub use revision::Revision;
pub use types::{
    Commit, Committed, Deleted, EventKind, KeyValue, ListOptions, ListPage, Preconditions, Update,
    UpdateOutcome, WatchEvent, Write, Written,
};

use types::ContinueToken;

/// The largest value accepted, in bytes: 1.5 MiB, etcd's default request limit.
pub const MAX_VALUE_BYTES: usize = 1536 * 1024;

/// The most keys one [`Storage::commit`] writes: etcd's default `--max-txn-ops` (a commit is one
/// etcd transaction of one compare and one operation per key).
pub const MAX_COMMIT_KEYS: usize = 128;

/// The most bytes of keys and values one [`Storage::commit`] writes: as for one value, so a
/// commit fits the etcd request limit the etcd backend asks for (`--max-request-bytes` of
/// 2 MiB).
pub const MAX_COMMIT_BYTES: usize = MAX_VALUE_BYTES;

/// A stream of watch events; see the contract in the crate docs. Events are shared: every
/// watcher of an embedded backend receives the same allocation, never a copy of its own.
pub type WatchStream = BoxStream<'static, Result<Arc<WatchEvent>>>;

/// A stream of watch events grouped by commit: each item holds every event of one revision
/// under the watched prefix.
pub type CommitStream = BoxStream<'static, Result<Commit>>;

/// A list request as backends see it: validated, with the continue token decoded.
#[derive(Debug, Clone)]
pub(crate) struct ListRequest<'a> {
    pub(crate) prefix: &'a str,
    /// Only keys strictly after this one.
    pub(crate) start_after: Option<&'a str>,
    /// At most this many items (`0` = all).
    pub(crate) limit: usize,
    /// The snapshot to read; `None` = current.
    pub(crate) revision: Option<Revision>,
    /// Whether to count the keys after the page ([`ListOptions::skip_remaining`]).
    pub(crate) count_remaining: bool,
}

/// What a backend returns for one list request.
#[derive(Debug)]
pub(crate) struct BackendPage {
    pub(crate) items: Vec<KeyValue>,
    pub(crate) revision: Revision,
    /// More items follow the last one returned.
    pub(crate) more: bool,
    /// How many keys of the range follow the last one returned, at `revision` (0 unless
    /// `more`).
    pub(crate) remaining: u64,
}

/// The primitive operations a backend implements. Arguments arrive validated (keys, prefixes,
/// sizes); everything else in the contract is the backend's job.
#[async_trait::async_trait]
pub(crate) trait Store: Send + Sync + 'static {
    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue>;
    async fn get(&self, key: &str) -> Result<KeyValue>;
    async fn list(&self, req: ListRequest<'_>) -> Result<BackendPage>;
    /// Replaces the value if the key's `mod_revision` equals `expected`.
    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> Result<KeyValue>;
    async fn delete(&self, key: &str, pre: Preconditions) -> Result<Deleted>;
    /// Writes all of `writes` at one revision or none of them. The writes arrive validated,
    /// at least one, in ascending key order with no key twice; the answer lists what each did,
    /// in that order.
    async fn commit(&self, writes: Vec<Write>) -> Result<Committed>;
    /// [`Store::commit`], landing only while `fence`'s mod revision is `token`
    /// ([`Error::Fenced`] otherwise). Backends that serve one hub refuse it.
    async fn commit_fenced(
        &self,
        writes: Vec<Write>,
        fence: &str,
        token: Revision,
    ) -> Result<Committed> {
        let _ = (writes, token);
        Err(Error::Unavailable {
            message: format!("fenced writes (fence {fence:?}) need the etcd backend"),
            source: None,
        })
    }
    async fn watch(&self, prefix: &str, from: Revision) -> Result<CommitStream>;
    async fn current_revision(&self) -> Result<Revision>;
    async fn compact(&self, revision: Revision) -> Result<()>;
    /// Whether the store refuses all work until it is reopened (see [`Storage::failed`]).
    fn failed(&self) -> bool {
        false
    }
    /// Why the store refuses writes now, while it does (see [`Storage::cannot_write`]).
    fn cannot_write(&self) -> Option<String> {
        None
    }
    /// Restore, embedded backends only ([`Storage::restore`]): stores `items` (validated,
    /// ascending, absent keys) at revision `at`, without events.
    async fn import(&self, _at: Revision, _items: Vec<(String, Bytes)>) -> Result<()> {
        Err(Error::Restore { reason: "this backend restores through its own writes".into() })
    }
    /// Restore: makes `at` the store's revision and compaction revision, durably.
    async fn finish_import(&self, _at: Revision) -> Result<()> {
        Err(Error::Restore { reason: "this backend restores through its own writes".into() })
    }
}

/// The handle to an open store. Cheap to clone; every clone shares the backend.
#[derive(Clone)]
pub struct Storage {
    inner: Arc<dyn Store>,
    observer: Option<Arc<dyn Observer>>,
    /// Set on a [`Storage::fenced`] handle: every write compares the fence.
    fence: Option<Fence>,
}

/// The operations an [`Observer`] is told about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// [`Storage::create`] (and a guaranteed update's create).
    Create,
    /// [`Storage::get`] and [`Storage::try_get`] (and a guaranteed update's read).
    Get,
    /// [`Storage::list`].
    List,
    /// [`Storage::update`] (and a guaranteed update's write).
    Update,
    /// [`Storage::delete`] (and a guaranteed update's delete).
    Delete,
    /// [`Storage::commit`] (reported on the commit's first key).
    Commit,
}

impl Operation {
    /// The lower-case name (`create`, `get`, ...), as kube-apiserver's storage metrics label
    /// operations.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "create",
            Operation::Get => "get",
            Operation::List => "list",
            Operation::Update => "update",
            Operation::Delete => "delete",
            Operation::Commit => "commit",
        }
    }
}

/// Told how long each storage operation took (for metrics). Called on the caller's task after
/// the operation finished, successful or not; must not block.
pub trait Observer: Send + Sync {
    /// `op` on `key` (for lists: the prefix) took `elapsed`.
    fn observe(&self, op: Operation, key: &str, elapsed: std::time::Duration);
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storage").finish_non_exhaustive()
    }
}

impl Storage {
    /// Opens (or creates) the store described by `engine`.
    pub async fn open(engine: Engine) -> Result<Storage> {
        let inner = match engine {
            Engine::Memory(options) => crate::memory::open(options),
            Engine::Sled(options) => crate::sled::open(options).await?,
            Engine::Etcd(options) => crate::restore::open_etcd(options).await?,
        };
        Ok(Storage { inner, observer: None, fence: None })
    }

    /// The same store, with every operation reported to `observer` (replacing any earlier one).
    pub fn observed(&self, observer: Arc<dyn Observer>) -> Storage {
        Storage { observer: Some(observer), ..self.clone() }
    }

    /// Runs `f` and reports its duration as `op` on `key`.
    async fn timed<T>(
        &self,
        op: Operation,
        key: &str,
        f: impl std::future::Future<Output = T>,
    ) -> T {
        match &self.observer {
            None => f.await,
            Some(observer) => {
                let start = std::time::Instant::now();
                let out = f.await;
                observer.observe(op, key, start.elapsed());
                out
            }
        }
    }

    /// Creates `key`; [`Error::AlreadyExists`] if it is present.
    pub async fn create(&self, key: &str, value: impl Into<Bytes>) -> Result<KeyValue> {
        let value = value.into();
        check_write(key, &value)?;
        self.timed(Operation::Create, key, self.store_create(key, value)).await
    }

    /// The current value of `key`; [`Error::NotFound`] if absent.
    pub async fn get(&self, key: &str) -> Result<KeyValue> {
        key::validate_key(key)?;
        self.timed(Operation::Get, key, self.inner.get(key)).await
    }

    /// The current value of `key`, or `None`.
    pub async fn try_get(&self, key: &str) -> Result<Option<KeyValue>> {
        match self.get(key).await {
            Ok(kv) => Ok(Some(kv)),
            Err(Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// One page of the keys under `prefix`; see the contract for snapshots and tokens.
    pub async fn list(&self, prefix: &str, options: &ListOptions) -> Result<ListPage> {
        key::validate_prefix(prefix)?;
        let token = match &options.continue_token {
            Some(t) => Some(ContinueToken::decode(t, prefix)?),
            None => None,
        };
        if let Some(after) = &options.start_after {
            if !after.starts_with(prefix) {
                return Err(Error::InvalidContinue { reason: "start key outside the prefix" });
            }
        }
        let start_after = match &token {
            Some(t) => Some(t.last_key.as_str()),
            None => options.start_after.as_deref(),
        };
        let req = ListRequest {
            prefix,
            start_after,
            limit: options.limit,
            revision: token.as_ref().map(|t| t.revision).or(options.revision),
            count_remaining: !options.skip_remaining,
        };
        let page = self.timed(Operation::List, prefix, self.inner.list(req)).await?;
        let continue_token = match (page.more, page.items.last()) {
            (true, Some(last)) => {
                Some(ContinueToken { revision: page.revision, last_key: last.key.clone() }.encode())
            }
            _ => None,
        };
        let counted = continue_token.is_some() && !options.skip_remaining;
        let remaining = if counted { page.remaining } else { 0 };
        Ok(ListPage { items: page.items, revision: page.revision, continue_token, remaining })
    }

    /// Replaces the value of `key` if its `mod_revision` is still `expected`.
    pub async fn update(
        &self,
        key: &str,
        value: impl Into<Bytes>,
        expected: Revision,
    ) -> Result<KeyValue> {
        let value = value.into();
        check_write(key, &value)?;
        self.timed(Operation::Update, key, self.store_update(key, value, expected)).await
    }

    /// Deletes `key` if `pre` holds; returns the deleted value and the delete's revision.
    pub async fn delete(&self, key: &str, pre: &Preconditions) -> Result<Deleted> {
        key::validate_key(key)?;
        self.timed(Operation::Delete, key, self.store_delete(key, *pre)).await
    }

    /// Writes every one of `writes` at one new revision, or none of them; see the contract.
    /// What each write did comes back in the order given.
    pub async fn commit(&self, writes: Vec<Write>) -> Result<Committed> {
        check_commit(&writes)?;
        if writes.is_empty() {
            let revision = self.current_revision().await?;
            return Ok(Committed { revision, written: Vec::new() });
        }
        // Backends take the writes in key order; the answer goes back in the caller's.
        let mut order: Vec<usize> = (0..writes.len()).collect();
        order.sort_by(|&a, &b| writes[a].key().cmp(writes[b].key()));
        let mut slots: Vec<Option<Write>> = writes.into_iter().map(Some).collect();
        let sorted: Vec<Write> = order.iter().filter_map(|&i| slots[i].take()).collect();
        if let Some(twice) = sorted.windows(2).find(|w| w[0].key() == w[1].key()) {
            return Err(Error::InvalidKey {
                key: twice[0].key().to_owned(),
                reason: "written twice in one commit",
            });
        }
        let first = sorted[0].key().to_owned();
        let committed = self.timed(Operation::Commit, &first, self.commit_sorted(sorted)).await?;
        let mut written: Vec<Option<Written>> = vec![None; order.len()];
        for (w, &i) in committed.written.into_iter().zip(&order) {
            written[i] = Some(w);
        }
        Ok(Committed {
            revision: committed.revision,
            written: written.into_iter().flatten().collect(),
        })
    }

    /// The read–modify–CAS loop. `f` gets the current value (`None` if absent) and decides; it
    /// may run several times when concurrent writers win the race, so it must not have side
    /// effects. Its own errors abort the loop and are returned as they are. `pre` is checked on
    /// every attempt ([`Error::Conflict`], or [`Error::NotFound`] if the key is absent).
    /// Returning the stored bytes, or [`Update::Unchanged`], writes nothing.
    pub async fn guaranteed_update<E, F>(
        &self,
        key: &str,
        pre: &Preconditions,
        mut f: F,
    ) -> Result<UpdateOutcome, E>
    where
        E: From<Error>,
        F: FnMut(Option<&KeyValue>) -> Result<Update, E>,
    {
        key::validate_key(key)?;
        let preconditioned = pre.mod_revision.is_some() || pre.create_revision.is_some();
        loop {
            let current = self.try_get(key).await?;
            match &current {
                Some(kv) => pre.check(kv)?,
                None if preconditioned => {
                    return Err(Error::NotFound { key: key.to_owned() }.into());
                }
                None => {}
            }
            let attempt = match (f(current.as_ref())?, current) {
                (Update::Unchanged, current) => return Ok(UpdateOutcome::Unchanged(current)),
                (Update::Put(value), Some(kv)) if kv.value == value => {
                    return Ok(UpdateOutcome::Unchanged(Some(kv)));
                }
                (Update::Delete, None) => {
                    return Err(Error::NotFound { key: key.to_owned() }.into());
                }
                (Update::Put(value), None) => {
                    check_size(key, &value)?;
                    let put = self.store_create(key, value);
                    self.timed(Operation::Create, key, put).await.map(UpdateOutcome::Put)
                }
                (Update::Put(value), Some(kv)) => {
                    check_size(key, &value)?;
                    let put = self.store_update(key, value, kv.mod_revision);
                    self.timed(Operation::Update, key, put).await.map(UpdateOutcome::Put)
                }
                (Update::Delete, Some(kv)) => {
                    let exact = Preconditions {
                        mod_revision: Some(kv.mod_revision),
                        create_revision: None,
                    };
                    let delete = self.store_delete(key, exact);
                    self.timed(Operation::Delete, key, delete).await.map(UpdateOutcome::Deleted)
                }
            };
            match attempt {
                Ok(outcome) => return Ok(outcome),
                // Somebody else wrote between our read and our CAS: read again and retry.
                Err(
                    Error::Conflict { .. } | Error::AlreadyExists { .. } | Error::NotFound { .. },
                ) => {
                    tokio::task::yield_now().await;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Streams the changes under `prefix` after revision `from`; see the contract.
    pub async fn watch(&self, prefix: &str, from: Revision) -> Result<WatchStream> {
        use futures::StreamExt as _;
        let commits = self.watch_commits(prefix, from).await?;
        let events = commits.flat_map(|item| {
            let events: Vec<Result<Arc<WatchEvent>>> = match item {
                Ok(commit) => commit.events.into_iter().map(Ok).collect(),
                Err(e) => vec![Err(e)],
            };
            futures::stream::iter(events)
        });
        Ok(Box::pin(events))
    }

    /// Streams the changes under `prefix` after revision `from`, each commit's events together;
    /// see the contract.
    pub async fn watch_commits(&self, prefix: &str, from: Revision) -> Result<CommitStream> {
        key::validate_prefix(prefix)?;
        if from.0 >= i64::MAX as u64 {
            // No backend reaches this revision (etcd's are `i64`): the watch waits forever.
            return Ok(Box::pin(futures::stream::pending()));
        }
        self.inner.watch(prefix, from).await
    }

    /// The revision of the last durable write.
    pub async fn current_revision(&self) -> Result<Revision> {
        self.inner.current_revision().await
    }

    /// Whether the store will not serve again until the process opens it again: an embedded
    /// store that, reopened after a failed write, found acknowledged writes missing or damage,
    /// or could not be reopened although it had room. A store that merely cannot write (a full
    /// disk) is not failed: it heals in place ([`Storage::cannot_write`]); nor is an outage of
    /// a remote store (etcd): it serves again when etcd does.
    pub fn failed(&self) -> bool {
        self.inner.failed()
    }

    /// Why the store refuses writes now, while it does: an embedded store whose write, sync or
    /// compaction failed (a full disk, say) serves reads of what is durable and refuses writes
    /// with [`Error::Unavailable`] ("the store cannot write: <cause>") until it heals: once its
    /// backend has room again it is reopened from disk, every acknowledged write there, and
    /// writes resume. `None` for a remote store (etcd), whose outages show as failing calls.
    pub fn cannot_write(&self) -> Option<String> {
        self.inner.cannot_write()
    }

    /// Discards the history below `revision`. Compacting at or below an earlier compaction is a
    /// no-op; above the current revision it is [`Error::FutureRevision`].
    pub async fn compact(&self, revision: Revision) -> Result<()> {
        self.inner.compact(revision).await
    }
}

/// A commit's limits and every key and value in it (a value over its own limit is named as
/// such before the commit's total is checked).
fn check_commit(writes: &[Write]) -> Result<()> {
    let bytes: usize = writes.iter().map(|w| w.key().len() + w.value().len()).sum();
    if writes.len() > MAX_COMMIT_KEYS {
        return Err(Error::CommitTooLarge { keys: writes.len(), bytes });
    }
    for w in writes {
        key::validate_key(w.key())?;
        if w.value().len() > MAX_VALUE_BYTES {
            return Err(Error::TooLarge {
                key: w.key().to_owned(),
                size: w.value().len(),
                limit: MAX_VALUE_BYTES,
            });
        }
    }
    if bytes > MAX_COMMIT_BYTES {
        return Err(Error::CommitTooLarge { keys: writes.len(), bytes });
    }
    Ok(())
}

fn check_write(key: &str, value: &Bytes) -> Result<()> {
    key::validate_key(key)?;
    check_size(key, value)
}

fn check_size(key: &str, value: &Bytes) -> Result<()> {
    if value.len() > MAX_VALUE_BYTES {
        return Err(Error::TooLarge {
            key: key.to_owned(),
            size: value.len(),
            limit: MAX_VALUE_BYTES,
        });
    }
    Ok(())
}
