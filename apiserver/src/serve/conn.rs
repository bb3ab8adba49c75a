//! Per-connection HTTP/1 handling: deadlines, letting go of an idle connection's buffers, and
//! the lingering close after an answer that left its request body unread.
//!
//! Deadlines: the request head must arrive within a short time of its
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
//!
//! Idle connections: hyper keeps an 8 KiB read buffer and an 8 KiB header write buffer for
//! every HTTP/1 connection as long as it lives, idle or not; at 10,000 agents that each renew
//! every 10 s over their own keep-alive connection, that is most of the hub's memory per agent.
//! [`serve_http1`] ends hyper's state for a connection that has been idle for [`PARK_AFTER`]
//! and keeps only the TLS stream, waiting for the socket to become readable; then it serves the
//! connection with a fresh hyper state. nginx does the same with its keep-alive connections
//! (it frees their request buffers and waits on the socket).
//!
//! Closing: an answer that left its request body unread (`serve::unread`) carries
//! `Connection: close`; [`serve_http1`] then sends the TLS close_notify and the TCP FIN and
//! reads what the client still sends for a while before it lets go ([`Requests::linger`]), so
//! the client is not reset before it reads the answer.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper::service::HttpService;
use hyper_util::rt::TokioIo;
use prometheus::IntGauge;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio::time::{Instant, MissedTickBehavior, Sleep};

/// The first bytes of an HTTP/2 connection (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// An HTTP/1 connection with no request and no byte for this long lets go of hyper's state and
/// buffers (see the module docs). Far shorter than any heartbeat period, far longer than the
/// gap between a client's requests in one exchange (an agent's Lease GET and UPDATE). It parks
/// between one and two of these after its last byte, so an agent renewing every 10 s holds
/// hyper's buffers for about a tenth of the time.
pub const PARK_AFTER: Duration = Duration::from_millis(500);

/// What a connection's service tells its I/O: requests started, responses not yet finished.
#[derive(Debug, Default)]
pub struct Requests {
    /// Requests handed to the service so far.
    started: AtomicU64,
    /// Responses whose body has not been dropped yet.
    in_flight: AtomicUsize,
    /// Reads that returned bytes (the parking check's sign of life).
    reads: AtomicU64,
    /// An answer went out with `Connection: close` before its request body was read: the
    /// connection ends with a lingering close.
    linger: AtomicBool,
}

impl Requests {
    /// A request's head was parsed and handed to the service; the guard ends it when the
    /// response body is dropped (sent, or the connection closed).
    pub fn begin(self: &Arc<Self>) -> InFlight {
        self.started.fetch_add(1, Ordering::AcqRel);
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(Arc::clone(self))
    }

    /// An answer left its request body unread and closes the connection (`serve::unread`):
    /// the close lingers, reading what the client still sends, so the client reads the answer
    /// instead of a reset.
    pub fn linger(&self) {
        self.linger.store(true, Ordering::Release);
    }

    fn idle(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }

    /// Requests started and reads so far: unchanged over a period, with nothing in flight,
    /// means the connection was idle for that period.
    fn activity(&self) -> (u64, u64) {
        (self.started.load(Ordering::Acquire), self.reads.load(Ordering::Acquire))
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
    /// Bytes read from `inner` by an earlier hyper state and not consumed by it, served
    /// before `inner` is read again.
    unread: Bytes,
}

impl<T> HeadDeadline<T> {
    /// Wraps `inner`; `h2` (from ALPN) turns the deadline off.
    pub fn new(inner: T, requests: Arc<Requests>, limit: Duration, h2: bool) -> HeadDeadline<T> {
        HeadDeadline {
            inner,
            requests,
            limit,
            enabled: !h2,
            armed: None,
            started: false,
            unread: Bytes::new(),
        }
    }

