//! Overload protection: the server-wide in-flight request limits of kube-apiserver
//! (`--max-requests-inflight`, `--max-mutating-requests-inflight`), a per-identity cap so one
//! client cannot take every seat, and a lane of its own for Lease reads and renewals so that
//! agents' heartbeats get through any flood (a small analogue of API Priority and Fairness).
//! As in APF, a request over a limit waits in line (first come, first served) for a bounded
//! time and queue length (the Lease lane excepted: a heartbeat over it is refused at once), and
//! only then is answered 429 `TooManyRequests` with `Retry-After`,
//! which client-go and kube-rs retry; long-running requests (watches) are not counted, as in
//! Kubernetes, and `system:masters` is not capped per identity (APF's exempt level).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::machinery::error::ApiError;
use crate::machinery::requester::{Attributes, UserInfo};

/// kube-apiserver's default `--max-requests-inflight`.
pub const DEFAULT_READONLY: usize = 400;
/// kube-apiserver's default `--max-mutating-requests-inflight`.
pub const DEFAULT_MUTATING: usize = 200;
/// Default seats one identity may hold at once, over all lanes.
pub const DEFAULT_PER_IDENTITY: usize = 50;
/// Default seats of the Lease lane.
pub const DEFAULT_LEASE_LANE: usize = 100;
/// Default longest wait in line for a seat. APF lets a request wait a quarter of the request
/// timeout (15 s); a shorter wait here hands a client that meets a long stall its `Retry-After`
/// sooner.
pub const DEFAULT_QUEUE_WAIT: Duration = Duration::from_secs(5);
/// Requests of one identity that may wait at once: what APF's default priority level
/// (`global-default`: hands of 6 queues of 50) lets one flow queue.
pub const QUEUE_PER_IDENTITY: usize = 300;
/// Requests that may wait at once over all identities and lanes; a waiting request holds its
/// head and its connection's task, a few KiB.
pub const QUEUE_TOTAL: usize = 10_000;

/// One pool of seats.
#[derive(Debug)]
struct Lane {
    /// As named in a refusal: `readOnly`, `mutating`, `lease`.
    name: &'static str,
    seats: Arc<Semaphore>,
    capacity: usize,
    /// Whether a request waits in line for a seat. The Lease lane does not: a heartbeat that
    /// cannot be served now is refused at once and sent again by its agent, since heartbeats
    /// held in line delay every other agent's renewal behind them.
    queues: bool,
}

impl Lane {
    fn new(name: &'static str, capacity: usize, queues: bool) -> Lane {
        let capacity = capacity.max(1);
        Lane { name, seats: Arc::new(Semaphore::new(capacity)), capacity, queues }
    }

    fn in_use(&self) -> usize {
        self.capacity.saturating_sub(self.seats.available_permits())
    }
}

/// The in-flight pools.
#[derive(Debug)]
pub struct Inflight {
    /// Read-only, mutating, Lease (indexed by [`READONLY`], [`MUTATING`], [`LEASES`]).
    lanes: [Lane; 3],
    per_identity: usize,
    flows: Flows,
    /// Longest wait in line.
    wait: Duration,
    /// Requests waiting now, read-only and mutating (whatever they wait for).
    queued: [Arc<AtomicUsize>; 2],
}

const READONLY: usize = 0;
const MUTATING: usize = 1;
const LEASES: usize = 2;

/// Each identity's seats and the requests waiting for them.
type Flows = Arc<Mutex<HashMap<String, Flow>>>;

#[derive(Debug)]
struct Flow {
    seats: Arc<Semaphore>,
    waiting: usize,
}

fn lock(flows: &Flows) -> MutexGuard<'_, HashMap<String, Flow>> {
    flows.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Forgets `user`'s flow once nobody holds or waits for its seats (checked under the lock,
/// where seats are taken and waits counted).
fn forget_if_idle(flows: &mut HashMap<String, Flow>, user: &str, per_identity: usize) {
    if flows
        .get(user)
        .is_some_and(|f| f.waiting == 0 && f.seats.available_permits() == per_identity)
    {
        flows.remove(user);
    }
}

