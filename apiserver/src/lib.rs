//! The hub's API server: the generic registry over `ocm-storage`, its watch cache, the REST
//! layer with discovery and Kubernetes errors, the PKI, the API-machinery controllers (garbage
//! collection, namespace lifecycle) and the `serve` entry point. Read `ARCHITECTURE.md` for how
//! the parts fit.

pub mod access;
pub mod authn;
pub mod authz;
pub mod background;
pub mod cache;
pub mod cli;
pub mod cluster_rbac;
pub mod conn;
pub mod controllers;
pub mod delegate;
pub mod discovery;
pub mod encoding;
pub mod error;
pub mod events;
pub mod fleet;
pub mod grpc;
pub mod intern;
pub mod jsonpath;
pub mod limits;
pub mod merge;
pub mod metrics;
pub mod object;
pub mod ocm;
pub mod openapi;
pub mod pki;
pub mod placement;
pub mod protobuf;
pub mod reconcile;
pub mod registration;
pub mod registry;
pub mod rest;
pub mod reviews;
pub mod scheme;
pub mod server;
pub mod strategy;
pub mod table;
pub mod tls;
pub mod tokens;
