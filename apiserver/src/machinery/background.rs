//! The hub's background tasks (watch cache followers, API-machinery controllers, client
//! connections): spawned under one tracker so that shutdown cancels them all and waits until
//! they are gone, and nothing outlives `serve` holding the storage open.

use std::future::Future;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// A set of background tasks stopped together.
#[derive(Clone, Debug, Default)]
pub struct Background {
    cancel: CancellationToken,
    tracker: TaskTracker,
}

impl Background {
    /// An empty set.
    pub fn new() -> Background {
        Background::default()
    }

    /// Runs `task` until it ends or the set is stopped, whichever comes first.
    pub fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let cancel = self.cancel.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => {}
                _ = task => {}
            }
        });
    }

    /// Cancels every task (running and future ones) and waits until all have been dropped.
    pub async fn stop(&self) {
        self.cancel.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    /// Sets its flag when dropped.
    struct Guard(Arc<AtomicBool>);

    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn stop_drops_every_task_before_returning() {
        let bg = Background::new();
        let dropped = Arc::new(AtomicBool::new(false));
        let guard = Guard(Arc::clone(&dropped));
        bg.spawn(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        });
        tokio::task::yield_now().await;
        assert!(!dropped.load(Ordering::SeqCst));
        bg.stop().await;
        assert!(dropped.load(Ordering::SeqCst), "a task outlived stop()");
    }

    #[tokio::test]
    async fn a_task_spawned_after_stop_does_not_run() {
        let bg = Background::new();
        bg.stop().await;
        let ran = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&ran);
        bg.spawn(async move { flag.store(true, Ordering::SeqCst) });
        bg.stop().await;
        assert!(!ran.load(Ordering::SeqCst));
    }
}
