//! Backend selection: the one enum the rest of the hub uses to choose a backend at start-up, and
//! every backend's options. The backends read their options from here; `Storage::open` opens the
//! chosen one.

use std::path::PathBuf;
use std::time::Duration;

/// Which backend to open, with its options.
#[derive(Debug, Clone)]
pub enum Engine {
    /// Everything in process memory; lost on exit. The reference semantics and the test double.
    Memory(LocalOptions),
    /// The embedded default: a sled database in a directory.
    Sled(SledOptions),
    /// An etcd v3 cluster, for several hub replicas.
    Etcd(EtcdOptions),
}

/// How much watch history an embedded backend keeps. A revision leaves the history (it is
/// compacted) once it is more than `max_events` revisions behind the current one **or** older
/// than `max_age`, whichever comes first. The check runs every `check_every` and deletes in small
/// paced chunks (about 20,000 revisions a second at most, so it never stalls writers), so the
/// history may exceed the window by what was written meanwhile; it never keeps less.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryWindow {
    /// Revisions kept at most.
    pub max_events: u64,
    /// Age kept at most.
    pub max_age: Duration,
    /// How often the window is enforced.
    pub check_every: Duration,
}

impl Default for HistoryWindow {
    /// 100,000 revisions or 10 minutes: at 10,000 clusters renewing a lease every 60 s that is
    /// still 10 minutes of history, longer than the 75 s Kubernetes' watch cache keeps.
    fn default() -> Self {
        HistoryWindow {
            max_events: 100_000,
            max_age: Duration::from_secs(600),
            check_every: Duration::from_secs(1),
        }
    }
}

/// Options shared by the embedded backends (memory and sled).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalOptions {
    /// The history window.
    pub history: HistoryWindow,
    /// Live events buffered per store; a watcher more than this many events behind is ended with
    /// `Lagged` so it cannot stall the others.
    pub watch_buffer: usize,
}

impl Default for LocalOptions {
    fn default() -> Self {
        LocalOptions { history: HistoryWindow::default(), watch_buffer: 16_384 }
    }
}

/// The default of [`SledOptions::min_free_bytes`]: 64 MiB, a few hundred of the largest
/// commits.
pub const DEFAULT_MIN_FREE_BYTES: u64 = 64 << 20;

/// Options of the sled backend.
#[derive(Debug, Clone)]
pub struct SledOptions {
    /// The directory holding the database (created if missing).
    pub path: PathBuf,
    /// sled's page cache size hint, in bytes.
    pub cache_capacity: u64,
    /// History window and watch buffer.
    pub local: LocalOptions,
    /// **Breaks durability; for the crash test's negative control only.** Acknowledges writes
    /// without waiting for the flush, so a crash loses acknowledged writes.
    pub unsafe_ack_before_flush: bool,
    /// The free space below which the store refuses writes (read-only until there is more),
    /// so that sled never meets a full disk: its failed writes can wedge it. `0`: none kept.
    pub min_free_bytes: u64,
}

impl SledOptions {
    /// Defaults for a database in `path`.
    pub fn new(path: impl Into<PathBuf>) -> SledOptions {
        SledOptions {
            path: path.into(),
            cache_capacity: 128 * 1024 * 1024,
            local: LocalOptions::default(),
            unsafe_ack_before_flush: false,
            min_free_bytes: DEFAULT_MIN_FREE_BYTES,
        }
    }
}

/// Options of the etcd backend.
#[derive(Debug, Clone)]
pub struct EtcdOptions {
    /// Client URLs, such as `http://127.0.0.1:2379`.
    pub endpoints: Vec<String>,
    /// Every key is stored under this prefix in etcd (no trailing slash needed), so several hubs
    /// or tests can share one etcd.
    pub prefix: String,
    /// How long to wait for the first connection.
    pub connect_timeout: Duration,
}

impl EtcdOptions {
    /// Defaults for the given endpoints and prefix.
    pub fn new(endpoints: Vec<String>, prefix: impl Into<String>) -> EtcdOptions {
        EtcdOptions { endpoints, prefix: prefix.into(), connect_timeout: Duration::from_secs(5) }
    }
}
