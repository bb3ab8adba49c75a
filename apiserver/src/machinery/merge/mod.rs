//! Merging objects by their kind's shape: strategic merge patch, field sets and server-side
//! apply with `metadata.managedFields`.

pub mod fields;
pub mod managed;
pub mod shape;
pub mod smp;
