//! The subscribers of the gRPC server and what reaches them: each Subscribe stream has a
//! bounded buffer, keyed by cluster and data type; an event goes to the subscribers of its
//! cluster and data type without waiting for any of them. A subscriber whose buffer is full is
//! dropped (its stream ends with `Unavailable`, and the agent resubscribes and resyncs), so a
//! stuck agent never stalls the others. Heartbeats go to every subscriber from one timer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ocm_proto::cloudevents::v1::CloudEvent;
use tokio::sync::mpsc;

/// Events a subscriber may have waiting (OCM's broker buffers 100).
pub const SUBSCRIBER_BUFFER: usize = 100;
/// Room a resync answer leaves in a subscriber's buffer for the live changes sent meanwhile
/// (which drop a subscriber whose buffer is full).
const RESYNC_HEADROOM: usize = SUBSCRIBER_BUFFER / 2;

struct Subscriber {
    id: u64,
    tx: mpsc::Sender<CloudEvent>,
    dropped: Arc<AtomicBool>,
}

/// Subscribers by data type, then cluster (looked up by `&str`: no key is built per event).
type Subscribers = HashMap<&'static str, HashMap<String, Vec<Subscriber>>>;

/// Every Subscribe stream of one hub.
#[derive(Default)]
pub struct Broker {
    subs: Mutex<Subscribers>,
    next: AtomicU64,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker").field("subscribers", &self.count()).finish_non_exhaustive()
    }
}

/// One registered subscriber: its events, and the registration, removed when dropped.
pub struct Subscription {
    /// Events for this subscriber; closed when it is dropped for a full buffer.
    pub events: mpsc::Receiver<CloudEvent>,
    /// Set when the broker dropped this subscriber.
    pub dropped: Arc<AtomicBool>,
    guard: Registration,
}

impl Subscription {
    /// The subscriber's id.
    pub fn id(&self) -> u64 {
        self.guard.id
    }
}

struct Registration {
    broker: Arc<Broker>,
    data_type: &'static str,
    cluster: String,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.broker.remove(self.data_type, &self.cluster, self.id);
    }
}

