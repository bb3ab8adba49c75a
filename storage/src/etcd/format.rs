//! The etcd backend's format. Format 1, every release's so far, stores the contract's keys and
//! values as they are under the prefix, with etcd's own revisions: there is no layout of ours
//! in it, so it records nothing (a marker would be a write, taking a revision outside every key
//! the hub watches). A release that changes the layout records its format under the key
//! `<prefix>#meta/format` (outside `<prefix>/`, where every key of the store is) as
//! `ocm-storage/etcd/<number>`; this build reads that key when it opens the store and refuses a
//! newer format with both numbers, having written nothing.

use super::client::etcdserverpb::RangeRequest;
use super::{Etcd, unavailable};
use crate::error::{Error, Result};

/// The newest format this build reads.
const FORMAT_NUMBER: u32 = 1;
/// What a format marker starts with (its number follows).
const FORMAT_PREFIX: &str = "ocm-storage/etcd/";

/// The key a store's format marker is kept under.
fn marker_key(prefix: &str) -> Vec<u8> {
    format!("{prefix}#meta/format").into_bytes()
}

/// Refuses a store whose format marker names a format this build does not read; reads only.
pub(super) async fn check(etcd: &Etcd) -> Result<()> {
    let request = RangeRequest { key: marker_key(&etcd.prefix), ..RangeRequest::default() };
    let response = etcd.client.range(&request).await.map_err(|e| unavailable("read", e))?;
    let Some(marker) = response.kvs.into_iter().next() else {
        return Ok(()); // format 1
    };
    let text = String::from_utf8_lossy(&marker.value);
    match text.strip_prefix(FORMAT_PREFIX).and_then(|n| n.parse::<u32>().ok()) {
        Some(FORMAT_NUMBER) => Ok(()),
        Some(found) if found > FORMAT_NUMBER => {
            Err(Error::NewerFormat { found, supported: FORMAT_NUMBER })
        }
        _ => Err(Error::corrupt(
            String::from_utf8_lossy(&marker_key(&etcd.prefix)),
            format!("unknown format {text:?}"),
        )),
    }
}
