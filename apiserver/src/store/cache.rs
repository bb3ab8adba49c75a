//! The watch cache: one storage watch over every kind feeds, per kind, an in-memory snapshot, a
//! bounded history ring and the fan-out to watchers. Each object is parsed and serialized once
//! per event, not once per watcher; every watcher has a bounded buffer and is ended (to resume
//! or relist) when it falls behind, so a slow client never stalls the others.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use ocm_storage::{KeyValue, ListOptions, Revision, Storage};
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::machinery::background::Background;
use crate::machinery::error::ApiError;
use crate::machinery::intern;
use crate::machinery::object;
use crate::machinery::scheme::{Scheme, kind_prefix};

// The cache's one storage watch covers every object key, so it sees every write and its
// revision is the store's.
use crate::machinery::scheme::STORAGE_ROOT as ROOT;

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
    /// Events buffered per watcher before it is ended as too slow.
    pub watcher_buffer: usize,
    /// How often watchers learn the cache's revision (for bookmarks).
    pub progress_every: Duration,
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
            watcher_buffer: 1024,
            progress_every: Duration::from_secs(1),
            hot_bytes: 2 << 20,
        }
    }
}

/// One object as stored, at one revision: its JSON (storage version, resourceVersion set),
/// serialized once. The parsed form is kept only while the object is recent (see
/// [`CacheConfig::hot_bytes`]): a fleet's objects at rest cost their JSON, not a tree of maps
/// five times its size, and the readers of a fresh event (watchers, controllers) share one
/// parse.
#[derive(Debug)]
pub struct CachedObject {
    /// The storage key.
    pub key: String,
    /// The revision this state was written at.
    pub rev: u64,
    /// The object as JSON (see [`CachedObject::json`]).
    json: Json,
    /// `metadata.uid` (the garbage collector's index, without a parse).
    pub uid: Box<str>,
    /// Whether `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// Whether `metadata.ownerReferences` names an owner.
    pub owned: bool,
    /// `metadata.labels`, sorted by key: label selectors (lists, watches, cluster sets) match
    /// without a parse.
    labels: Box<[(Box<str>, Box<str>)]>,
    /// The parsed object while it is hot.
    parsed: Mutex<Option<Arc<Value>>>,
    /// Other renderings watchers asked for (a one-row Table, the metadata), made once for all
    /// of them: `(form, version)` → bytes. A handful at most.
    rendered: std::sync::Mutex<Vec<(&'static str, String, Bytes)>>,
}

impl CachedObject {
    /// Parses stored bytes, stamping `rev` as the resourceVersion.
    pub fn from_stored(key: String, bytes: &[u8], rev: u64) -> Result<CachedObject, ApiError> {
        let mut value: Value = serde_json::from_slice(bytes)
            .map_err(|e| ApiError::internal(format!("stored object {key} is not JSON: {e}")))?;
        object::set_resource_version(&mut value, rev);
        let json = Json::of_stored(bytes, &value);
        Ok(CachedObject::with_json(key, value, json, rev))
    }

    /// Wraps an object whose resourceVersion is already `rev` (kept parsed until cooled).
    pub fn new(key: String, value: Value, rev: u64) -> CachedObject {
        let json = Json::of(&value);
        CachedObject::with_json(key, value, json, rev)
    }

    fn with_json(key: String, value: Value, json: Json, rev: u64) -> CachedObject {
        CachedObject {
            key,
            rev,
            json,
            uid: object::uid(&value).into(),
            deleting: object::is_deleting(&value),
            owned: !object::owner_uids(&value).is_empty(),
            labels: value
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .map(|m| {
                    let mut l: Vec<(Box<str>, Box<str>)> = m
                        .iter()
                        .filter_map(|(k, v)| Some((k.as_str().into(), v.as_str()?.into())))
                        .collect();
                    l.sort_unstable();
                    l.into_boxed_slice()
                })
                .unwrap_or_default(),
            parsed: Mutex::new(Some(Arc::new(value))),
            rendered: Default::default(),
        }
    }

    /// The object, parsed: shared while hot, parsed again from its JSON otherwise (and then
    /// not kept: the caller holds it as long as it needs it).
    pub fn value(&self) -> Arc<Value> {
        if let Some(v) = self.hot() {
            return v;
        }
        // The JSON was made from a Value, so it parses; Null would only follow a bug.
        Arc::new(serde_json::from_slice(&self.json()).unwrap_or(Value::Null))
    }

