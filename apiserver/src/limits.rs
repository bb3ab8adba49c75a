//! Overload protection: the server-wide in-flight request limits of kube-apiserver
//! (`--max-requests-inflight`, `--max-mutating-requests-inflight`). A request over its limit is
//! answered at once with 429 `TooManyRequests` and `Retry-After`, which client-go and kube-rs
//! retry; long-running requests (watches) are not counted, as in Kubernetes.

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::ApiError;
use std::sync::Arc;

/// kube-apiserver's default `--max-requests-inflight`.
pub const DEFAULT_READONLY: usize = 400;
/// kube-apiserver's default `--max-mutating-requests-inflight`.
pub const DEFAULT_MUTATING: usize = 200;

/// The two in-flight pools.
#[derive(Debug)]
pub struct Inflight {
    readonly: Arc<Semaphore>,
    mutating: Arc<Semaphore>,
}

/// Held while a counted request is served.
#[derive(Debug)]
pub struct Seat {
    _permit: Option<OwnedSemaphorePermit>,
}

impl Inflight {
    /// Pools of `readonly` and `mutating` seats (each at least 1).
    pub fn new(readonly: usize, mutating: usize) -> Inflight {
        Inflight {
            readonly: Arc::new(Semaphore::new(readonly.max(1))),
            mutating: Arc::new(Semaphore::new(mutating.max(1))),
        }
    }

    /// A seat for a request with HTTP `method`; `long_running` requests (watches) take none.
    pub fn admit(&self, method: &http::Method, long_running: bool) -> Result<Seat, ApiError> {
        if long_running {
            return Ok(Seat { _permit: None });
        }
        let readonly = matches!(*method, http::Method::GET | http::Method::HEAD);
        let (pool, kind) =
            if readonly { (&self.readonly, "readOnly") } else { (&self.mutating, "mutating") };
        match Arc::clone(pool).try_acquire_owned() {
            Ok(permit) => Ok(Seat { _permit: Some(permit) }),
            Err(_) => Err(ApiError::too_many_requests(
                format!(
                    "the server has too many {kind} requests in flight, please try again later"
                ),
                1,
            )),
        }
    }
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

    #[test]
    fn pools_are_separate_and_seats_return() {
        let limits = Inflight::new(1, 1);
        let get = limits.admit(&Method::GET, false).unwrap();
        let err = limits.admit(&Method::GET, false).unwrap_err();
        assert_eq!((err.code, err.reason), (429, "TooManyRequests"));
        assert_eq!(err.details.retry_after, Some(1));
        // The mutating pool is its own; a watch takes no seat.
        let post = limits.admit(&Method::POST, false).unwrap();
        assert!(limits.admit(&Method::DELETE, false).is_err());
        assert!(limits.admit(&Method::GET, true).is_ok());
        drop(get);
        drop(post);
        assert!(limits.admit(&Method::GET, false).is_ok());
        assert!(limits.admit(&Method::PATCH, false).is_ok());
    }
}
