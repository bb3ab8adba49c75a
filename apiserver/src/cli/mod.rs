//! The hub binary's client commands: token and accept commands, the fleet commands, backup
//! and restore, the upload of the hub's certificates for new replicas, and a managed cluster's
//! kubeconfig through the hub's proxy.

pub mod admin;
pub mod backup;
pub mod certs;
pub mod fleet;
pub mod kubeconfig;
pub mod rollout;