    /// The parsed object, while it is kept.
    fn hot(&self) -> Option<Arc<Value>> {
        self.parsed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// The object without its top-level field `key` when that is one of its large values
    /// (a ManifestWork's manifests) and the object is not kept parsed: what readers of its
    /// metadata and status need, parsed without the large value (which reads as `null`).
    /// While hot, the whole object as parsed.
    pub fn value_without(&self, key: &str) -> Arc<Value> {
        if let Some(v) = self.hot() {
            return v;
        }
        let Json::Parts(parts, keys) = &self.json else {
            return self.value();
        };
        let mut out = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            // Parts alternate: the runs between large values (even), the large values (odd).
            let skip = i % 2 == 1 && keys.get(i / 2).is_some_and(|k| &**k == key);
            out.extend_from_slice(if skip { b"null" } else { p });
        }
        Arc::new(serde_json::from_slice(&out).unwrap_or(Value::Null))
    }

    /// The object as JSON: its storage version, resourceVersion set.
    pub fn json(&self) -> Bytes {
        match &self.json {
            Json::Whole(bytes) => bytes.clone(),
            Json::Parts(parts, _) => {
                let mut out = Vec::with_capacity(self.json_len());
                for p in parts {
                    out.extend_from_slice(p);
                }
                Bytes::from(out)
            }
        }
    }

    /// The length of [`CachedObject::json`].
    pub fn json_len(&self) -> usize {
        match &self.json {
            Json::Whole(bytes) => bytes.len(),
            Json::Parts(parts, _) => parts.iter().map(Bytes::len).sum(),
        }
    }

    /// The value of label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        let i = self.labels.binary_search_by(|(k, _)| (**k).cmp(key)).ok()?;
        Some(&self.labels[i].1)
    }

    /// The namespace (`""` for a cluster-scoped kind) and name, read from the key (no parse).
    pub fn namespace_name(&self) -> (&str, &str) {
        let rest = &self.key[kind_prefix(&self.key).len().min(self.key.len())..];
        rest.split_once('/').unwrap_or(("", rest))
    }

    /// Whether `other` has the same labels (no parse).
    pub fn same_labels(&self, other: &CachedObject) -> bool {
        self.labels == other.labels
    }

    /// Drops the parsed form (the JSON stays).
    fn cool(&self) {
        *self.parsed.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    /// The object rendered as `form` at `version`: made by `make` the first time, shared by
    /// every later caller (every watcher of the same form sees the same bytes).
    pub fn rendered<E>(
        &self,
        form: &'static str,
        version: &str,
        make: impl FnOnce() -> Result<Bytes, E>,
    ) -> Result<Bytes, E> {
        let mut done = self.rendered.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((_, _, bytes)) = done.iter().find(|(f, v, _)| *f == form && v == version) {
            return Ok(bytes.clone());
        }
        let bytes = make()?;
        done.push((form, version.to_owned(), bytes.clone()));
        Ok(bytes)
    }
}

/// An object's JSON, whole or in parts that concatenate to it: a large top-level value (a
/// ManifestWork's `spec`, a ConfigMap's `data`) is its own part, interned, so the objects and
/// versions that share it (one work for a thousand clusters, a spec across its status
/// updates in the history) hold one copy.
#[derive(Debug)]
enum Json {
    Whole(Bytes),
    /// The runs between large values and the large values, alternating (a run first and
    /// last); the keys of the large values.
    Parts(Box<[Bytes]>, Box<[Box<str>]>),
}

impl Json {
    /// Serializes `value` exactly as `serde_json::to_vec` would, cut around its large
    /// top-level values.
    fn of(value: &Value) -> Json {
        let Some(map) = value.as_object() else {
            return Json::Whole(intern::tight(serde_json::to_vec(value).unwrap_or_default()));
        };
        let mut cut = Cut::default();
        for (k, v) in map {
            let at = cut.key(k);
            // Writing JSON into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut cut.run, v);
            if cut.run.len() - at >= intern::MIN_BYTES {
                let value = cut.run.split_off(at);
                cut.large(k, value);
            }
        }
        cut.finish()
    }