impl Broker {
    /// Registers a subscriber of `data_type` for `cluster`.
    pub fn subscribe(self: &Arc<Broker>, cluster: &str, data_type: &'static str) -> Subscription {
        let (tx, events) = mpsc::channel(SUBSCRIBER_BUFFER);
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let dropped = Arc::new(AtomicBool::new(false));
        let subscriber = Subscriber { id, tx, dropped: Arc::clone(&dropped) };
        let mut subs = self.lock();
        subs.entry(data_type).or_default().entry(cluster.to_owned()).or_default().push(subscriber);
        drop(subs);
        let guard =
            Registration { broker: Arc::clone(self), data_type, cluster: cluster.to_owned(), id };
        Subscription { events, dropped, guard }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Subscribers> {
        self.subs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn remove(&self, data_type: &'static str, cluster: &str, id: u64) {
        let mut subs = self.lock();
        let Some(clusters) = subs.get_mut(data_type) else { return };
        if let Some(list) = clusters.get_mut(cluster) {
            list.retain(|s| s.id != id);
            if list.is_empty() {
                clusters.remove(cluster);
            }
        }
    }

    /// Whether anyone subscribes to `data_type` for `cluster` (so an event is worth encoding).
    pub fn has(&self, cluster: &str, data_type: &'static str) -> bool {
        self.lock().get(data_type).is_some_and(|c| c.contains_key(cluster))
    }

    /// Subscribers registered.
    pub fn count(&self) -> usize {
        self.lock().values().flat_map(HashMap::values).map(Vec::len).sum()
    }

    /// Sends `event` to the subscribers of `data_type` for `cluster` (or only to subscriber
    /// `only`); a full buffer drops its subscriber.
    pub fn deliver(
        &self,
        cluster: &str,
        data_type: &'static str,
        event: &CloudEvent,
        only: Option<u64>,
    ) {
        let mut subs = self.lock();
        let Some(clusters) = subs.get_mut(data_type) else { return };
        let Some(list) = clusters.get_mut(cluster) else { return };
        list.retain(|s| only.is_some_and(|id| id != s.id) || offer(s, event.clone()));
        if list.is_empty() {
            clusters.remove(cluster);
        }
    }

    /// Sends the events of a resync answer to the subscribers of `data_type` for `cluster`,
    /// waiting for room in each one's buffer (an answer may hold more events than the buffer:
    /// a cluster with hundreds of works), and leaving [`RESYNC_HEADROOM`] of it to live
    /// changes. A subscriber that makes no room within `patience` is dropped, as a full one is
    /// by [`Broker::deliver`].
    pub async fn deliver_waiting(
        &self,
        cluster: &str,
        data_type: &'static str,
        events: Vec<CloudEvent>,
        patience: Duration,
    ) {
        let targets: Vec<(u64, mpsc::Sender<CloudEvent>, Arc<AtomicBool>)> = self
            .lock()
            .get(data_type)
            .and_then(|c| c.get(cluster))
            .map(|list| list.iter().map(|s| (s.id, s.tx.clone(), Arc::clone(&s.dropped))).collect())
            .unwrap_or_default();
        for (id, tx, dropped) in targets {
            for event in &events {
                match send_leaving_headroom(&tx, event, patience).await {
                    Ok(()) => {}
                    Err(Unsent::Stuck) => {
                        dropped.store(true, Ordering::Release);
                        self.remove(data_type, cluster, id);
                        break;
                    }
                    Err(Unsent::Gone) => break,
                }
            }
        }
    }

    /// Drops every subscriber of `data_type` (the hub lost track of what it sent them: they
    /// resubscribe and resync).
    pub fn drop_all(&self, data_type: &'static str) {
        if let Some(clusters) = self.lock().remove(data_type) {
            for s in clusters.values().flatten() {
                s.dropped.store(true, Ordering::Release);
            }
        }
    }

    /// Sends a heartbeat to every subscriber every `every`, until dropped.
    pub async fn heartbeats(self: Arc<Broker>, every: Duration) {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let beat = heartbeat();
            for clusters in self.lock().values_mut() {
                clusters.retain(|_, list| {
                    list.retain(|s| offer(s, beat.clone()));
                    !list.is_empty()
                });
            }
        }
    }
}

/// Why a waiting send stopped.
enum Unsent {
    /// No room for the whole patience.
    Stuck,
    /// The subscriber is gone.
    Gone,
}

/// How often a waiting send looks for room again. (Waiting on the channel itself would take
/// the slots as they free, one by one, and leave none to live changes.)
const ROOM_POLL: Duration = Duration::from_millis(10);

/// Sends `event` once more than [`RESYNC_HEADROOM`] slots are free.
async fn send_leaving_headroom(
    tx: &mpsc::Sender<CloudEvent>,
    event: &CloudEvent,
    patience: Duration,
) -> Result<(), Unsent> {
    let mut waited = Duration::ZERO;
    loop {
        if tx.is_closed() {
            return Err(Unsent::Gone);
        }
        if tx.capacity() > RESYNC_HEADROOM {
            match tx.try_send(event.clone()) {
                Ok(()) => return Ok(()),
                Err(mpsc::error::TrySendError::Closed(_)) => return Err(Unsent::Gone),
                // A live change took the room meanwhile.
                Err(mpsc::error::TrySendError::Full(_)) => {}
            }
        }
        if waited >= patience {
            return Err(Unsent::Stuck);
        }
        tokio::time::sleep(ROOM_POLL).await;
        waited += ROOM_POLL;
    }
}

/// Offers an event to one subscriber; false when it has to go (a full buffer marks it
/// dropped).
fn offer(s: &Subscriber, event: CloudEvent) -> bool {
    match s.tx.try_send(event) {
        Ok(()) => true,
        Err(mpsc::error::TrySendError::Full(_)) => {
            s.dropped.store(true, Ordering::Release);
            false
        }
        Err(mpsc::error::TrySendError::Closed(_)) => false,
    }
}

/// A heartbeat (ocm.md §8.2): a random id, no data.
pub fn heartbeat() -> CloudEvent {
    CloudEvent {
        id: uuid::Uuid::new_v4().to_string(),
        source: super::routes::SOURCE.to_owned(),
        spec_version: ocm_proto::cloudevents::SPEC_VERSION.to_owned(),
        r#type: ocm_proto::cloudevents::HEARTBEAT.to_owned(),
        ..CloudEvent::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_subscriber_is_dropped_and_the_others_still_receive() {
        let broker = Arc::new(Broker::default());
        let dt = ocm_proto::cloudevents::data_type::LEASES;
        let mut quick = broker.subscribe("c1", dt);
        let stuck = broker.subscribe("c1", dt);
        let other = broker.subscribe("c2", dt);
        for _ in 0..SUBSCRIBER_BUFFER {
            broker.deliver("c1", dt, &heartbeat(), None);
            assert!(quick.events.recv().await.is_some());
        }
        assert!(!stuck.dropped.load(Ordering::Acquire));
        broker.deliver("c1", dt, &heartbeat(), None);
        assert!(stuck.dropped.load(Ordering::Acquire), "the stuck one is dropped");
        assert!(quick.events.recv().await.is_some(), "the quick one still gets it");
        assert_eq!(broker.count(), 2);
        assert!(broker.has("c2", dt) && !broker.has("c3", dt));
        drop(other);
        assert!(!broker.has("c2", dt), "a dropped stream unregisters");
        broker.deliver("c1", dt, &heartbeat(), Some(u64::MAX));
        assert!(quick.events.try_recv().is_err(), "`only` names another subscriber");
        broker.drop_all(dt);
        assert!(quick.dropped.load(Ordering::Acquire) && broker.count() == 0);
    }

    /// A resync answer longer than the buffer reaches a subscriber that reads; one that does
    /// not read is dropped after the patience, not waited for forever.
    #[tokio::test]
    async fn a_resync_answer_longer_than_the_buffer_waits_for_a_reader() {
        let broker = Arc::new(Broker::default());
        let dt = ocm_proto::cloudevents::data_type::MANIFEST_BUNDLES;
        let mut reader = broker.subscribe("c1", dt);
        let answer = vec![heartbeat(); 3 * SUBSCRIBER_BUFFER];
        let sending = {
            let broker = Arc::clone(&broker);
            let answer = answer.clone();
            tokio::spawn(async move {
                broker.deliver_waiting("c1", dt, answer, Duration::from_secs(30)).await;
            })
        };
        for _ in 0..answer.len() {
            assert!(reader.events.recv().await.is_some());
        }
        sending.await.unwrap();
        assert!(!reader.dropped.load(Ordering::Acquire), "a reader is never dropped");
        // While an answer waits for a slow reader, live changes still find room.
        let waiting = {
            let broker = Arc::clone(&broker);
            let answer = answer.clone();
            tokio::spawn(async move {
                broker.deliver_waiting("c1", dt, answer, Duration::from_secs(30)).await;
            })
        };
        while reader.events.len() < SUBSCRIBER_BUFFER - RESYNC_HEADROOM {
            tokio::task::yield_now().await;
        }
        for _ in 0..RESYNC_HEADROOM {
            broker.deliver("c1", dt, &heartbeat(), None);
        }
        assert!(!reader.dropped.load(Ordering::Acquire), "live changes fit beside the answer");
        for _ in 0..answer.len() + RESYNC_HEADROOM {
            assert!(reader.events.recv().await.is_some());
        }
        waiting.await.unwrap();
        let stuck = broker.subscribe("c2", dt);
        broker.deliver_waiting("c2", dt, answer, Duration::from_millis(50)).await;
        assert!(stuck.dropped.load(Ordering::Acquire) && !broker.has("c2", dt));
    }
}
