//! `GET /ocm/v1/backup`: every key of the store at one revision, streamed in the backup format
//! (`machinery/backup.rs`) for `ocm-hub backup`. Authorized as a non-resource URL (only
//! `system:masters`, or a `get` on the URL granted through RBAC), like `/metrics`.
//!
//! The keys are read from the store itself, not the watch cache: a paged list whose pages all
//! read the first page's revision (the continue token carries it) is one consistent snapshot on
//! every backend, and only a page is held at a time; the client's reading paces the stream.

use axum::body::Body;
use axum::response::Response;
use bytes::BytesMut;
use http::{StatusCode, header};
use ocm_storage::{ListOptions, Storage};

use super::ApiState;
use super::encoding::Streaming;
use crate::machinery::backup::{CONTENT_TYPE, End, FORMAT, Frame, Start};
use crate::machinery::error::{ApiError, from_storage};

/// Keys read per page: client-go's pager default, as Kubernetes' own lists page. Part of a
/// page's cost grows with the keys after it (etcd 3.4 walks its index to the end of the range
/// for every page) or with what was written since the snapshot (the embedded backends roll it
/// back), so larger pages cost a backup less; a page of typical objects is a few hundred KiB.
const PAGE: usize = 500;

/// The backup stream. The first page is read before answering, so a store that cannot be
/// read is an error status; a failure later ends the stream with an `X` frame.
pub(super) async fn backup(state: &ApiState) -> Result<Response, ApiError> {
    let storage: Storage = state.registry.storage.clone();
    let options = ListOptions { limit: PAGE, skip_remaining: true, ..ListOptions::default() };
    let first =
        storage.list("/", &options).await.map_err(|e| from_storage(e, Default::default()))?;
    let revision = first.revision.get();
    let start =
        Start { format: FORMAT.to_owned(), revision, backend: state.storage_backend.to_owned() };
    let frames = async_stream::stream! {
        yield Ok::<_, std::convert::Infallible>(Frame::Start(start).encode());
        let mut objects = 0u64;
        let mut page = first;
        loop {
            let mut chunk = BytesMut::new();
            for kv in page.items {
                objects += 1;
                let key = Frame::Key { key: kv.key, revision: kv.mod_revision.get(), value: kv.value };
                key.encode_into(&mut chunk);
            }
            yield Ok(chunk.freeze());
            let Some(token) = page.continue_token else { break };
            let next = ListOptions {
                limit: PAGE,
                continue_token: Some(token),
                skip_remaining: true,
                ..ListOptions::default()
            };
            page = match storage.list("/", &next).await {
                Ok(page) => page,
                Err(e) => {
                    tracing::warn!(error = %e, revision, "backup stream failed");
                    yield Ok(Frame::Failed(e.to_string()).encode());
                    return;
                }
            };
        }
        yield Ok(Frame::End(End { revision, objects, files: 0 }).encode());
        tracing::info!(revision, objects, "backup streamed");
    };
    let mut resp = Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, CONTENT_TYPE)
        .header(header::CACHE_CONTROL, "no-store")
        .body(Body::from_stream(frames))
        .map_err(ApiError::internal)?;
    resp.extensions_mut().insert(Streaming);
    Ok(resp)
}
