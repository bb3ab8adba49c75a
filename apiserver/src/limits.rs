//! Overload protection: the server-wide in-flight request limits of kube-apiserver
//! (`--max-requests-inflight`, `--max-mutating-requests-inflight`), a per-identity cap so one
//! client cannot take every seat, and a lane of its own for Lease reads and renewals so that
//! agents' heartbeats get through any flood (a small analogue of API Priority and Fairness).
//! A request over a limit is answered at once with 429 `TooManyRequests` and `Retry-After`,
//! which client-go and kube-rs retry; long-running requests (watches) are not counted, as in
//! Kubernetes, and `system:masters` is not capped per identity (APF's exempt level).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::authz::{Attributes, UserInfo};
use crate::error::ApiError;

/// kube-apiserver's default `--max-requests-inflight`.
pub const DEFAULT_READONLY: usize = 400;
/// kube-apiserver's default `--max-mutating-requests-inflight`.
pub const DEFAULT_MUTATING: usize = 200;
/// Default seats one identity may hold at once, over all lanes.
pub const DEFAULT_PER_IDENTITY: usize = 50;
/// Default seats of the Lease lane.
pub const DEFAULT_LEASE_LANE: usize = 100;

/// The in-flight pools.
#[derive(Debug)]
pub struct Inflight {
    readonly: Arc<Semaphore>,
    mutating: Arc<Semaphore>,
    leases: Arc<Semaphore>,
    /// The seats of the read-only and mutating pools.
    capacity: [usize; 2],
    per_identity: usize,
    held: Held,
}

/// Seats held per identity.
type Held = Arc<Mutex<HashMap<String, usize>>>;

/// Held while a counted request is served; gives its seats back when dropped.
#[derive(Debug)]
pub struct Seat {
    _permit: Option<OwnedSemaphorePermit>,
    identity: Option<(Held, String)>,
}

impl Drop for Seat {
    fn drop(&mut self) {
        if let Some((held, user)) = self.identity.take() {
            let mut held = held.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(n) = held.get_mut(&user) {
                *n -= 1;
                if *n == 0 {
                    held.remove(&user);
                }
            }
        }
    }
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

impl Inflight {
    /// Pools of `readonly` and `mutating` seats (each at least 1), the default Lease lane and
    /// per-identity cap.
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
        let capacity = [readonly.max(1), mutating.max(1)];
        Inflight {
            readonly: Arc::new(Semaphore::new(capacity[0])),
            mutating: Arc::new(Semaphore::new(capacity[1])),
            leases: Arc::new(Semaphore::new(leases.max(1))),
            capacity,
            per_identity: per_identity.max(1),
            held: Arc::default(),
        }
    }

    /// Seats taken now in the read-only and the mutating pools (the Lease lane, which has its
    /// own limit, is in neither: a heartbeat burst does not look like saturation).
    pub fn in_use(&self) -> (usize, usize) {
        let used = |pool: &Semaphore, cap: usize| cap.saturating_sub(pool.available_permits());
        (used(&self.readonly, self.capacity[0]), used(&self.mutating, self.capacity[1]))
    }

    /// A seat for `user`'s request with HTTP `method` and attributes `attrs`;
    /// `long_running` requests (watches) take none.
    pub fn admit(
        &self,
        method: &http::Method,
        long_running: bool,
        user: &UserInfo,
        attrs: &Attributes,
    ) -> Result<Seat, ApiError> {
        if long_running {
            return Ok(Seat { _permit: None, identity: None });
        }
        let lease = is_lease_renewal(attrs);
        // Heartbeats are not counted against their identity: an agent busy with other requests
        // still renews its lease. The lane itself is bounded.
        let identity = if lease || user.groups.iter().any(|g| g == crate::authz::MASTERS_GROUP) {
            None
        } else {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            let n = held.entry(user.name.clone()).or_insert(0);
            if *n >= self.per_identity {
                return Err(too_many(format!(
                    "the server has too many requests in flight from {:?}, please try again later",
                    user.name
                )));
            }
            *n += 1;
            Some((Arc::clone(&self.held), user.name.clone()))
        };
        // From here the seat owns the identity count: an early return gives it back.
        let mut seat = Seat { _permit: None, identity };
        let readonly = matches!(*method, http::Method::GET | http::Method::HEAD);
        let (pool, kind) = if lease {
            (&self.leases, "lease")
        } else if readonly {
            (&self.readonly, "readOnly")
        } else {
            (&self.mutating, "mutating")
        };
        match Arc::clone(pool).try_acquire_owned() {
            Ok(permit) => {
                seat._permit = Some(permit);
                Ok(seat)
            }
            Err(_) => Err(too_many(format!(
                "the server has too many {kind} requests in flight, please try again later"
            ))),
        }
    }
}

impl Default for Inflight {
    fn default() -> Inflight {
        Inflight::new(DEFAULT_READONLY, DEFAULT_MUTATING)
    }
}

/// Bytes of large objects that writes may hold at once. A write holds its object a few times
/// over (as read, parsed, changed and serialized) until the store has it, so a burst of large
/// writes — a 500 KiB ManifestWork for a thousand clusters, then every agent's first status
/// report on it — waits here for room instead of holding all of them at once.
pub const WRITE_BYTES: usize = 8 << 20;

/// Objects smaller than this take no room in the write budget: memory for them is bounded by
/// the in-flight limits, and a heartbeat never queues behind a burst of large writes.
pub const LARGE_WRITE: usize = 64 << 10;

