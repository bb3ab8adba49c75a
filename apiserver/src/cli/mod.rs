//! The hub binary's client commands: token and accept commands, and the fleet commands.

pub mod admin;
pub mod fleet;
pub mod rollout;
