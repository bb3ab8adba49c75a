//! The storage error type: one enum for every backend, so callers never see a backend's errors.

use crate::revision::Revision;

/// A boxed source error from a backend or the operating system.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything a storage call can fail with. Backend-specific errors are boxed inside
/// [`Error::Unavailable`] or described in [`Error::Corrupt`]; they never appear in signatures.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The key does not exist (at the revision read).
    #[error("key {key:?} not found")]
    NotFound {
        /// The key that was asked for.
        key: String,
    },
    /// `create` found the key already present.
    #[error("key {key:?} already exists")]
    AlreadyExists {
        /// The key that exists.
        key: String,
    },
    /// A compare-and-swap or precondition did not hold: somebody else wrote the key first.
    #[error("conflict on key {key:?}: expected {what} {expected}, found {actual}")]
    Conflict {
        /// The key written.
        key: String,
        /// Which revision was compared: `"mod_revision"` or `"create_revision"`.
        what: &'static str,
        /// The revision the caller expected.
        expected: Revision,
        /// The revision stored.
        actual: Revision,
    },
    /// The revision asked for is older than the kept history.
    #[error("revision {requested} has been compacted; the oldest kept revision is {oldest}")]
    Compacted {
        /// The revision the caller asked to read or watch from.
        requested: Revision,
        /// The compaction revision: reads at it and later, and watches from it, still work.
        oldest: Revision,
    },
    /// The revision asked for has not been written yet.
    #[error("revision {requested} is in the future; the current revision is {current}")]
    FutureRevision {
        /// The revision asked for.
        requested: Revision,
        /// The store's current revision.
        current: Revision,
    },
    /// The value is larger than [`crate::MAX_VALUE_BYTES`].
    #[error("value for key {key:?} is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// The key written.
        key: String,
        /// The size of the refused value.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// A commit names more keys than [`crate::MAX_COMMIT_KEYS`], or its keys and values
    /// together pass [`crate::MAX_COMMIT_BYTES`].
    #[error(
        "a commit of {keys} keys and {bytes} bytes is over the limit of {} keys and {} bytes",
        crate::MAX_COMMIT_KEYS,
        crate::MAX_COMMIT_BYTES
    )]
    CommitTooLarge {
        /// How many keys the refused commit names.
        keys: usize,
        /// The bytes of its keys and values together.
        bytes: usize,
    },
    /// The key or prefix breaks the key rules of [`crate::key`].
    #[error("invalid key {key:?}: {reason}")]
    InvalidKey {
        /// The refused key or prefix.
        key: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// The continue token could not be decoded or belongs to another prefix.
    #[error("invalid continue token: {reason}")]
    InvalidContinue {
        /// Why it was refused.
        reason: &'static str,
    },
    /// A watcher fell behind the live event buffer and was ended. Resume with
    /// `watch(prefix, resume_from)`; every event up to `resume_from` was delivered.
    #[error("watcher fell behind; resume from revision {resume_from}")]
    Lagged {
        /// The last revision whose events were all delivered.
        resume_from: Revision,
    },
    /// The backend cannot serve the call now (IO failure, etcd unreachable, store closed).
    #[error("storage unavailable: {message}")]
    Unavailable {
        /// What failed.
        message: String,
        /// The underlying error, when there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// The store was written by a newer release in a format this build does not read. It is
    /// left exactly as it was found.
    #[error(
        "the store is in format {found}, newer than format {supported}, the newest this build \
         reads: run the release that wrote it, or a newer one"
    )]
    NewerFormat {
        /// The format the store records.
        found: u32,
        /// The newest format this build reads.
        supported: u32,
    },
    /// A write through a [`crate::Storage::fenced`] handle whose fence was closed or moved:
    /// its holder no longer leads, and nothing was written.
    #[error("fenced: the fence key {key:?} moved, so this writer no longer leads")]
    Fenced {
        /// The fence key.
        key: String,
    },
    /// A restore ([`crate::Storage::restore`]) found its target holding data already: a
    /// restore only ever makes a new store.
    #[error("{target} is not empty: a restore makes a new store and overwrites nothing")]
    NotEmpty {
        /// The target (a directory, an etcd prefix).
        target: String,
    },
    /// A restore was given what a snapshot cannot hold (keys out of order, a revision past the
    /// snapshot's), or a store's restore never finished.
    #[error("restore: {reason}")]
    Restore {
        /// What is wrong.
        reason: String,
    },
    /// Stored bytes could not be decoded. Never a panic; nothing is overwritten.
    #[error("corrupt record at {key:?}: {detail}")]
    Corrupt {
        /// Where the bad record was found (a key, or a backend-internal location).
        key: String,
        /// What is wrong with it.
        detail: String,
    },
}

impl Error {
    /// An [`Error::Unavailable`] with a source.
    pub(crate) fn unavailable(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Error::Unavailable { message: message.into(), source: Some(source.into()) }
    }

    /// An [`Error::Corrupt`].
    pub(crate) fn corrupt(key: impl Into<String>, detail: impl Into<String>) -> Self {
        Error::Corrupt { key: key.into(), detail: detail.into() }
    }
}

/// The storage result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
