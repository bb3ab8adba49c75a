//! API machinery, the lowest layer: objects and their metadata, Kubernetes errors, the table of
//! served kinds and their strategies, merges and patches, encodings, tables, OpenAPI, discovery,
//! who asks (the requester and the authorizer trait), metrics families, the task tracker and the
//! backup format.

pub mod background;
pub mod backoff;
pub mod backup;
pub mod clock;
pub mod core_validation;
pub mod discovery;
pub mod error;
pub mod events;
pub mod intern;
pub mod known_fields;
pub mod merge;
pub mod metrics;
pub mod object;
pub mod ocm;
pub mod openapi;
pub mod policy;
pub mod protobuf;
pub mod requester;
pub mod scheme;
pub mod strategy;
pub mod table;
pub mod template;
