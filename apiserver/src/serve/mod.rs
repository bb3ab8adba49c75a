//! Serving: start-up and the accept loop, connections, the REST API and the gRPC server.

pub mod conn;
pub mod grpc;
pub mod rest;
pub mod scrape;
pub mod server;
