//! The hub process: registry, REST and gRPC servers, authentication and controllers.
//!
//! Only the storage layer exists so far (`ocm-storage`); the registry and the servers arrive
//! with the API machinery issue. The `ocm-hub` binary is added together with `serve`.
