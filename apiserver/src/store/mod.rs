//! The registry layer: the one create / get / list / update / patch / delete recipe over
//! `ocm-storage`, and the watch cache lists and watches are served from.

pub mod budget;
pub mod cache;
pub mod cached;
pub mod follow;
pub mod registry;
