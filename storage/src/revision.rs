//! `Revision`, the store's one global write counter: every key, event, page and error names
//! its points in history with it.

use std::fmt;

/// A point in the store's history. Every successful write gets exactly one new revision, greater
/// than every earlier one; the API renders it as an opaque `resourceVersion` string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Revision(pub u64);

impl Revision {
    /// The revision before the first write.
    pub const ZERO: Revision = Revision(0);

    /// The number.
    pub fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
