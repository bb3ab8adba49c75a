//! The wire contract shared by the hub and the agent: API object types and the gRPC protocol.
//!
//! It holds the label and field selector grammars ([`selector`]), the field-error shape every
//! validation returns ([`validation`]), Go-style durations of flags ([`duration`]), the OCM CRDs with a structural-schema validator
//! ([`crd`], [`schema`]), the typed OCM API objects ([`api`]) and the CloudEvents gRPC protocol
//! ([`cloudevents`], with the hub's own message framing in [`frame`]) and the cluster proxy's tunnel
//! ([`tunnel`]). Core Kubernetes types come from
//! `k8s-openapi`. This crate must stay free of IO and of every other workspace crate (see
//! `ARCHITECTURE.md`).

pub mod api;
pub mod cloudevents;
pub mod crd;
pub mod duration;
pub mod frame;
pub mod gojson;
pub mod jsonpath;
pub mod logfmt;
pub mod payload;
pub mod quantity;
pub mod schema;
pub mod selector;
pub mod tunnel;
pub mod validation;
