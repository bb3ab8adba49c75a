//! The hub's controllers on one runtime (`runtime`): garbage collection and namespace deletion,
//! registration, placement.

pub mod gc;
pub mod placement;
pub mod registration;
pub mod rollout;
pub mod runtime;