/// One identity's seat; the flow is forgotten when its last seat comes back.
#[derive(Debug)]
struct IdentitySeat {
    permit: Option<OwnedSemaphorePermit>,
    flows: Flows,
    user: String,
    per_identity: usize,
}

impl Drop for IdentitySeat {
    fn drop(&mut self) {
        drop(self.permit.take());
        forget_if_idle(&mut lock(&self.flows), &self.user, self.per_identity);
    }
}

/// Counts a request in line (in its identity's flow, when it waits there) while it waits; a
/// client that goes away while waiting is un-counted when its future is dropped.
struct InLine<'a> {
    queued: &'a AtomicUsize,
    flow: Option<(&'a Flows, &'a str, usize)>,
}

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        self.queued.fetch_sub(1, Ordering::Relaxed);
        if let Some((flows, user, per_identity)) = self.flow {
            let mut flows = lock(flows);
            if let Some(f) = flows.get_mut(user) {
                f.waiting -= 1;
            }
            forget_if_idle(&mut flows, user, per_identity);
        }
    }
}

/// Held while a counted request is served; gives its seats back when dropped.
#[derive(Debug)]
pub struct Seat {
    _permit: Option<OwnedSemaphorePermit>,
    _identity: Option<IdentitySeat>,
}

/// Whether a request belongs in the Lease lane: reading or renewing a coordination Lease (seats
/// are given after authorization, so only those allowed to touch the Lease get here).
fn is_lease_renewal(attrs: &Attributes) -> bool {
    attrs.resource_request
        && attrs.api_group == "coordination.k8s.io"
        && attrs.resource == "leases"
        && attrs.subresource.is_empty()
        && matches!(attrs.verb.as_str(), "get" | "update" | "patch")
}

fn too_many(message: String) -> ApiError {
    ApiError::too_many_requests(message, 1)
}

/// Requests waiting and seats taken now, per request kind (read-only, mutating).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Load {
    /// Seats taken in the read-only and the mutating pools (the Lease lane, which has its own
    /// limit, is in neither: a heartbeat burst does not look like saturation).
    pub inflight: [usize; 2],
    /// Requests waiting in line, for any seat.
    pub queued: [usize; 2],
}

impl Inflight {
    /// Pools of `readonly` and `mutating` seats (each at least 1), the default Lease lane,
    /// per-identity cap and wait.
    pub fn new(readonly: usize, mutating: usize) -> Inflight {
        Inflight::with_lanes(readonly, mutating, DEFAULT_LEASE_LANE, DEFAULT_PER_IDENTITY)
    }

    /// Pools with an explicit Lease lane and per-identity cap (each at least 1).
    pub fn with_lanes(
        readonly: usize,
        mutating: usize,
        leases: usize,
        per_identity: usize,
    ) -> Inflight {
        Inflight {
            lanes: [
                Lane::new("readOnly", readonly, true),
                Lane::new("mutating", mutating, true),
                Lane::new("lease", leases, false),
            ],
            per_identity: per_identity.max(1),
            flows: Arc::default(),
            wait: DEFAULT_QUEUE_WAIT,
            queued: Default::default(),
        }
    }

    /// The longest a request waits in line for a seat; zero answers 429 at once.
    pub fn queue_wait(mut self, wait: Duration) -> Inflight {
        self.wait = wait;
        self
    }

    /// Seats taken and requests waiting now.
    pub fn load(&self) -> Load {
        Load {
            inflight: [READONLY, MUTATING].map(|k| self.lanes[k].in_use()),
            queued: [READONLY, MUTATING].map(|k| self.queued[k].load(Ordering::Relaxed)),
        }
    }

