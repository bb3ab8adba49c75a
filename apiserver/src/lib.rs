//! The hub's API server, in layers (each folder imports only from the folders before it here):
//! `machinery` (objects, errors, kinds and their strategies, encodings, OpenAPI, discovery,
//! metrics families), `store` (the generic registry and the watch cache over `ocm-storage`),
//! `auth` (TLS identity, authentication, RBAC, tokens, limits), `controllers` (the one
//! controller runtime and every controller), `serve` (start-up, connections, REST, gRPC),
//! `cli` (the hub binary's client commands) and `console` (the web console at `/ui/`, which
//! `serve` mounts through `ServeConfig::routes`). Read `ARCHITECTURE.md` for how the parts fit.

pub mod machinery;

pub mod store;

pub mod auth;

pub mod controllers;

pub mod serve;

pub mod cli;

pub mod console;
