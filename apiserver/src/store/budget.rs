//! The write budget: room for the large objects writes hold at once, handed out in arrival
//! order, so a burst of large writes waits for room instead of holding all of them in memory.

use tokio::sync::Semaphore;

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