    /// What [`Json::of`] makes of `value`, cut from `stored` (the store's JSON of it, which
    /// lacks only the resourceVersion) instead of written again: the top-level values are
    /// taken as they are stored, and only `metadata` is written, from `value`. Stored JSON
    /// that is not an object of the same fields falls back to writing `value`.
    fn of_stored(stored: &[u8], value: &Value) -> Json {
        let (Ok(TopLevel(fields)), Some(map)) =
            (serde_json::from_slice::<TopLevel<'_>>(stored), value.as_object())
        else {
            return Json::of(value);
        };
        if fields.len() != map.len() || !fields.iter().any(|(k, _)| k == "metadata") {
            return Json::of(value);
        }
        let mut cut = Cut::default();
        for (k, raw) in &fields {
            cut.key(k);
            let raw = raw.get().as_bytes();
            if k == "metadata" {
                let _ = serde_json::to_writer(&mut cut.run, &map.get("metadata"));
            } else if raw.len() >= intern::MIN_BYTES {
                cut.large(k, raw.to_vec());
            } else {
                cut.run.extend_from_slice(raw);
            }
        }
        cut.finish()
    }
}

/// An object's JSON being cut: the parts so far, the keys of the large values among them, and
/// the run of small fields since the last large value.
struct Cut {
    parts: Vec<Bytes>,
    keys: Vec<Box<str>>,
    run: Vec<u8>,
}

impl Default for Cut {
    fn default() -> Cut {
        Cut { parts: Vec::new(), keys: Vec::new(), run: vec![b'{'] }
    }
}

impl Cut {
    /// Writes the next field's key; where its value starts in the run.
    fn key(&mut self, k: &str) -> usize {
        if self.run.len() > 1 || !self.parts.is_empty() {
            self.run.push(b',');
        }
        // Writing JSON into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut self.run, k);
        self.run.push(b':');
        self.run.len()
    }

    /// The value of field `k` as its own interned part. Only the large value can be shared:
    /// the run carries this object's metadata.
    fn large(&mut self, k: &str, value: Vec<u8>) {
        self.parts.push(intern::tight(std::mem::take(&mut self.run)));
        self.parts.push(intern::intern(value));
        self.keys.push(Box::from(k));
    }

    fn finish(mut self) -> Json {
        self.run.push(b'}');
        if self.parts.is_empty() {
            return Json::Whole(intern::tight(self.run));
        }
        self.parts.push(intern::tight(self.run));
        Json::Parts(self.parts.into_boxed_slice(), self.keys.into_boxed_slice())
    }
}

/// An object's top-level fields as the slices of its JSON that hold them, in order.
struct TopLevel<'a>(Vec<(String, &'a serde_json::value::RawValue)>);

impl<'de> serde::Deserialize<'de> for TopLevel<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = TopLevel<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = m.next_entry()? {
                    out.push(entry);
                }
                Ok(TopLevel(out))
            }
        }
        d.deserialize_map(Fields)
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
    /// A change.
    Event(Arc<CacheEvent>),
    /// Every change up to this revision has been sent before this message.
    Progress(u64),
}

#[derive(Default)]
struct KindState {
    items: BTreeMap<String, Arc<CachedObject>>,
    /// Recent events, oldest first, with when the cache published them.
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

impl KindState {
    /// Offers `event` to the kind's watchers and to those of its object only; a watcher whose
    /// buffer is full is ended (dropping its sender closes its stream).
    fn offer(&mut self, event: &Arc<CacheEvent>) {
        let KindState { watchers, named, terminated, .. } = self;
        let mut offer = |tx: &mpsc::Sender<Msg>| match tx.try_send(Msg::Event(Arc::clone(event))) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                *terminated += 1;
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        };
        watchers.retain(&mut offer);
        if let Some(of_key) = named.get_mut(&event.object.key) {
            of_key.retain(&mut offer);
            if of_key.is_empty() {
                named.remove(&event.object.key);
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
        let cache = Arc::new(Cache { kinds, hot: Mutex::default(), rev, storage, config });
        let start = cache.relist().await?;
        background.spawn(Arc::clone(&cache).follow(start));
        background.spawn(Arc::clone(&cache).progress());
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

    fn kind_of_key(&self, key: &str) -> Option<&Mutex<KindState>> {
        self.kinds.get(kind_prefix(key))
    }

    /// Replaces every kind's state with a fresh list of the store (ending every watcher, who
    /// must relist) and returns its revision.
    async fn relist(&self) -> Result<u64, ApiError> {
        let page = self
            .storage
            .list(ROOT, &ListOptions::default())
            .await
            .map_err(|e| crate::machinery::error::from_storage(e, Default::default()))?;
        let rev = page.revision.get();
        let mut fresh: HashMap<&str, BTreeMap<String, Arc<CachedObject>>> = HashMap::new();
        for kv in page.items {
            let Some((prefix, _)) = self.kinds.get_key_value(kind_prefix(&kv.key)) else {
                continue;
            };
            let obj = CachedObject::from_stored(kv.key.clone(), &kv.value, kv.mod_revision.get())?;
            obj.cool();
            fresh.entry(prefix.as_str()).or_default().insert(kv.key, Arc::new(obj));
        }
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

    /// Follows the store from `rev` for as long as it is open.
    async fn follow(self: Arc<Cache>, mut rev: u64) {
        loop {
            let mut stream = match self.storage.watch(ROOT, Revision(rev)).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, rev, "watch cache: storage watch failed; retrying");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    if matches!(e, ocm_storage::Error::Compacted { .. }) {
                        rev = self.relist_until_ok().await;
                    }
                    continue;
                }
            };
            while let Some(item) = stream.next().await {
                match item {
                    Ok(ev) => {
                        self.apply(&ev);
                        rev = ev.revision.get();
                    }
                    Err(ocm_storage::Error::Lagged { resume_from }) => {
                        rev = resume_from.get();
                        break;
                    }
                    Err(ocm_storage::Error::Compacted { .. }) => {
                        rev = self.relist_until_ok().await;
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, rev, "watch cache: storage watch ended");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        break;
                    }
                }
            }
            if self.storage_closed().await {
                return;
            }
        }
    }

