//! The hub binary's client commands: token and accept commands, the fleet commands, backup
//! and restore, and the upload of the hub's certificates for new replicas.

pub mod admin;
pub mod backup;
pub mod certs;
pub mod fleet;
pub mod rollout;
