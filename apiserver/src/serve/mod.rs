//! Serving: start-up and the accept loop, connections (and the request bodies their handlers
//! leave unread), the REST API and the gRPC server.

pub mod conn;
pub mod grpc;
pub mod rest;
pub mod scrape;
pub mod server;
pub mod unread;
