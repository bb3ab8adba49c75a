//! The hub's one backoff: a delay that doubles from a first value to a cap, for whatever is
//! tried again after a failure (a controller's key, a follower resubscribing to the cache).

use std::time::Duration;

/// Doubling delays from `first` to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
}

impl Backoff {
    /// A controller key's failures: 100 ms, doubling, at most 30 s.
    pub const RECONCILE: Backoff =
        Backoff { first: Duration::from_millis(100), max: Duration::from_secs(30) };

    /// The watch cache reopening its storage watch (an outage, a watch that ended): 100 ms,
    /// doubling, at most 2 s, so it follows the store again within 2 s of the store's return.
    pub const STORE: Backoff =
        Backoff { first: Duration::from_millis(100), max: Duration::from_secs(2) };

    /// A follower of the watch cache that could not subscribe: 10 ms, doubling, at most 1 s.
    pub const RESUBSCRIBE: Backoff =
        Backoff { first: Duration::from_millis(10), max: Duration::from_secs(1) };

    /// The delay before try number `attempt` after a failure (1: the first retry).
    pub fn delay(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(1).min(31);
        self.first.saturating_mul(1u32 << doublings).min(self.max)
    }
}

/// The delays of one run of failures: [`Backoff::delay`] for each in turn, from the first
/// again after [`Retries::reset`].
#[derive(Debug, Clone)]
pub struct Retries {
    backoff: Backoff,
    attempt: u32,
}

impl Retries {
    /// No failure yet.
    pub fn new(backoff: Backoff) -> Retries {
        Retries { backoff, attempt: 0 }
    }

    /// The delay after one more failure.
    pub fn next_delay(&mut self) -> Duration {
        self.attempt = self.attempt.saturating_add(1);
        self.backoff.delay(self.attempt)
    }

    /// A success: the next failure waits the first delay again.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_to_the_cap_and_start_again_after_a_reset() {
        let mut r = Retries::new(Backoff::RECONCILE);
        let delays: Vec<u64> = (0..11).map(|_| r.next_delay().as_millis() as u64).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]);
        r.reset();
        assert_eq!(r.next_delay(), Duration::from_millis(100));
        assert_eq!(Backoff::RECONCILE.delay(u32::MAX), Duration::from_secs(30));
    }
}
