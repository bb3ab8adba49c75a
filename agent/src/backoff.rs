//! The agent's one backoff: doubling waits between retries, jittered so a fleet retrying
//! after the same event spreads out.

use std::time::Duration;

/// Doubling waits between retries, each jittered by ±50 % so that a fleet retrying after the
/// same event (a hub restart) spreads out.
pub struct Backoff {
    first: Duration,
    next: Duration,
    max: Duration,
}

impl Backoff {
    pub fn new(first: Duration, max: Duration) -> Backoff {
        Backoff { first, next: first, max }
    }

    /// Sleeps for the next wait.
    pub async fn wait(&mut self) {
        use rand::Rng as _;
        let jitter = rand::rng().random_range(0.5..1.5);
        tokio::time::sleep(self.next.mul_f64(jitter)).await;
        self.next = (self.next * 2).min(self.max);
    }

    /// Starts over from the first wait.
    pub fn reset(&mut self) {
        self.next = self.first;
    }
}