    /// Takes a place in line for a request of `kind` unless the line is full (taken first, then
    /// checked, so requests arriving together never overshoot [`QUEUE_TOTAL`]).
    fn enqueue(&self, kind: usize) -> bool {
        if self.wait.is_zero() {
            return false;
        }
        self.queued[kind].fetch_add(1, Ordering::Relaxed);
        if self.queued.iter().map(|q| q.load(Ordering::Relaxed)).sum::<usize>() > QUEUE_TOTAL {
            self.queued[kind].fetch_sub(1, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// A seat for `user`'s request with HTTP `method` and attributes `attrs`, waiting in line
    /// for it up to the queue wait; `long_running` requests (watches) take none.
    pub async fn admit(
        &self,
        method: &http::Method,
        long_running: bool,
        user: &UserInfo,
        attrs: &Attributes,
    ) -> Result<Seat, ApiError> {
        if long_running {
            return Ok(Seat { _permit: None, _identity: None });
        }
        let deadline = Instant::now() + self.wait;
        let readonly = matches!(*method, http::Method::GET | http::Method::HEAD);
        let kind = if readonly { READONLY } else { MUTATING };
        let lease = is_lease_renewal(attrs);
        // Heartbeats are not counted against their identity: an agent busy with other requests
        // still renews its lease. The lane itself is bounded.
        let exempt = lease || user.groups.iter().any(|g| g == crate::auth::authz::MASTERS_GROUP);
        // From here the seat owns the identity's seat: an early return gives it back.
        let identity =
            if exempt { None } else { Some(self.identity_seat(&user.name, kind, deadline).await?) };
        let lane = &self.lanes[if lease { LEASES } else { kind }];
        let refused = || {
            too_many(format!(
                "the server has too many {} requests in flight, please try again later",
                lane.name
            ))
        };
        let permit = match Arc::clone(&lane.seats).try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) if !lane.queues || !self.enqueue(kind) => return Err(refused()),
            Err(_) => {
                let in_line = InLine { queued: &self.queued[kind], flow: None };
                wait_in_line(&lane.seats, in_line, deadline).await.ok_or_else(refused)?
            }
        };
        Ok(Seat { _permit: Some(permit), _identity: identity })
    }

    /// One of `user`'s seats, waiting in its line until `deadline` when all are taken.
    async fn identity_seat(
        &self,
        user: &str,
        kind: usize,
        deadline: Instant,
    ) -> Result<IdentitySeat, ApiError> {
        let per_identity = self.per_identity;
        let seat = |permit| IdentitySeat {
            permit: Some(permit),
            flows: Arc::clone(&self.flows),
            user: user.to_owned(),
            per_identity,
        };
        let refused = || {
            too_many(format!(
                "the server has too many requests in flight from {user:?}, please try again later"
            ))
        };
        let seats = {
            let mut flows = lock(&self.flows);
            let flow = flows.entry(user.to_owned()).or_insert_with(|| Flow {
                seats: Arc::new(Semaphore::new(per_identity)),
                waiting: 0,
            });
            if let Ok(permit) = Arc::clone(&flow.seats).try_acquire_owned() {
                return Ok(seat(permit));
            }
            if flow.waiting >= QUEUE_PER_IDENTITY || !self.enqueue(kind) {
                return Err(refused());
            }
            flow.waiting += 1;
            Arc::clone(&flow.seats)
        };
        let in_line =
            InLine { queued: &self.queued[kind], flow: Some((&self.flows, user, per_identity)) };
        wait_in_line(&seats, in_line, deadline).await.map(seat).ok_or_else(refused)
    }
}

/// Waits for one of `seats` until `deadline`, counted `in_line` meanwhile (and un-counted when
/// the wait ends or its request goes away); `None` when the wait ran out.
async fn wait_in_line(
    seats: &Arc<Semaphore>,
    in_line: InLine<'_>,
    deadline: Instant,
) -> Option<OwnedSemaphorePermit> {
    let permit = tokio::time::timeout_at(deadline, Arc::clone(seats).acquire_owned()).await;
    drop(in_line);
    // The semaphores are never closed.
    permit.ok()?.ok()
}

impl Default for Inflight {
    fn default() -> Inflight {
        Inflight::new(DEFAULT_READONLY, DEFAULT_MUTATING)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    fn admin() -> UserInfo {
        UserInfo::new("admin", &[crate::auth::authz::MASTERS_GROUP])
    }

    fn get_cm() -> Attributes {
        Attributes::resource("list", "", "configmaps", "default", "")
    }

    fn renew() -> Attributes {
        Attributes::resource("update", "coordination.k8s.io", "leases", "c1", "c1")
    }

    /// Limits that answer 429 at once, as before queueing.
    fn no_queue(readonly: usize, mutating: usize, leases: usize, per: usize) -> Inflight {
        Inflight::with_lanes(readonly, mutating, leases, per).queue_wait(Duration::ZERO)
    }

    #[tokio::test]
    async fn pools_are_separate_and_seats_return() {
        let limits = no_queue(1, 1, DEFAULT_LEASE_LANE, DEFAULT_PER_IDENTITY);
        let (u, a) = (admin(), get_cm());
        let get = limits.admit(&Method::GET, false, &u, &a).await.unwrap();
        let err = limits.admit(&Method::GET, false, &u, &a).await.unwrap_err();
        assert_eq!((err.code, err.reason), (429, "TooManyRequests"));
        assert_eq!(err.details.retry_after, Some(1));
        // The mutating pool is its own; a watch takes no seat.
        let post = limits.admit(&Method::POST, false, &u, &a).await.unwrap();
        assert!(limits.admit(&Method::DELETE, false, &u, &a).await.is_err());
        assert!(limits.admit(&Method::GET, true, &u, &a).await.is_ok());
        assert_eq!(limits.load(), Load { inflight: [1, 1], queued: [0, 0] });
        drop(get);
        drop(post);
        assert!(limits.admit(&Method::GET, false, &u, &a).await.is_ok());
        assert!(limits.admit(&Method::PATCH, false, &u, &a).await.is_ok());
    }

    #[tokio::test]
    async fn one_identity_cannot_take_every_seat_and_leases_have_their_lane() {
        let limits = no_queue(4, 4, 2, 2);
        let flooder = UserInfo::new("flooder", &["system:authenticated"]);
        let other = UserInfo::new("other", &["system:authenticated"]);
        let agent = UserInfo::new("agent", &["system:authenticated"]);
        let mut held = Vec::new();
        for _ in 0..2 {
            held.push(limits.admit(&Method::GET, false, &flooder, &get_cm()).await.unwrap());
        }
        let err = limits.admit(&Method::GET, false, &flooder, &get_cm()).await.unwrap_err();
        assert!(err.message.contains("\"flooder\""), "{}", err.message);
        // Others still get seats; the masters group is not capped.
        let o1 = limits.admit(&Method::GET, false, &other, &get_cm()).await.unwrap();
        let o2 = limits.admit(&Method::GET, false, &other, &get_cm()).await.unwrap();
        // The read pool (4) is now full, yet lease renewals have their own lane.
        assert!(limits.admit(&Method::GET, false, &admin(), &get_cm()).await.is_err());
        // An identity at its cap still renews its lease.
        let r0 = limits.admit(&Method::PUT, false, &flooder, &renew()).await.unwrap();
        drop(r0);
        let r1 = limits.admit(&Method::PUT, false, &agent, &renew()).await.unwrap();
        let r2 = limits.admit(&Method::PUT, false, &agent, &renew()).await.unwrap();
        let lane = limits.admit(&Method::PUT, false, &other, &renew()).await;
        assert!(lane.is_err(), "lane is bounded");
        drop((r1, r2, o1, o2));
        drop(held);
        assert!(lock(&limits.flows).is_empty(), "every flow was forgotten");
        assert!(limits.admit(&Method::GET, false, &flooder, &get_cm()).await.is_ok());
    }

    #[tokio::test]
    async fn a_refused_pool_gives_the_identity_seat_back() {
        let limits = no_queue(1, 1, 1, 5);
        let u = UserInfo::new("u", &[]);
        let _seat = limits.admit(&Method::GET, false, &u, &get_cm()).await.unwrap();
        for _ in 0..10 {
            assert!(limits.admit(&Method::GET, false, &u, &get_cm()).await.is_err());
        }
        assert_eq!(lock(&limits.flows)["u"].seats.available_permits(), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_over_a_limit_waits_in_line_and_is_served_in_turn() {
        let limits = Inflight::with_lanes(4, 4, 2, 1).queue_wait(Duration::from_secs(5));
        let (u, cm) = (UserInfo::new("u", &[]), get_cm());
        let first = limits.admit(&Method::GET, false, &u, &cm).await.unwrap();
        // The identity's only seat is taken: the next two wait, first come first served.
        let second = limits.admit(&Method::POST, false, &u, &cm);
        let third = limits.admit(&Method::GET, false, &u, &cm);
        tokio::pin!(second, third);
        assert!(futures::poll!(&mut second).is_pending());
        assert!(futures::poll!(&mut third).is_pending());
        assert_eq!(limits.load(), Load { inflight: [1, 0], queued: [1, 1] });
        drop(first);
        let second = second.await.unwrap();
        assert!(futures::poll!(&mut third).is_pending(), "the third is still behind the second");
        assert_eq!(limits.load(), Load { inflight: [0, 1], queued: [1, 0] });
        // The third is refused once it has waited its whole wait.
        tokio::time::advance(Duration::from_secs(5)).await;
        let err = third.await.unwrap_err();
        assert_eq!((err.code, err.reason), (429, "TooManyRequests"));
        assert!(err.message.contains("\"u\""), "{}", err.message);
        assert_eq!(limits.load().queued, [0, 0]);
        drop(second);
        assert!(lock(&limits.flows).is_empty(), "the flow was forgotten");
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_pool_queues_and_a_client_that_leaves_the_line_is_uncounted() {
        let limits = Inflight::with_lanes(1, 1, 1, 10).queue_wait(Duration::from_secs(5));
        let (u, cm) = (UserInfo::new("u", &[]), get_cm());
        let held = limits.admit(&Method::GET, false, &u, &cm).await.unwrap();
        let waiting = limits.admit(&Method::GET, false, &u, &cm);
        tokio::pin!(waiting);
        assert!(futures::poll!(&mut waiting).is_pending());
        assert_eq!(limits.load(), Load { inflight: [1, 0], queued: [1, 0] });
        let mut gone = Box::pin(limits.admit(&Method::GET, false, &u, &cm));
        assert!(futures::poll!(&mut gone).is_pending());
        assert_eq!(limits.load().queued, [2, 0]);
        // The client goes away while in line: its place and its identity seat come back.
        drop(gone);
        assert_eq!(limits.load().queued, [1, 0]);
        assert_eq!(lock(&limits.flows)["u"].seats.available_permits(), 8);
        drop(held);
        let served = waiting.await.unwrap();
        assert_eq!(limits.load(), Load { inflight: [1, 0], queued: [0, 0] });
        drop(served);
        assert!(lock(&limits.flows).is_empty());
        // The Lease lane does not queue: a renewal over it is refused at once.
        let beat = limits.admit(&Method::PUT, false, &u, &renew()).await.unwrap();
        let err = limits.admit(&Method::PUT, false, &u, &renew()).await.unwrap_err();
        assert_eq!(err.code, 429);
        drop(beat);
    }

    #[tokio::test]
    async fn an_identity_line_is_bounded() {
        let limits = Inflight::with_lanes(4, 4, 2, 1).queue_wait(Duration::from_secs(60));
        let (u, cm) = (UserInfo::new("u", &[]), get_cm());
        let _first = limits.admit(&Method::GET, false, &u, &cm).await.unwrap();
        let mut line = Vec::new();
        for _ in 0..QUEUE_PER_IDENTITY {
            let mut f = Box::pin(limits.admit(&Method::GET, false, &u, &cm));
            assert!(futures::poll!(&mut f).is_pending());
            line.push(f);
        }
        let err = limits.admit(&Method::GET, false, &u, &cm).await.unwrap_err();
        assert_eq!(err.code, 429);
        // Another identity still gets a seat at once.
        let other = UserInfo::new("other", &[]);
        assert!(limits.admit(&Method::GET, false, &other, &cm).await.is_ok());
        drop(line);
        assert_eq!(limits.load().queued, [0, 0]);
    }
}
