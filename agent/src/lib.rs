//! The klusterlet agent (design §4): joins a hub through the double opt-in handshake, renews its
//! Lease, reports its cluster's status and rotates its certificate. It may depend on `ocm-proto`
//! only, never on the hub or its storage (see `ARCHITECTURE.md`).

pub mod addon;
pub mod agent;
pub mod backoff;
pub mod clock;
pub mod cluster;
pub mod configpolicy;
pub mod error;
pub mod grpc;
pub mod hub;
pub mod metrics;
pub mod msa;
pub mod policy;
pub mod proxy;
pub mod registration;
pub mod replicas;
pub mod rules;
pub mod state;
pub mod status;
pub mod transport;
pub mod work;
