//! The rest of a request body its handler did not read: an answer sent before the body is read
//! (413 over the limit, 401, 403, 429 on a write) must still reach a client that writes its
//! whole body before it reads (Python's requests and urllib3, curl over HTTP/2).
//!
//! The handler gets the body as [`Returning`], which hands the unread rest back when the handler
//! drops it. Before the answer goes out, [`settle`] reads and discards that rest, within
//! [`DRAIN_BYTES`] and [`DRAIN_WAIT`], as Go's server reads what a handler left (up to
//! 256 KiB) so the connection can be kept. A body read to its end ends an HTTP/2 stream
//! cleanly and keeps an HTTP/1.1 connection. A longer one is left: HTTP/2 resets the stream
//! with NO_ERROR after the answer (hyper, per RFC 9113 §8.1); HTTP/1.1 answers with
//! `Connection: close` and closes with a lingering close (`conn::serve_http1`). A client that
//! asked for `100 Continue` and was never told to send is not read from: it sends nothing.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use http_body_util::BodyExt as _;
use hyper::body::{Frame, Incoming, SizeHint};
use tokio::sync::oneshot;

/// The most of an unread body [`settle`] reads before it gives up on it: room for a body a
/// little over the limit (`rest::MAX_BODY_BYTES`, of which the handler read up to the limit).
pub const DRAIN_BYTES: u64 = 4 * 1024 * 1024;

/// How long [`settle`] waits for the rest of a body.
pub const DRAIN_WAIT: Duration = Duration::from_secs(5);

/// A request body that hands what was not read back to the connection when dropped.
pub struct Returning {
    inner: Option<Incoming>,
    back: Option<oneshot::Sender<Leftover>>,
    /// Whether the handler asked for any of it (which sends a `100 Continue`).
    polled: bool,
    /// Whether the body reached its end.
    ended: bool,
}

/// The unread rest of a request body.
pub struct Leftover {
    body: Incoming,
    polled: bool,
}

/// Wraps `body`: the receiver gets its unread rest once the handler drops it.
pub fn returning(body: Incoming) -> (Returning, oneshot::Receiver<Leftover>) {
    let (back, rest) = oneshot::channel();
    let body = Returning { inner: Some(body), back: Some(back), polled: false, ended: false };
    (body, rest)
}

impl hyper::body::Body for Returning {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        this.polled = true;
        let Some(inner) = this.inner.as_mut() else { return Poll::Ready(None) };
        let polled = Pin::new(inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            this.ended = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.as_ref().is_none_or(hyper::body::Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.as_ref().map(hyper::body::Body::size_hint).unwrap_or_default()
    }
}

impl Drop for Returning {
    fn drop(&mut self) {
        if hyper::body::Body::is_end_stream(self) {
            return;
        }
        if let (Some(body), Some(back)) = (self.inner.take(), self.back.take()) {
            // The connection may be gone already; then there is nothing to read.
            let _ = back.send(Leftover { body, polled: self.polled });
        }
    }
}

/// Reads and discards what the handler left of its request body, once the answer is ready:
/// `true` when nothing is left unread (read to its end within the bounds, or nothing was
/// left), `false` when the rest was given up (too long, too slow, broken, or a client waiting
/// for `100 Continue`).
pub async fn settle(rest: oneshot::Receiver<Leftover>, headers: &HeaderMap) -> bool {
    // A handler that still holds its body (none does past its answer) or read it to its end
    // sends nothing.
    let mut rest = rest;
    let Ok(Leftover { body, polled }) = rest.try_recv() else { return true };
    if !polled && expects_continue(headers) {
        return false;
    }
    tokio::time::timeout(DRAIN_WAIT, drain(body)).await.unwrap_or(false)
}

/// Reads `body` to its end unless it holds more than [`DRAIN_BYTES`].
async fn drain(mut body: Incoming) -> bool {
    let mut read = 0u64;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else { return false };
        if let Some(data) = frame.data_ref() {
            read = read.saturating_add(data.len() as u64);
            if read > DRAIN_BYTES {
                return false;
            }
        }
    }
    true
}

/// Whether the request asked to be told before it sends its body.
fn expects_continue(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::EXPECT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
}
