//! The wire contract shared by the hub and the agent: API object types and the gRPC protocol.
//!
//! So far it holds the label and field selector grammars ([`selector`]); the API types arrive
//! with the API machinery issue and the CloudEvents protocol with the prescriptions issue. This
//! crate must stay free of IO and of every other workspace crate (see `ARCHITECTURE.md`).

pub mod selector;
