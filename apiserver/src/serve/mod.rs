//! Serving: start-up and the accept loop, connections (and the request bodies their handlers
//! leave unread), the REST API (with the cluster proxy), the gRPC server and the cluster
//! proxy's tunnels.

pub mod conn;
pub mod grpc;
pub mod rest;
pub mod scrape;
pub mod server;
pub mod tunnel;
pub mod unread;
