//! The watch cache: one storage watch over every kind feeds, per kind, an in-memory snapshot, a
//! bounded history ring and the fan-out to watchers. Each object is parsed and serialized once
//! per event, not once per watcher; every watcher has a bounded buffer and is ended (to resume
//! or relist) when it falls behind, so a slow client never stalls the others.
//!
//! A storage commit may write several objects at one revision. The cache applies a commit
//! whole: each kind's part under that kind's lock (a list or a subscription sees all of it or
//! none), its revision published only once every kind has it, and a watcher is sent its kind's
//! events of the commit as one message (so resuming after a revision it was sent never skips
//! part of that revision).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use futures::StreamExt;
use ocm_storage::{Commit, KeyValue, ListOptions, Revision, Storage};
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::machinery::background::Background;
use crate::machinery::backoff::{Backoff, Retries};
use crate::machinery::error::ApiError;
use crate::machinery::object;
use crate::machinery::scheme::{Scheme, kind_prefix};
pub use crate::store::cached::CachedObject;

// The cache's one storage watch covers every object key, so it sees every write and its
// revision is the store's.
use crate::machinery::scheme::STORAGE_ROOT as ROOT;

/// How long the start waits for the cache to apply the history it reads back.
const STARTUP_REPLAY_WAIT: Duration = Duration::from_secs(30);

/// Objects read from the store per page when the cache lists it whole: a page's bytes are held
/// beside the objects made of them, and each page at an older revision (the start's replay)
/// reads the history since it again, so pages are few and bounded.
const RELIST_PAGE: usize = 50_000;

/// How often the objects that came to rest are packed ([`CachedObject::pack`]).
const PACK_EVERY: Duration = Duration::from_secs(1);

/// Objects packed per turn on the blocking pool.
const PACK_BATCH: usize = 4096;

/// A storage failure as the API reports it.
fn storage_error(e: ocm_storage::Error) -> ApiError {
    crate::machinery::error::from_storage(e, Default::default())
}

/// Tuning of the cache.
#[derive(Debug, Clone, Copy)]
pub struct CacheConfig {
    /// Events kept per kind for watches that resume from a resourceVersion.
    pub history_per_kind: usize,
    /// Events older than this are dropped even below `history_per_kind`: a kind that went
    /// quiet after a burst (10,000 clusters joining) does not keep the burst's states alive.
    /// Kubernetes' watch cache promises 75 s (`eventFreshDuration`); a watch resuming from
    /// an older resourceVersion gets 410 Gone and relists, as it would there.
    pub history_max_age: Duration,
    /// Messages (one revision's events of the kind each) buffered per watcher before it is
    /// ended as too slow.
    pub watcher_buffer: usize,
    /// How often watchers learn the cache's revision (for bookmarks).
    pub progress_every: Duration,
    /// Revisions of the store's history the cache reads back at start (as far as the store
    /// keeps them), so a watch resumed after a restart or failover from a resourceVersion
    /// within them gets the events it missed rather than 410 Gone.
    pub replay_at_start: u64,
    /// JSON bytes of the most recent objects kept parsed as well, so a fresh event's readers
    /// share one parse; older objects are kept as JSON only (a parsed object takes several
    /// times its JSON). The default of 2 MiB holds the last seconds of Lease renewals of a
    /// large fleet (their readers come within milliseconds), or a few of the largest
    /// ManifestWorks.
    pub hot_bytes: usize,
}

impl Default for CacheConfig {
    fn default() -> CacheConfig {
        CacheConfig {
            history_per_kind: 10_000,
            history_max_age: Duration::from_secs(75),
            replay_at_start: 10_000,
            watcher_buffer: 1024,
            progress_every: Duration::from_secs(1),
            hot_bytes: 2 << 20,
        }
    }
}

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Created (or, for a watch that starts from a snapshot, already there).
    Added,
    /// Changed.
    Modified,
    /// Deleted; the object is its last state with the deletion's revision.
    Deleted,
}

/// One change of one object.
#[derive(Debug)]
pub struct CacheEvent {
    /// What happened.
    pub kind: EventType,
    /// The revision of the change.
    pub rev: u64,
    /// The object after the change (for deletes: the last state, at the delete's revision).
    pub object: Arc<CachedObject>,
    /// The object before the change, if it existed.
    pub prev: Option<Arc<CachedObject>>,
}

