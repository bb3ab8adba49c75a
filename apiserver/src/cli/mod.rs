//! The hub binary's client commands: token and accept commands, the fleet commands, and backup
//! and restore.

pub mod admin;
pub mod backup;
pub mod fleet;
pub mod rollout;
