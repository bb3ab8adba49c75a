//! The one controller runtime (kube-runtime's controller): a work queue of keys fed by the
//! watch cache, that dedupes a key queued twice, never runs one key on two workers at once (a
//! key that changes while it runs is run again after), delays requeues, and backs off a key
//! whose reconcile fails. Watches follow the cache from a snapshot (`store::follow`), so a
//! watch that fell behind queues every key again: level-triggered, restart-safe. Workers take
//! keys only while this replica leads ([`Leadership`]).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::machinery::background::Background;
use crate::machinery::backoff::Backoff;
use crate::machinery::error::ApiError;
use crate::machinery::scheme::ResourceType;
use crate::store::cache::{CachedObject, EventType};
use crate::store::follow::{Resume, Seen, follow};
use crate::store::registry::Registry;

/// What a reconcile asks for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing until the key's objects change.
    Done,
    /// Run the key again after this long (a deadline such as a lease's expiry).
    RequeueAfter(Duration),
}

/// Maps an object of a watched kind to the keys it concerns (from its key, labels or, when
/// it must, its parsed form: see [`CachedObject`]).
pub type Mapper = Arc<dyn Fn(&CachedObject) -> Vec<String> + Send + Sync>;

/// Whether a change from the first state to the second concerns the keys.
pub type Changes = Arc<dyn Fn(&CachedObject, &CachedObject) -> bool + Send + Sync>;

/// A kind a controller follows, and the keys each object of it concerns.
pub struct Watch {
    pub rt: Arc<ResourceType>,
    pub map: Mapper,
    /// Which changes wake the keys; creations and deletions always do. `None`: every change.
    pub changes: Option<Changes>,
    /// Keys woken by a change run this long after it at the earliest (see [`Watch::debounced`]).
    pub delay: Option<Duration>,
    /// Whether creations wake the keys (they do unless [`Watch::not_on_creation`]).
    pub creations: bool,
}

impl Watch {
    /// Follows `rt`, mapping each object to keys with `map`.
    pub fn new(
        rt: &Arc<ResourceType>,
        map: impl Fn(&CachedObject) -> Vec<String> + Send + Sync + 'static,
    ) -> Watch {
        Watch {
            rt: Arc::clone(rt),
            map: Arc::new(map),
            changes: None,
            delay: None,
            creations: true,
        }
    }

    /// The same watch, running a woken key `delay` after the first change that woke it; later
    /// changes within that time join that run (a throttle: the earliest deadline wins). A burst
    /// (every cluster relabelled) costs a pass per `delay`, not one per object.
    pub fn debounced(mut self, delay: Duration) -> Watch {
        self.delay = Some(delay);
        self
    }

    /// The same watch, woken by a change only when `concerns(before, after)`.
    pub fn on_changes(
        mut self,
        concerns: impl Fn(&CachedObject, &CachedObject) -> bool + Send + Sync + 'static,
    ) -> Watch {
        self.changes = Some(Arc::new(concerns));
        self
    }

    /// Woken only by creations, deletions and label changes (a cluster's status heartbeat does
    /// not move it between sets).
    pub fn on_label_changes(self) -> Watch {
        self.on_changes(|before, after| !before.same_labels(after))
    }

    /// Woken only by creations and deletions (what matters is that the object exists).
    pub fn on_presence(self) -> Watch {
        self.on_changes(|_, _| false)
    }

    /// Not woken by creations (the controller creates these objects itself); deletions still
    /// wake, changes as [`Watch::on_changes`] says.
    pub fn not_on_creation(mut self) -> Watch {
        self.creations = false;
        self
    }
}

#[derive(Default)]
struct State {
    ready: VecDeque<String>,
    /// Keys in `ready`.
    queued: HashSet<String>,
    /// Keys a worker is running.
    running: HashSet<String>,
    /// Running keys queued again meanwhile: back into `ready` when they finish.
    dirty: HashSet<String>,
    /// Delayed keys by deadline (with a sequence number to keep equal deadlines apart).
    delayed: BTreeMap<(Instant, u64), String>,
    delayed_at: HashMap<String, (Instant, u64)>,
    seq: u64,
    failures: HashMap<String, u32>,
}

/// The work queue.
#[derive(Default)]
pub struct Queue {
    state: Mutex<State>,
    wake: Notify,
}

impl Queue {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `key` now (once, however often it is added before a worker takes it).
    pub fn add(&self, key: String) {
        let mut st = self.lock();
        if let Some(at) = st.delayed_at.remove(&key) {
            st.delayed.remove(&at);
        }
        if st.running.contains(&key) {
            st.dirty.insert(key);
            return;
        }
        if st.queued.insert(key.clone()) {
            st.ready.push_back(key);
            drop(st);
            self.wake.notify_one();
        }
    }

