//! Module `local::import` (a child of `local.rs`, beside it as `heal.rs` is): a restore's
//! records written straight to the backend of a store nobody else uses yet.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::{Backend, Core, Record};
use crate::error::{Error, Result};

/// Restore ([`crate::Storage::restore`]): records written straight to the backend of a store
/// nobody else uses yet, then one revision made the compaction point.
impl<B: Backend> Core<B> {
    /// Stores `items` (ascending distinct keys, validated) at revision `at` as one batch,
    /// without events: the store's revision stays 0 until [`Core::finish_import`].
    pub(super) fn import(&self, at: u64, items: Vec<(String, Bytes)>) -> Result<()> {
        self.check_writable()?;
        let gate = self.write_gate();
        if gate.applied != 0 || self.compacted.load(Ordering::SeqCst) != 0 {
            return Err(Error::NotEmpty { target: "the store".into() });
        }
        let records: Vec<(String, Record)> = items
            .into_iter()
            .map(|(key, value)| (key, Record { create: at, modified: at, value }))
            .collect();
        self.backend()?.import(&records)
    }

    /// Makes `at` the store's revision and its compaction revision, durably: reads and
    /// watches from before it are `Compacted`, writes go on after it.
    pub(super) fn finish_import(&self, at: u64) -> Result<()> {
        self.check_writable()?;
        let mut gate = self.write_gate();
        if gate.applied != 0 {
            return Err(Error::NotEmpty { target: "the store".into() });
        }
        let backend = self.backend()?;
        backend.finish_import(at)?;
        backend.sync()?;
        gate.applied = at;
        self.durable.store(at, Ordering::SeqCst);
        self.compacted.store(at, Ordering::SeqCst);
        Ok(())
    }
}