/// The write budget: room for [`WRITE_BYTES`] of large objects, in KiB units, handed out in
/// arrival order.
#[derive(Debug)]
pub struct WriteBudget {
    room: Semaphore,
    units: u32,
}

impl WriteBudget {
    /// A budget of `bytes`.
    pub fn new(bytes: usize) -> WriteBudget {
        let units = u32::try_from(bytes >> 10).unwrap_or(u32::MAX).max(1);
        WriteBudget { room: Semaphore::new(units as usize), units }
    }

    /// Waits for room for a write of an object of `bytes` (an object larger than the whole
    /// budget waits for all of it); `None` for a small object, which takes none.
    pub async fn reserve(&self, bytes: usize) -> Option<tokio::sync::SemaphorePermit<'_>> {
        if bytes < LARGE_WRITE {
            return None;
        }
        let units = u32::try_from(bytes.div_ceil(1024)).unwrap_or(u32::MAX).min(self.units);
        // The semaphore is never closed.
        self.room.acquire_many(units).await.ok()
    }

    /// Room free now (bytes).
    #[cfg(test)]
    fn available(&self) -> usize {
        self.room.available_permits() << 10
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    fn admin() -> UserInfo {
        UserInfo::new("admin", &[crate::authz::MASTERS_GROUP])
    }

    fn get_cm() -> Attributes {
        Attributes::resource("list", "", "configmaps", "default", "")
    }

    fn renew() -> Attributes {
        Attributes::resource("update", "coordination.k8s.io", "leases", "c1", "c1")
    }

    #[test]
    fn pools_are_separate_and_seats_return() {
        let limits = Inflight::new(1, 1);
        let (u, a) = (admin(), get_cm());
        let get = limits.admit(&Method::GET, false, &u, &a).unwrap();
        let err = limits.admit(&Method::GET, false, &u, &a).unwrap_err();
        assert_eq!((err.code, err.reason), (429, "TooManyRequests"));
        assert_eq!(err.details.retry_after, Some(1));
        // The mutating pool is its own; a watch takes no seat.
        let post = limits.admit(&Method::POST, false, &u, &a).unwrap();
        assert!(limits.admit(&Method::DELETE, false, &u, &a).is_err());
        assert!(limits.admit(&Method::GET, true, &u, &a).is_ok());
        drop(get);
        drop(post);
        assert!(limits.admit(&Method::GET, false, &u, &a).is_ok());
        assert!(limits.admit(&Method::PATCH, false, &u, &a).is_ok());
    }

    #[test]
    fn one_identity_cannot_take_every_seat_and_leases_have_their_lane() {
        let limits = Inflight::with_lanes(4, 4, 2, 2);
        let flooder = UserInfo::new("flooder", &["system:authenticated"]);
        let other = UserInfo::new("other", &["system:authenticated"]);
        let agent = UserInfo::new("agent", &["system:authenticated"]);
        let held: Vec<Seat> = (0..2)
            .map(|_| limits.admit(&Method::GET, false, &flooder, &get_cm()).unwrap())
            .collect();
        let err = limits.admit(&Method::GET, false, &flooder, &get_cm()).unwrap_err();
        assert!(err.message.contains("\"flooder\""), "{}", err.message);
        // Others still get seats; the masters group is not capped.
        let o1 = limits.admit(&Method::GET, false, &other, &get_cm()).unwrap();
        let o2 = limits.admit(&Method::GET, false, &other, &get_cm()).unwrap();
        // The read pool (4) is now full, yet lease renewals have their own lane.
        assert!(limits.admit(&Method::GET, false, &admin(), &get_cm()).is_err());
        // An identity at its cap still renews its lease.
        let r0 = limits.admit(&Method::PUT, false, &flooder, &renew()).unwrap();
        drop(r0);
        let r1 = limits.admit(&Method::PUT, false, &agent, &renew()).unwrap();
        let r2 = limits.admit(&Method::PUT, false, &agent, &renew()).unwrap();
        assert!(limits.admit(&Method::PUT, false, &other, &renew()).is_err(), "lane is bounded");
        drop((r1, r2, o1, o2));
        drop(held);
        assert!(limits.held.lock().unwrap().is_empty(), "every count came back");
        assert!(limits.admit(&Method::GET, false, &flooder, &get_cm()).is_ok());
    }

    #[test]
    fn a_refused_pool_gives_the_identity_count_back() {
        let limits = Inflight::with_lanes(1, 1, 1, 5);
        let u = UserInfo::new("u", &[]);
        let _seat = limits.admit(&Method::GET, false, &u, &get_cm()).unwrap();
        for _ in 0..10 {
            assert!(limits.admit(&Method::GET, false, &u, &get_cm()).is_err());
        }
        assert_eq!(limits.held.lock().unwrap()["u"], 1);
    }

    #[tokio::test]
    async fn the_write_budget_holds_large_objects_to_its_room() {
        let budget = WriteBudget::new(1 << 20);
        assert!(budget.reserve(LARGE_WRITE - 1).await.is_none(), "a small object takes none");
        let a = budget.reserve(600 << 10).await.expect("room");
        assert_eq!(budget.available(), 424 << 10);
        // A second 600 KiB does not fit until the first is written.
        let second = budget.reserve(600 << 10);
        tokio::pin!(second);
        assert!(futures::poll!(&mut second).is_pending());
        drop(a);
        let b = second.await.expect("room");
        drop(b);
        // An object larger than the whole budget waits for all of it, then goes.
        let all = budget.reserve(5 << 20).await.expect("room");
        assert_eq!(budget.available(), 0);
        drop(all);
        assert_eq!(budget.available(), 1 << 20);
    }
}