    /// Queues `key` after `delay` (an earlier deadline already set wins).
    pub fn add_after(&self, key: String, delay: Duration) {
        if delay.is_zero() {
            return self.add(key);
        }
        let at = Instant::now() + delay;
        let mut st = self.lock();
        if st.queued.contains(&key) {
            return;
        }
        if let Some(&(old, seq)) = st.delayed_at.get(&key) {
            if old <= at {
                return;
            }
            st.delayed.remove(&(old, seq));
        }
        st.seq += 1;
        let seq = st.seq;
        // Workers sleep until the earliest deadline: only an earlier one needs a worker woken.
        let earliest = st.delayed.first_key_value().is_none_or(|(&(first, _), _)| at < first);
        st.delayed.insert((at, seq), key.clone());
        st.delayed_at.insert(key, (at, seq));
        drop(st);
        if earliest {
            self.wake.notify_one();
        }
    }

    /// The next key to run, once one is ready; the caller must call [`Queue::done`] after.
    pub async fn next(&self) -> String {
        loop {
            let notified = self.wake.notified();
            let deadline = {
                let mut st = self.lock();
                let now = Instant::now();
                while let Some((&(at, seq), _)) = st.delayed.first_key_value() {
                    if at > now {
                        break;
                    }
                    let key = st.delayed.remove(&(at, seq)).expect("just seen");
                    st.delayed_at.remove(&key);
                    if st.running.contains(&key) {
                        st.dirty.insert(key);
                    } else if st.queued.insert(key.clone()) {
                        st.ready.push_back(key);
                    }
                }
                if let Some(key) = st.ready.pop_front() {
                    st.queued.remove(&key);
                    st.running.insert(key.clone());
                    return key;
                }
                st.delayed.first_key_value().map(|(&(at, _), _)| at)
            };
            match deadline {
                Some(at) => {
                    let _ = tokio::time::timeout_at(at, notified).await;
                }
                None => notified.await,
            }
        }
    }

    /// Ends a run of `key` with its outcome.
    fn done(&self, key: String, outcome: &Result<Action, ApiError>) {
        let requeue = {
            let mut st = self.lock();
            st.running.remove(&key);
            let requeue = match outcome {
                Ok(action) => {
                    st.failures.remove(&key);
                    match action {
                        Action::Done => None,
                        Action::RequeueAfter(d) => Some(*d),
                    }
                }
                Err(_) => {
                    let n = st.failures.entry(key.clone()).or_insert(0);
                    *n = n.saturating_add(1);
                    Some(Backoff::RECONCILE.delay(*n))
                }
            };
            if st.dirty.remove(&key) {
                if st.queued.insert(key.clone()) {
                    st.ready.push_back(key.clone());
                }
                drop(st);
                self.wake.notify_one();
                return;
            }
            requeue
        };
        if let Some(d) = requeue {
            self.add_after(key, d);
        }
    }

    /// How many keys wait or run (for tests and metrics).
    pub fn len(&self) -> usize {
        let st = self.lock();
        st.ready.len() + st.running.len() + st.delayed.len()
    }

    /// Whether no key waits or runs.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether this replica leads, so its controllers may act: a hub on an embedded store always
/// does; replicas over etcd hand leadership over through a Lease (`controllers::leader`).
#[derive(Debug, Clone)]
pub enum Leadership {
    /// The only replica: it always leads.
    Always,
    /// Leads while the value is true.
    Elected(tokio::sync::watch::Receiver<bool>),
}

impl Leadership {
    /// Returns once this replica leads.
    pub async fn leading(&mut self) {
        if let Leadership::Elected(leads) = self {
            // An error means the election ended with the replica: the last value stands.
            let _ = leads.wait_for(|leads| *leads).await;
        }
    }