    async fn storage_closed(&self) -> bool {
        matches!(self.storage.current_revision().await, Err(ocm_storage::Error::Unavailable { .. }))
    }

    async fn relist_until_ok(&self) -> u64 {
        loop {
            match self.relist().await {
                Ok(rev) => return rev,
                Err(e) => {
                    tracing::warn!(error = %e, "watch cache: relist failed; retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    }

    fn apply(&self, ev: &ocm_storage::WatchEvent) {
        let rev = ev.revision.get();
        if let Some(state) = self.kind_of_key(&ev.key) {
            // Only this task changes `items`, so the cached state is the event's previous value:
            // reuse it rather than parse `ev.prev` again.
            let cached = lock(state).items.get(&ev.key).cloned();
            match self.event_of(ev, cached) {
                Ok(event) => self.publish(state, event),
                Err(e) => {
                    tracing::error!(error = %e, key = %ev.key, "watch cache: bad stored object")
                }
            }
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
                prev.cool();
                Some(Arc::new(prev))
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

    /// Keeps `obj` parsed for a while; the oldest hot objects beyond the budget cool.
    fn keep_hot(&self, obj: &Arc<CachedObject>) {
        let mut hot = self.hot.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        hot.0.push_back(Arc::clone(obj));
        hot.1 += obj.json_len();
        while hot.1 > self.config.hot_bytes && hot.0.len() > 1 {
            if let Some(old) = hot.0.pop_front() {
                hot.1 -= old.json_len();
                old.cool();
            }
        }
    }

    fn publish(&self, state: &Mutex<KindState>, event: CacheEvent) {
        let event = Arc::new(event);
        self.keep_hot(&event.object);
        let mut st = lock(state);
        match event.kind {
            EventType::Deleted => {
                st.items.remove(&event.object.key);
            }
            _ => {
                st.items.insert(event.object.key.clone(), Arc::clone(&event.object));
            }
        }
        st.history.push_back((Instant::now(), Arc::clone(&event)));
        while st.history.len() > self.config.history_per_kind {
            st.forget_oldest();
        }
        st.rev = event.rev;
        st.offer(&event);
    }

    async fn progress(self: Arc<Cache>) {
        let mut tick = tokio::time::interval(self.config.progress_every);
        loop {
            tick.tick().await;
            let rev = self.revision();
            let now = Instant::now();
            for state in self.kinds.values() {
                let mut st = lock(state);
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
        st.offer(&event);
        assert!(matches!(all_rx.try_recv(), Ok(Msg::Event(e)) if e.rev == 7));
        assert!(matches!(x_rx.try_recv(), Ok(Msg::Event(e)) if e.rev == 7));
        assert!(y_rx.try_recv().is_err(), "another object's watcher was offered the event");
        // A closed one-object watcher is dropped on its object's next event, with its entry.
        drop(x_rx);
        st.offer(&event);
        assert!(!st.named.contains_key("/registry/k/x"));
    }

    #[test]
    fn what_is_kept_unparsed_reads_as_the_object_does() {
        let v = serde_json::json!({"metadata": {"name": "a", "namespace": "ns", "uid": "u1",
            "labels": {"b": "2", "a": "1"}, "ownerReferences": [{"uid": "o1"}]}});
        let obj = CachedObject::new("/registry/core/secrets/ns/a".into(), v.clone(), 7);
        assert_eq!(obj.namespace_name(), ("ns", "a"));
        assert_eq!((obj.label("a"), obj.label("b"), obj.label("c")), (Some("1"), Some("2"), None));
        assert_eq!((&*obj.uid, obj.owned, obj.deleting), ("u1", true, false));
        let scoped = CachedObject::new("/registry/core/namespaces/ns".into(), v.clone(), 7);
        assert_eq!(scoped.namespace_name(), ("", "ns"));
        assert!(obj.same_labels(&scoped));
        let other = serde_json::json!({"metadata": {"name": "a", "labels": {"a": "1"}}});
        assert!(!obj.same_labels(&CachedObject::new("/registry/g/p/a".into(), other, 8)));
        // Cooled, the object parses again from its JSON, to the same value.
        let hot = obj.value();
        obj.cool();
        let cold = obj.value();
        assert!(!Arc::ptr_eq(&hot, &cold));
        assert_eq!(*cold, v);
    }

    #[test]
    fn large_top_level_values_are_held_once_and_the_json_is_exact() {
        let big = "x".repeat(intern::MIN_BYTES);
        let work = |ns: &str, status: Value| {
            serde_json::json!({"apiVersion": "v1", "kind": "K",
                "metadata": {"name": "w", "namespace": ns, "labels": {"a": "é\"q"}},
                "spec": {"manifests": [{"data": big}]}, "status": status})
        };
        let (a, b) = (work("a", serde_json::json!({})), work("b", serde_json::json!({"s": 1})));
        let (ca, cb) = (
            CachedObject::new("/registry/k/a/w".into(), a.clone(), 1),
            CachedObject::new("/registry/k/b/w".into(), b.clone(), 2),
        );
        assert_eq!(ca.json(), serde_json::to_vec(&a).unwrap());
        assert_eq!(cb.json(), serde_json::to_vec(&b).unwrap());
        assert_eq!(ca.json_len(), ca.json().len());
        let spec = |o: &CachedObject| match &o.json {
            Json::Parts(p, _) => p[1].as_ptr(),
            Json::Whole(_) => panic!("a large spec is its own part"),
        };
        assert_eq!(spec(&ca), spec(&cb), "both objects hold one copy of the spec");
        assert!(Arc::ptr_eq(&ca.value_without("spec"), &ca.value()), "hot: the whole object");
        ca.cool();
        assert_eq!(*ca.value(), a, "a cooled object parses back");
        let mut headless = a.clone();
        headless["spec"] = Value::Null;
        assert_eq!(*ca.value_without("spec"), headless, "cold: parsed without the large spec");
        assert_eq!(*ca.value_without("status"), a, "only a large value is left out");
        // Cut from the stored JSON (no resourceVersion), the same bytes and parts.
        for (v, rev) in [(&a, 1), (&b, 2)] {
            let mut stored = v.clone();
            crate::machinery::object::meta_mut(&mut stored).remove("resourceVersion");
            let obj = CachedObject::from_stored(
                "/registry/k/x/w".into(),
                &serde_json::to_vec(&stored).unwrap(),
                rev,
            )
            .unwrap();
            let mut expected = v.clone();
            crate::machinery::object::set_resource_version(&mut expected, rev);
            assert_eq!(obj.json(), serde_json::to_vec(&expected).unwrap());
            assert_eq!(spec(&obj), spec(&ca), "the stored spec is interned too");
            obj.cool();
            assert_eq!(*obj.value(), expected);
        }
        let small = serde_json::json!({"metadata": {"name": "s"}, "data": {"k": "v"}});
        let cs = CachedObject::new("/registry/k/s".into(), small.clone(), 3);
        assert!(matches!(cs.json, Json::Whole(_)));
        assert_eq!(cs.json(), serde_json::to_vec(&small).unwrap());
    }

    #[test]
    fn renderings_are_made_once_per_form_and_version() {
        let obj = CachedObject::new("/registry/k/a".into(), serde_json::json!({"a": 1}), 1);
        let made = std::cell::Cell::new(0);
        let make = |text: &'static str| {
            made.set(made.get() + 1);
            Ok::<_, ()>(Bytes::from_static(text.as_bytes()))
        };
        assert_eq!(obj.rendered("table/v1/metadata", "v1", || make("row")).unwrap(), "row");
        assert_eq!(obj.rendered("table/v1/metadata", "v1", || make("again")).unwrap(), "row");
        assert_eq!(obj.rendered("table/v1/metadata", "v2", || make("v2")).unwrap(), "v2");
        assert_eq!(obj.rendered("v1", "", || make("meta")).unwrap(), "meta");
        assert_eq!(made.get(), 3);
    }
}
