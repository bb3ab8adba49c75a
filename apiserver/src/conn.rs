//! Per-connection HTTP/1 deadlines: the request head must arrive within a short time of its
//! first byte (slowloris), while a keep-alive connection may sit idle between requests for much
//! longer (an agent renewing its Lease every 10–60 s keeps one TLS session, not one per renewal).
//!
//! hyper has one timer for both (`header_read_timeout` starts when it waits for the next head,
//! idle or not), so hyper's timer is set to the idle limit and this module adds the head limit,
//! as Go's server does with `IdleTimeout` and `ReadHeaderTimeout`: [`HeadDeadline`] wraps the
//! connection's I/O and arms its deadline when bytes arrive while no request is in flight;
//! [`Requests`] counts requests handed to the service and the responses not yet finished, and
//! disarms it. Bytes that arrive while a response is still being sent (pipelining) are not
//! timed; hyper's idle limit still bounds them. HTTP/2 connections (ALPN `h2`, or the h2 preface) are left alone: their pings
//! and window updates arrive between requests by design, and h2 has its own limits.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use hyper::body::{Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// The first bytes of an HTTP/2 connection (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0";

/// What a connection's service tells its I/O: requests started, responses not yet finished.
#[derive(Debug, Default)]
pub struct Requests {
    /// Requests handed to the service so far.
    started: AtomicU64,
    /// Responses whose body has not been dropped yet.
    in_flight: AtomicUsize,
}

impl Requests {
    /// A request's head was parsed and handed to the service; the guard ends it when the
    /// response body is dropped (sent, or the connection closed).
    pub fn begin(self: &Arc<Self>) -> InFlight {
        self.started.fetch_add(1, Ordering::AcqRel);
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(Arc::clone(self))
    }

    fn idle(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }
}

/// One request in flight, until dropped.
#[derive(Debug)]
pub struct InFlight(Arc<Requests>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that holds its request's [`InFlight`] until it is finished.
pub struct Tracked {
    inner: Body,
    _in_flight: InFlight,
}

impl Tracked {
    /// Wraps `inner`.
    pub fn body(inner: Body, in_flight: InFlight) -> Body {
        Body::new(Tracked { inner, _in_flight: in_flight })
    }
}

impl hyper::body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A connection's I/O with the head deadline (see the module docs).
pub struct HeadDeadline<T> {
    inner: T,
    requests: Arc<Requests>,
    limit: Duration,
    /// Off for HTTP/2.
    enabled: bool,
    /// Armed: the timer, and how many requests had started when it was armed.
    armed: Option<(Pin<Box<Sleep>>, u64)>,
    /// Whether any byte was read yet (the h2 preface check looks at the first read).
    started: bool,
}

impl<T> HeadDeadline<T> {
    /// Wraps `inner`; `h2` (from ALPN) turns the deadline off.
    pub fn new(inner: T, requests: Arc<Requests>, limit: Duration, h2: bool) -> HeadDeadline<T> {
        HeadDeadline { inner, requests, limit, enabled: !h2, armed: None, started: false }
    }

    /// Disarms once the head was handed to the service; returns whether the deadline passed.
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        let Some((timer, at)) = self.armed.as_mut() else { return false };
        if self.requests.started.load(Ordering::Acquire) != *at || !self.requests.idle() {
            self.armed = None;
            return false;
        }
        timer.as_mut().poll(cx).is_ready()
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for HeadDeadline<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if !this.enabled {
            return polled;
        }
        match polled {
            Poll::Ready(Ok(())) if buf.filled().len() > before => {
                if !this.started {
                    this.started = true;
                    let got = &buf.filled()[before..];
                    let n = got.len().min(H2_PREFACE.len());
                    if got[..n] == H2_PREFACE[..n] {
                        this.enabled = false;
                        return Poll::Ready(Ok(()));
                    }
                }
                if this.armed.is_none() && this.requests.idle() {
                    let at = this.requests.started.load(Ordering::Acquire);
                    this.armed = Some((Box::pin(tokio::time::sleep(this.limit)), at));
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending if this.expired(cx) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the request head did not arrive in time",
            ))),
            other => other,
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for HeadDeadline<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