    /// Whether this replica leads now.
    pub fn is_leading(&self) -> bool {
        match self {
            Leadership::Always => true,
            Leadership::Elected(leads) => *leads.borrow(),
        }
    }
}

/// What every controller runs on: the registry it reads and writes, the tracker its tasks run
/// under, and whether this replica leads.
#[derive(Debug, Clone)]
pub struct Runtime {
    pub registry: Registry,
    pub background: Background,
    pub leadership: Leadership,
}

impl Runtime {
    /// Runs the controller `name` with `workers` workers, fed by `watches`: `reconcile` brings
    /// the world of one key to where it should be. Returns the queue, so other triggers (a
    /// timer, another controller) can add keys too.
    pub fn run<F, Fut>(
        &self,
        name: &'static str,
        watches: Vec<Watch>,
        workers: usize,
        reconcile: F,
    ) -> Arc<Queue>
    where
        F: Fn(String) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<Action, ApiError>> + Send + 'static,
    {
        let reconcile = Arc::new(reconcile);
        let queue = Arc::new(Queue::default());
        for watch in watches {
            let queue = Arc::clone(&queue);
            let (cache, prefix) = (Arc::clone(&self.registry.cache), watch.rt.prefix.clone());
            self.background.spawn(follow(cache, prefix, Resume::Snapshot, move |seen| {
                watch.wake(&queue, seen)
            }));
        }
        for _ in 0..workers.max(1) {
            let queue = Arc::clone(&queue);
            let reconcile = Arc::clone(&reconcile);
            let mut leadership = self.leadership.clone();
            self.background.spawn(async move {
                loop {
                    leadership.leading().await;
                    let key = queue.next().await;
                    if !leadership.is_leading() {
                        // Lost while waiting: the key waits for the next term (or another
                        // replica's controller runs it).
                        queue.done(key.clone(), &Ok(Action::Done));
                        queue.add(key);
                        continue;
                    }
                    let outcome = run_once(&*reconcile, &key).await;
                    if let Err(e) = &outcome {
                        tracing::debug!(controller = name, %key, error = %e.message, "reconcile failed; backing off");
                    }
                    queue.done(key, &outcome);
                }
            });
        }
        queue
    }
}

/// One reconcile of `key`. A panic is one failed run (retried with backoff), never a lost
/// worker or a key stuck as running.
async fn run_once<F, Fut>(reconcile: &F, key: &str) -> Result<Action, ApiError>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<Action, ApiError>>,
{
    futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(reconcile(key.to_owned())))
        .await
        .unwrap_or_else(|_| Err(ApiError::internal("the reconcile panicked")))
}

impl Watch {
    /// Queues the keys of what the follower saw: every object of a snapshot, and each change
    /// this watch is woken by.
    fn wake(&self, queue: &Queue, seen: Seen<'_>) {
        match seen {
            Seen::Snapshot(objects) => {
                for ev in objects {
                    for key in (self.map)(&ev.object) {
                        queue.add(key);
                    }
                }
            }
            Seen::Change(ev) => {
                if ev.kind == EventType::Added && !self.creations {
                    return;
                }
                if let (EventType::Modified, Some(changes), Some(prev)) =
                    (ev.kind, &self.changes, &ev.prev)
                {
                    if !changes(prev, &ev.object) {
                        return;
                    }
                }
                let mut keys = (self.map)(&ev.object);
                if let Some(prev) = &ev.prev {
                    keys.extend((self.map)(prev));
                }
                keys.sort_unstable();
                keys.dedup();
                for key in keys {
                    match self.delay {
                        Some(delay) => queue.add_after(key, delay),
                        None => queue.add(key),
                    }
                }
            }
            Seen::Lost => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_key_queued_twice_runs_once_and_a_running_key_runs_again() {
        let q = Queue::default();
        q.add("a".into());
        q.add("a".into());
        q.add("b".into());
        assert_eq!(q.next().await, "a");
        q.add("a".into()); // changed while running
        assert_eq!(q.next().await, "b");
        q.done("b".into(), &Ok(Action::Done));
        q.done("a".into(), &Ok(Action::Done));
        assert_eq!(q.next().await, "a", "dirty key runs again");
        q.done("a".into(), &Ok(Action::Done));
        assert!(q.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn delayed_keys_wait_for_their_deadline_and_failures_back_off() {
        let q = Arc::new(Queue::default());
        q.add_after("late".into(), Duration::from_secs(10));
        q.add_after("soon".into(), Duration::from_secs(1));
        let start = Instant::now();
        assert_eq!(q.next().await, "soon");
        assert!(Instant::now() - start >= Duration::from_secs(1));
        q.done("soon".into(), &Err(ApiError::internal("boom")));
        // The failure comes back after the first backoff, before "late".
        assert_eq!(q.next().await, "soon");
        q.done("soon".into(), &Ok(Action::Done));
        assert_eq!(q.next().await, "late");
        assert!(Instant::now() - start >= Duration::from_secs(10));
        // An immediate add overrides a pending delay.
        q.done("late".into(), &Ok(Action::RequeueAfter(Duration::from_secs(60))));
        q.add("late".into());
        let t = Instant::now();
        assert_eq!(q.next().await, "late");
        assert!(Instant::now() - t < Duration::from_secs(1));
    }
}