/// What a watcher receives.
#[derive(Debug, Clone)]
pub enum Msg {
    /// The changes of one revision (one commit's objects of the kind, in key order; for a
    /// watcher of one object, its change), never split across messages.
    Events(Arc<[Arc<CacheEvent>]>),
    /// Every change up to this revision has been sent before this message.
    Progress(u64),
}

#[derive(Default)]
struct KindState {
    items: BTreeMap<String, Arc<CachedObject>>,
    /// Recent events, oldest first, with when the cache published them. Several events may
    /// share a revision (one commit); the oldest revision may be there only in part.
    history: VecDeque<(Instant, Arc<CacheEvent>)>,
    /// Every event with a revision above this one is in `history`.
    history_start: u64,
    rev: u64,
    watchers: Vec<mpsc::Sender<Msg>>,
    /// Watchers of one object (a `metadata.name` field selector), by its key: an event is
    /// offered to those of its own key only, as kube-apiserver's watch cache triggers watchers
    /// by an indexed field, so a thousand agents each watching their own object cost one send
    /// per event, not a thousand.
    named: HashMap<String, Vec<mpsc::Sender<Msg>>>,
    /// Watchers ended because their buffer was full, since start.
    terminated: u64,
}

/// Offers `events` to `tx` as one message; a watcher whose buffer is full is ended (dropping
/// its sender closes its stream). False when the watcher is to be dropped; `terminated` counts
/// the ones ended for a full buffer.
fn offer_to(tx: &mpsc::Sender<Msg>, events: Arc<[Arc<CacheEvent>]>, terminated: &mut u64) -> bool {
    match tx.try_send(Msg::Events(events)) {
        Ok(()) => true,
        Err(mpsc::error::TrySendError::Full(_)) => {
            *terminated += 1;
            false
        }
        Err(mpsc::error::TrySendError::Closed(_)) => false,
    }
}

impl KindState {
    /// Offers one commit's `events` of this kind (one revision, distinct objects) to the kind's
    /// watchers, all in one message, and each event to the watchers of its own object only.
    fn offer(&mut self, events: &Arc<[Arc<CacheEvent>]>) {
        let KindState { watchers, named, terminated, .. } = self;
        watchers.retain(|tx| offer_to(tx, Arc::clone(events), terminated));
        for event in events.iter() {
            if let Some(of_key) = named.get_mut(&event.object.key) {
                let own: Arc<[Arc<CacheEvent>]> = Arc::from([Arc::clone(event)]);
                of_key.retain(|tx| offer_to(tx, Arc::clone(&own), terminated));
                if of_key.is_empty() {
                    named.remove(&event.object.key);
                }
            }
        }
    }

    /// Drops the oldest event of the history; a watch can no longer resume from before it.
    fn forget_oldest(&mut self) {
        if let Some((_, old)) = self.history.pop_front() {
            self.history_start = old.rev;
        }
    }
}

/// What the cache holds of one kind, at one moment.
#[derive(Debug, Clone)]
pub struct KindStats<'a> {
    /// The kind's storage prefix.
    pub prefix: &'a str,
    /// Objects in the snapshot.
    pub objects: usize,
    /// Events in the history ring.
    pub history: usize,
    /// Registered watchers.
    pub watchers: usize,
    /// Watchers ended for a full buffer since start.
    pub terminated: u64,
    /// The revision the kind is at.
    pub rev: u64,
}

/// A watch registered with the cache: the events to replay first, then the live channel.
#[derive(Debug)]
pub struct Subscription {
    /// Events to send before the live ones (history after the start revision, or the snapshot
    /// as `Added` events).
    pub initial: Vec<Arc<CacheEvent>>,
    /// The revision the initial events bring the watcher to.
    pub rev: u64,
    /// Live events; closed when the watcher is ended for falling behind or on a relist.
    pub live: mpsc::Receiver<Msg>,
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy)]
pub enum Start {
    /// From the current state: every object as `Added`, then changes.
    Snapshot,
    /// Every change after this revision.
    After(u64),
}