    /// Puts back bytes read but not consumed: the next reads return them first.
    fn unread(&mut self, bytes: Bytes) {
        debug_assert!(self.unread.is_empty());
        self.unread = bytes;
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
        let polled = if this.unread.is_empty() {
            Pin::new(&mut this.inner).poll_read(cx, buf)
        } else {
            let n = this.unread.len().min(buf.remaining());
            buf.put_slice(&this.unread.split_to(n));
            Poll::Ready(Ok(()))
        };
        if buf.filled().len() > before {
            this.requests.reads.fetch_add(1, Ordering::AcqRel);
        }
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

/// Reads a connection's first bytes (waiting at most `idle`) to tell HTTP/2's preface from an
/// HTTP/1 request, and puts them back for the server that follows: `Some(true)` for HTTP/2,
/// `None` when the client closed or sent nothing in time. For clients that chose no protocol
/// in their TLS handshake (kube-rs chooses none for HTTP/1.1).
pub async fn sniff_h2<T: AsyncRead + Unpin>(
    io: &mut HeadDeadline<T>,
    idle: Duration,
) -> io::Result<Option<bool>> {
    let mut got = Vec::with_capacity(H2_PREFACE.len());
    let sniffed = tokio::time::timeout(idle, async {
        let mut buf = [0u8; H2_PREFACE.len()];
        loop {
            let n = io.read(&mut buf[..H2_PREFACE.len() - got.len()]).await?;
            if n == 0 {
                return Ok(None);
            }
            got.extend_from_slice(&buf[..n]);
            if !H2_PREFACE.starts_with(&got) {
                return Ok(Some(false));
            }
            if got.len() == H2_PREFACE.len() {
                return Ok(Some(true));
            }
        }
    })
    .await
    .unwrap_or(Ok(None));
    io.unread(Bytes::from(got));
    sniffed
}

/// Serves one HTTP/1.1 connection until it closes, letting go of hyper's state and buffers
/// whenever it has been idle for [`PARK_AFTER`] (see the module docs). `builder` holds the
/// HTTP/1 settings; a connection with no request for `idle` is closed, parked or not.
pub async fn serve_http1<S>(
    mut io: HeadDeadline<crate::serve::server::connections::Stream>,
    mut svc: S,
    builder: &http1::Builder,
    idle: Duration,
    parked: &IntGauge,
) -> Result<(), hyper::Error>
where
    S: HttpService<Incoming, ResBody = Body> + Unpin,
    S::Future: Unpin,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let requests = Arc::clone(&io.requests);
    let mut last_active = Instant::now();
    loop {
        let mut conn = builder.serve_connection(TokioIo::new(io), svc);
        let mut tick = tokio::time::interval_at(Instant::now() + PARK_AFTER, PARK_AFTER);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut seen = requests.activity();
        let mut parking = false;
        std::future::poll_fn(|cx| {
            while !parking && tick.poll_tick(cx).is_ready() {
                let now = requests.activity();
                if now == seen && requests.idle() {
                    // hyper closes an idle connection's state at once, without touching the
                    // I/O (`poll_without_shutdown`).
                    Pin::new(&mut conn).graceful_shutdown();
                    parking = true;
                } else {
                    seen = now;
                    last_active = Instant::now();
                }
            }
            conn.poll_without_shutdown(cx)
        })
        .await?;
        // hyper's read buffer comes back whole, even when nothing is left in it: an empty
        // `Bytes` that still owns the 8 KiB allocation. It is taken apart here so that a
        // parked connection does not keep it (`parts` would live across the wait below).
        let http1::Parts { io: deadline, read_buf, service, .. } = conn.into_parts();
        io = deadline.into_inner();
        svc = service;
        if !parking {
            // The client closed, or asked to (`Connection: close`), or an answer left its
            // request body unread: end as hyper would, lingering in the last case.
            let _ = tokio::time::timeout(SHUTDOWN_WAIT, io.shutdown()).await;
            if requests.linger.load(Ordering::Acquire) {
                drop(read_buf);
                linger(&mut io.inner).await;
            }
            return Ok(());
        }
        if !read_buf.is_empty() {
            // Part of a head, read before it stalled: the next state reads it first (and
            // the head deadline armed when it arrived still runs).
            io.unread(read_buf);
            continue;
        }
        drop(read_buf);
        // Plaintext rustls decrypted but hyper did not take, or the peer's close_notify: the
        // socket may never become readable again, so serve at once.
        let (tcp, tls) = io.inner.get_mut();
        let pending = tls
            .process_new_packets()
            .map_or(true, |s| s.plaintext_bytes_to_read() > 0 || s.peer_has_closed());
        if pending {
            continue;
        }
        let _parked = Parked::new(parked);
        tokio::select! {
            ready = tcp.readable() => {
                if ready.is_err() {
                    return Ok(());
                }
            }
            _ = tokio::time::sleep_until(last_active + idle) => {
                let _ = tokio::time::timeout(SHUTDOWN_WAIT, io.shutdown()).await;
                return Ok(());
            }
        }
    }
}

/// The rest of a lingering close (after the TLS close_notify and the TCP FIN went out): reads
/// and discards what the client still sends, until it closes, [`LINGER_BYTES`] were read or
/// [`LINGER_WAIT`] passed. Closing a socket with unread bytes in it sends a TCP reset, and a
/// client that writes its whole body before it reads would get the reset instead of the
/// answer waiting for it; nginx's `lingering_close` and Go's `closeWriteAndWait` do the same.
async fn linger<T: AsyncRead + Unpin>(io: &mut T) {
    let _ = tokio::time::timeout(LINGER_WAIT, async {
        let mut buf = vec![0u8; 16 * 1024];
        let mut read = 0usize;
        while read < LINGER_BYTES {
            match io.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => read += n,
            }
        }
    })
    .await;
}

/// How long a lingering close reads what the client still sends.
const LINGER_WAIT: Duration = Duration::from_secs(5);

/// The most a lingering close reads.
const LINGER_BYTES: usize = 64 * 1024 * 1024;

/// One parked connection in the gauge, until dropped.
struct Parked<'a>(&'a IntGauge);

impl Parked<'_> {
    fn new(gauge: &IntGauge) -> Parked<'_> {
        gauge.inc();
        Parked(gauge)
    }
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// How long closing a connection may take to send its TLS close_notify.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);