/// The watch cache of every kind of a scheme.
pub struct Cache {
    kinds: HashMap<String, Mutex<KindState>>,
    /// The objects kept parsed, newest last, and their JSON bytes in all.
    hot: Mutex<(VecDeque<Arc<CachedObject>>, usize)>,
    /// The objects that came to rest since the packer's last turn.
    resting: Mutex<Vec<Weak<CachedObject>>>,
    rev: watch::Sender<u64>,
    storage: Storage,
    config: CacheConfig,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache").field("rev", &*self.rev.borrow()).finish_non_exhaustive()
    }
}

fn lock(m: &Mutex<KindState>) -> MutexGuard<'_, KindState> {
    // A panic while holding the lock leaves consistent-enough state (each step is a single
    // insert/remove); keep serving rather than poisoning every later request.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Cache {
    /// Loads every kind of `scheme` from `storage` and starts following it.
    pub async fn start(
        storage: Storage,
        scheme: &Scheme,
        config: CacheConfig,
        background: &Background,
    ) -> Result<Arc<Cache>, ApiError> {
        // A view kind shares its prefix with the kind it views; review kinds have no objects.
        let kinds = scheme
            .types()
            .iter()
            .filter(|rt| rt.review.is_none())
            .map(|rt| (rt.prefix.clone(), Mutex::new(KindState::default())))
            .collect();
        let (rev, _) = watch::channel(0);
        let cache = Arc::new(Cache {
            kinds,
            hot: Mutex::default(),
            resting: Mutex::default(),
            rev,
            storage,
            config,
        });
        let now = cache.storage.current_revision().await.map_err(storage_error)?.get();
        let start = cache.relist_for_replay(now).await?;
        background.spawn(Arc::clone(&cache).follow(start));
        background.spawn(Arc::clone(&cache).progress());
        background.spawn(Arc::clone(&cache).pack_at_rest());
        // The history read back is applied before anything reads the cache, so it serves the
        // store as it is now. A store whose newest revisions were written outside the hub's
        // keys (a shared etcd) is never reached: the cache then goes on as it is, current.
        if !cache.wait_for(now, STARTUP_REPLAY_WAIT).await {
            tracing::warn!(
                revision = now,
                cache = cache.revision(),
                "watch cache: the store's newest revision was not reached at start; serving on"
            );
        }
        Ok(cache)
    }

    /// The revision the cache has applied every change up to.
    pub fn revision(&self) -> u64 {
        *self.rev.borrow()
    }

    /// What the cache holds per kind (for metrics), in no particular order.
    pub fn stats(&self) -> Vec<KindStats<'_>> {
        self.kinds
            .iter()
            .map(|(prefix, state)| {
                let st = lock(state);
                KindStats {
                    prefix,
                    objects: st.items.len(),
                    history: st.history.len(),
                    watchers: st.watchers.len() + st.named.values().map(Vec::len).sum::<usize>(),
                    terminated: st.terminated,
                    rev: st.rev,
                }
            })
            .collect()
    }

    /// The configuration.
    pub fn config(&self) -> &CacheConfig {
        &self.config
    }

    fn kind(&self, prefix: &str) -> Result<&Mutex<KindState>, ApiError> {
        self.kinds.get(prefix).ok_or_else(|| ApiError::internal(format!("no cache for {prefix}")))
    }

    /// Lists the store at the revision [`CacheConfig::replay_at_start`] before `now` (or the
    /// oldest it still reads, for a younger or compacted store): the follower then applies the
    /// commits since, so the cache starts with their history. Returns the revision listed.
    async fn relist_for_replay(&self, now: u64) -> Result<u64, ApiError> {
        if now <= 1 || self.config.replay_at_start == 0 {
            return self.relist(None).await;
        }
        let back = now.saturating_sub(self.config.replay_at_start).max(1);
        // Compacted past it: from the oldest revision the store still reads.
        let probe = ListOptions { limit: 1, revision: Some(Revision(back)), ..Default::default() };
        let from = match self.storage.list(ROOT, &probe).await {
            Err(ocm_storage::Error::Compacted { oldest, .. }) => oldest,
            _ => Revision(back),
        };
        match self.relist(Some(from)).await {
            // Compacted further meanwhile (retention runs from the store's open): no history.
            Err(e) if e.code == 410 => self.relist(None).await,
            other => other,
        }
    }

    /// Replaces every kind's state with a list of the store at `at` (now when `None`), ending
    /// every watcher (who must relist), and returns the revision listed.
    async fn relist(&self, at: Option<Revision>) -> Result<u64, ApiError> {
        // In pages at one revision: the bytes of one page at a time, not the whole store's.
        let mut options = ListOptions {
            revision: at,
            limit: RELIST_PAGE,
            skip_remaining: true,
            ..Default::default()
        };
        let mut fresh: HashMap<&str, BTreeMap<String, Arc<CachedObject>>> = HashMap::new();
        let rev = loop {
            let page = self.storage.list(ROOT, &options).await.map_err(storage_error)?;
            for kv in page.items {
                let Some((prefix, _)) = self.kinds.get_key_value(kind_prefix(&kv.key)) else {
                    continue;
                };
                let obj =
                    CachedObject::from_stored(kv.key.clone(), &kv.value, kv.mod_revision.get())?;
                let obj = Arc::new(obj);
                self.rest(&obj);
                fresh.entry(prefix.as_str()).or_default().insert(kv.key, obj);
            }
            match page.continue_token {
                Some(token) => options.continue_token = Some(token),
                None => break page.revision.get(),
            }
        };
        for (prefix, state) in &self.kinds {
            let mut st = lock(state);
            st.items = fresh.remove(prefix.as_str()).unwrap_or_default();
            st.history.clear();
            st.history_start = rev;
            st.rev = rev;
            st.watchers.clear();
            st.named.clear();
        }
        self.rev.send_replace(rev);
        Ok(rev)
    }

    /// Follows the store from `rev` until the hub stops (its background tracker ends this
    /// task). A storage watch that fails or ends is opened again from the last revision
    /// applied, with backoff while the store cannot serve (etcd down, a store that failed), so
    /// the cache follows the store again as soon as it serves; a revision compacted away means a
    /// relist. An outage is never taken for the end of the store.
    async fn follow(self: Arc<Cache>, mut rev: u64) {
        let mut retries = Retries::new(Backoff::STORE);
        'follow: loop {
            let mut stream = match self.storage.watch_commits(ROOT, Revision(rev)).await {
                Ok(s) => s,
                Err(ocm_storage::Error::Compacted { .. }) => {
                    rev = self.relist_until_ok().await;
                    continue;
                }
                Err(e) => {
                    let delay = retries.next_delay();
                    tracing::warn!(error = %e, rev, ?delay, "watch cache: storage watch failed; retrying");
                    tokio::time::sleep(delay).await;
                    continue;
                }
            };
            while let Some(item) = stream.next().await {
                match item {
                    Ok(commit) => {
                        self.apply(&commit);
                        rev = commit.revision.get();
                        retries.reset();
                    }
                    // Behind or compacted away: resumed (or relisted) at once.
                    Err(ocm_storage::Error::Lagged { resume_from }) => {
                        rev = resume_from.get();
                        continue 'follow;
                    }
                    Err(ocm_storage::Error::Compacted { .. }) => {
                        rev = self.relist_until_ok().await;
                        continue 'follow;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, rev, "watch cache: storage watch ended");
                        break;
                    }
                }
            }
            // Failed or ended: opened again from `rev` after a pause that grows while nothing
            // arrives (the store may be down).
            tokio::time::sleep(retries.next_delay()).await;
        }
    }

    async fn relist_until_ok(&self) -> u64 {
        let mut retries = Retries::new(Backoff::STORE);
        loop {
            match self.relist(None).await {
                Ok(rev) => return rev,
                Err(e) => {
                    let delay = retries.next_delay();
                    tracing::warn!(error = %e, ?delay, "watch cache: relist failed; retrying");
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    /// Applies one commit: each kind's events together, then the commit's revision.
    fn apply(&self, commit: &Commit) {
        let rev = commit.revision.get();
        // The commit's events per kind, in key order (a commit rarely spans more than two).
        let mut kinds: Vec<KindEvents<'_>> = Vec::new();
        for ev in &commit.events {
            let Some((prefix, state)) = self.kinds.get_key_value(kind_prefix(&ev.key)) else {
                continue;
            };
            // Only this task changes `items`, so the cached state is the event's previous value:
            // reuse it rather than parse `ev.prev` again.
            let cached = lock(state).items.get(&ev.key).cloned();
            let event = match self.event_of(ev, cached) {
                Ok(event) => Arc::new(event),
                Err(e) => {
                    tracing::error!(error = %e, key = %ev.key, "watch cache: bad stored object");
                    continue;
                }
            };
            match kinds.iter_mut().find(|(p, _, _)| *p == prefix.as_str()) {
                Some((_, _, events)) => events.push(event),
                None => kinds.push((prefix.as_str(), state, vec![event])),
            }
        }
        for (_, state, events) in kinds {
            self.publish(state, rev, events.into());
        }
        self.rev.send_replace(rev);
    }

    fn event_of(
        &self,
        ev: &ocm_storage::WatchEvent,
        cached: Option<Arc<CachedObject>>,
    ) -> Result<CacheEvent, ApiError> {
        let rev = ev.revision.get();
        let prev = match (&ev.prev, cached) {
            (Some(p), Some(c)) if c.rev == p.mod_revision.get() => Some(c),
            (Some(KeyValue { key, value, mod_revision, .. }), _) => {
                let prev = CachedObject::from_stored(key.clone(), value, mod_revision.get())?;
                let prev = Arc::new(prev);
                self.rest(&prev);
                Some(prev)
            }
            (None, _) => None,
        };
        Ok(match ev.kind {
            ocm_storage::EventKind::Put => {
                let object = Arc::new(CachedObject::from_stored(ev.key.clone(), &ev.value, rev)?);
                let kind = if prev.is_some() { EventType::Modified } else { EventType::Added };
                CacheEvent { kind, rev, object, prev }
            }
            ocm_storage::EventKind::Delete => {
                let last = prev.as_ref().ok_or_else(|| {
                    ApiError::internal(format!("delete of {} without its last value", ev.key))
                })?;
                let mut value = Value::clone(&last.value());
                object::set_resource_version(&mut value, rev);
                let object = Arc::new(CachedObject::new(ev.key.clone(), value, rev));
                CacheEvent { kind: EventType::Deleted, rev, object, prev }
            }
        })
    }

    /// Keeps `obj` parsed for a while; the oldest hot objects beyond the budget come to rest.
    fn keep_hot(&self, obj: &Arc<CachedObject>) {
        let mut cooled = Vec::new();
        {
            let mut hot = self.hot.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            hot.0.push_back(Arc::clone(obj));
            hot.1 += obj.json_len();
            while hot.1 > self.config.hot_bytes && hot.0.len() > 1 {
                if let Some(old) = hot.0.pop_front() {
                    hot.1 -= old.json_len();
                    cooled.push(old);
                }
            }
        }
        for old in &cooled {
            self.rest(old);
        }
    }

    /// `obj` at rest: its parsed form dropped, and its JSON packed at the packer's next turn.
    fn rest(&self, obj: &Arc<CachedObject>) {
        obj.cool();
        let mut resting = self.resting.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        resting.push(Arc::downgrade(obj));
    }

    /// Packs the objects that came to rest, every [`PACK_EVERY`], in batches on the blocking
    /// pool (deflating is CPU work), pausing after each as long as it took; an object dropped
    /// meanwhile (replaced, and gone from the history) is skipped.
    async fn pack_at_rest(self: Arc<Cache>) {
        let mut tick = tokio::time::interval(PACK_EVERY);
        loop {
            tick.tick().await;
            let mut resting = std::mem::take(
                &mut *self.resting.lock().unwrap_or_else(std::sync::PoisonError::into_inner),
            );
            while !resting.is_empty() {
                let batch: Vec<_> = resting.drain(..resting.len().min(PACK_BATCH)).collect();
                let started = Instant::now();
                let packed = tokio::task::spawn_blocking(move || {
                    batch.iter().filter_map(Weak::upgrade).for_each(|obj| obj.pack());
                });
                if packed.await.is_err() {
                    tracing::error!("watch cache: packing objects at rest failed");
                }
                // At most half of one core: a start's million objects are packed beside the
                // hub's work, never instead of it.
                tokio::time::sleep(started.elapsed()).await;
            }
            if Arc::strong_count(&self) == 1 {
                return;
            }
        }
    }

    /// Publishes one commit's events of one kind (revision `rev`) under the kind's lock.
    fn publish(&self, state: &Mutex<KindState>, rev: u64, events: Arc<[Arc<CacheEvent>]>) {
        for event in events.iter() {
            self.keep_hot(&event.object);
        }
        let now = Instant::now();
        let mut st = lock(state);
        for event in events.iter() {
            match event.kind {
                EventType::Deleted => {
                    st.items.remove(&event.object.key);
                }
                _ => {
                    st.items.insert(event.object.key.clone(), Arc::clone(&event.object));
                }
            }
            st.history.push_back((now, Arc::clone(event)));
        }
        while st.history.len() > self.config.history_per_kind {
            st.forget_oldest();
        }
        st.rev = rev;
        st.offer(&events);
    }

    async fn progress(self: Arc<Cache>) {
        let mut tick = tokio::time::interval(self.config.progress_every);
        loop {
            tick.tick().await;
            let now = Instant::now();
            for state in self.kinds.values() {
                let mut st = lock(state);
                // Read under the kind's lock: every change of this kind up to it has been
                // offered (a commit's revision becomes global only after all its kinds have it).
                let rev = st.rev.max(self.revision());
                while st.history.front().is_some_and(|(at, _)| {
                    now.saturating_duration_since(*at) > self.config.history_max_age
                }) {
                    st.forget_oldest();
                }
                // A full buffer just misses this tick; closed watchers are dropped.
                st.watchers.retain(|tx| !tx.is_closed());
                st.named.retain(|_, of_key| {
                    of_key.retain(|tx| !tx.is_closed());
                    !of_key.is_empty()
                });
                for tx in st.watchers.iter().chain(st.named.values().flatten()) {
                    let _ = tx.try_send(Msg::Progress(rev));
                }
            }
            if Arc::strong_count(&self) == 1 {
                return;
            }
        }
    }

    /// Waits until the cache has applied every change up to `rev`; false after `timeout`.
    pub async fn wait_for(&self, rev: u64, timeout: Duration) -> bool {
        let mut rx = self.rev.subscribe();
        let fresh = rx.wait_for(|r| *r >= rev);
        matches!(tokio::time::timeout(timeout, fresh).await, Ok(Ok(_)))
    }

    /// Waits until the cache is as fresh as the store is now (a consistent read).
    pub async fn sync(&self) -> Result<u64, ApiError> {
        let now = self
            .storage
            .current_revision()
            .await
            .map_err(|e| crate::machinery::error::from_storage(e, Default::default()))?
            .get();
        if self.wait_for(now, Duration::from_secs(10)).await {
            Ok(self.revision())
        } else {
            Err(ApiError::too_large_resource_version(now, self.revision()))
        }
    }

    /// The objects of a kind under `prefix` (a namespace's, or all), in key order, and the
    /// revision of that snapshot.
    pub fn list(
        &self,
        kind_prefix: &str,
        prefix: &str,
    ) -> Result<(Vec<Arc<CachedObject>>, u64), ApiError> {
        let global = self.revision();
        let st = lock(self.kind(kind_prefix)?);
        let items = st
            .items
            .range(prefix.to_owned()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(_, v)| Arc::clone(v))
            .collect();
        Ok((items, st.rev.max(global)))
    }

    /// How many objects of a kind under `prefix` sort after the key `after` at revision `at`
    /// (a list page's `remainingItemCount`), counted in memory: the objects there now, less
    /// those created since `at`, plus those deleted since, from the history. `None` when the
    /// cache has not reached `at` or no longer holds every event since.
    pub fn count_after(
        &self,
        kind_prefix: &str,
        prefix: &str,
        after: &str,
        at: u64,
    ) -> Result<Option<u64>, ApiError> {
        let st = lock(self.kind(kind_prefix)?);
        if st.rev.max(self.revision()) < at || st.history_start > at {
            return Ok(None);
        }
        let follows = |k: &str| k > after && k.starts_with(prefix);
        let now = st
            .items
            .range::<str, _>((Bound::Excluded(after), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .count();
        // Each key changed since `at`, by its first change since: whether it existed at `at`.
        let mut first: HashMap<&str, bool> = HashMap::new();
        for (_, event) in st.history.iter().rev().take_while(|(_, e)| e.rev > at) {
            if follows(&event.object.key) {
                first.insert(&event.object.key, event.prev.is_some());
            }
        }
        let mut count = now as i64;
        for (key, existed) in first {
            count += i64::from(existed) - i64::from(st.items.contains_key(key));
        }
        Ok(Some(count.max(0) as u64))
    }

    /// One object from the cache.
    pub fn get(&self, kind_prefix: &str, key: &str) -> Result<Option<Arc<CachedObject>>, ApiError> {
        Ok(lock(self.kind(kind_prefix)?).items.get(key).cloned())
    }

    /// Registers a watcher of a kind, or of one object of it when `only` names its key.
    pub fn subscribe(
        &self,
        kind_prefix: &str,
        start: Start,
        only: Option<&str>,
    ) -> Result<Subscription, ApiError> {
        let global = self.revision();
        let (tx, live) = mpsc::channel(self.config.watcher_buffer);
        let mut st = lock(self.kind(kind_prefix)?);
        let (initial, rev) = match start {
            Start::Snapshot => {
                let rev = st.rev.max(global);
                let keys = match only {
                    Some(key) => (Bound::Included(key), Bound::Included(key)),
                    None => (Bound::Unbounded, Bound::Unbounded),
                };
                let initial = st
                    .items
                    .range::<str, _>(keys)
                    .map(|(_, o)| {
                        Arc::new(CacheEvent {
                            kind: EventType::Added,
                            rev: o.rev,
                            object: Arc::clone(o),
                            prev: None,
                        })
                    })
                    .collect();
                (initial, rev)
            }
            Start::After(from) => {
                if from < st.history_start {
                    return Err(ApiError::expired(format!(
                        "too old resource version: {from} ({})",
                        st.history_start + 1
                    )));
                }
                // The history is in revision order: only its tail after `from` is read.
                let after = st.history.partition_point(|(_, e)| e.rev <= from);
                let initial = st
                    .history
                    .range(after..)
                    .filter(|(_, e)| only.is_none_or(|k| e.object.key == k))
                    .map(|(_, e)| Arc::clone(e))
                    .collect::<Vec<_>>();
                (initial, st.rev.max(global).max(from))
            }
        };
        match only {
            Some(key) => st.named.entry(key.to_owned()).or_default().push(tx),
            None => st.watchers.push(tx),
        }
        Ok(Subscription { initial, rev, live })
    }
}

/// One kind's events of a commit: its prefix, its state, the events in key order.
type KindEvents<'a> = (&'a str, &'a Mutex<KindState>, Vec<Arc<CacheEvent>>);

#[cfg(test)]
mod tests {
    use super::*;

    /// An event reaches the kind's watchers and its own object's, never another object's: the
    /// one-object watchers are indexed, not sent everything to filter.
    #[test]
    fn an_event_is_offered_to_its_own_objects_watchers_only() {
        let mut st = KindState::default();
        let channel = || mpsc::channel::<Msg>(4);
        let ((all, mut all_rx), (x, mut x_rx), (y, mut y_rx)) = (channel(), channel(), channel());
        st.watchers.push(all);
        st.named.entry("/registry/k/x".into()).or_default().push(x);
        st.named.entry("/registry/k/y".into()).or_default().push(y);
        let object = Arc::new(CachedObject::new("/registry/k/x".into(), serde_json::json!({}), 7));
        let event = Arc::new(CacheEvent { kind: EventType::Modified, rev: 7, object, prev: None });
        let events: Arc<[Arc<CacheEvent>]> = Arc::from([event]);
        st.offer(&events);
        assert!(matches!(all_rx.try_recv(), Ok(Msg::Events(e)) if e[0].rev == 7));
        assert!(matches!(x_rx.try_recv(), Ok(Msg::Events(e)) if e[0].rev == 7));
        assert!(y_rx.try_recv().is_err(), "another object's watcher was offered the event");
        // A closed one-object watcher is dropped on its object's next event, with its entry.
        drop(x_rx);
        st.offer(&events);
        assert!(!st.named.contains_key("/registry/k/x"));
    }

    /// A storage commit over two kinds is applied whole: lists show all of it at its one
    /// revision, a subscription after the revision before replays all of it and one after it
    /// none, and a live watcher of each kind gets its part as one message.
    #[tokio::test]
    async fn a_commit_over_two_kinds_is_applied_whole() {
        use crate::machinery::scheme::{Profile, Scheme};
        use ocm_storage::Write;
        let background = Background::new();
        let storage = Storage::open(ocm_storage::Engine::Memory(Default::default())).await.unwrap();
        let scheme = Scheme::new(Profile::Hub);
        let cache = Cache::start(storage.clone(), &scheme, CacheConfig::default(), &background)
            .await
            .unwrap();
        let (ns, cm) = ("/registry/core/namespaces/", "/registry/core/configmaps/");
        let mut ns_live = cache.subscribe(ns, Start::Snapshot, None).unwrap();
        let mut cm_live = cache.subscribe(cm, Start::Snapshot, None).unwrap();
        let before = storage.current_revision().await.unwrap().get();
        let object = |name: &str| {
            let v = serde_json::json!({"metadata": {"name": name, "uid": name}});
            bytes::Bytes::from(serde_json::to_vec(&v).unwrap())
        };
        let create = |key: String, name: &str| Write::Create { key, value: object(name) };
        let committed = storage
            .commit(vec![
                create(format!("{ns}a"), "a"),
                create(format!("{ns}b"), "b"),
                create(format!("{cm}d/c"), "c"),
            ])
            .await
            .unwrap();
        let rev = committed.revision.get();
        assert!(cache.wait_for(rev, Duration::from_secs(10)).await);
        let (items, at) = cache.list(ns, ns).unwrap();
        assert_eq!(at, rev);
        assert!(items.len() == 2 && items.iter().all(|o| o.rev == rev));
        let replay = cache.subscribe(ns, Start::After(before), None).unwrap().initial;
        let names: Vec<&str> = replay.iter().map(|e| e.object.namespace_name().1).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(cache.subscribe(ns, Start::After(rev), None).unwrap().initial.is_empty());
        let part = |m: Option<Msg>| match m {
            Some(Msg::Events(e)) => e.iter().map(|e| (e.rev, e.object.key.clone())).collect(),
            _ => Vec::new(),
        };
        let ns_part = part(ns_live.live.recv().await);
        assert_eq!(ns_part, [(rev, format!("{ns}a")), (rev, format!("{ns}b"))]);
        assert_eq!(part(cm_live.live.recv().await), [(rev, format!("{cm}d/c"))]);
        background.stop().await;
    }

    /// A commit's events reach a kind's watcher as one message, in key order, or not at all
    /// (a full watcher is ended); a watcher of one object gets its own event only.
    #[test]
    fn a_commit_is_offered_whole_or_not_at_all() {
        let mut st = KindState::default();
        let (roomy, mut roomy_rx) = mpsc::channel::<Msg>(4);
        let (full, mut full_rx) = mpsc::channel::<Msg>(1);
        full.try_send(Msg::Progress(1)).unwrap();
        let (b, mut b_rx) = mpsc::channel::<Msg>(4);
        st.watchers.extend([roomy, full]);
        st.named.entry("/registry/g/k/b".into()).or_default().push(b);
        let event = |name: &str| {
            let key = format!("/registry/g/k/{name}");
            let object = Arc::new(CachedObject::new(key, serde_json::json!({}), 9));
            Arc::new(CacheEvent { kind: EventType::Added, rev: 9, object, prev: None })
        };
        let commit: Arc<[Arc<CacheEvent>]> = Arc::from([event("a"), event("b"), event("c")]);
        st.offer(&commit);
        let names = |m: Msg| match m {
            Msg::Events(e) => e.iter().map(|e| e.object.namespace_name().1.to_owned()).collect(),
            Msg::Progress(_) => Vec::new(),
        };
        assert_eq!(names(roomy_rx.try_recv().unwrap()), ["a", "b", "c"]);
        assert_eq!(names(b_rx.try_recv().unwrap()), ["b"]);
        assert!(matches!(full_rx.try_recv(), Ok(Msg::Progress(1))));
        assert!(full_rx.try_recv().is_err(), "no part of the commit reached the full watcher");
        assert_eq!((st.watchers.len(), st.terminated), (1, 1));
    }
}
