//! Fenced writes: a handle whose every write lands only while a fence key still holds the
//! revision its holder wrote it at. A leader writes the fence key when it takes leadership, so a
//! deposed leader's late write (its fence key since rewritten by the next leader) fails as
//! [`Error::Fenced`] instead of landing. Only the etcd backend fences (one transaction compares
//! the fence key beside the write's own keys); the embedded backends serve one hub, which
//! always leads, and refuse fenced writes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::types::{Deleted, KeyValue, Preconditions, Write, Written};
use crate::{Error, Result, Revision, Storage};

/// The fence a [`Storage::fenced`] handle writes under: a key and the revision its holder last
/// wrote it at. Clones share the token, so the holder moves every handle at once.
#[derive(Debug, Clone)]
pub struct Fence {
    key: String,
    token: Arc<AtomicU64>,
}

impl Fence {
    /// A fence on `key`, closed until [`Fence::hold`].
    pub fn new(key: impl Into<String>) -> Fence {
        Fence { key: key.into(), token: Arc::default() }
    }

    /// The fence key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Opens the fence: writes land while the key's mod revision is `revision`.
    pub fn hold(&self, revision: Revision) {
        self.token.store(revision.0, Ordering::SeqCst);
    }

    /// Closes the fence: every write fails until the next [`Fence::hold`].
    pub fn release(&self) {
        self.token.store(0, Ordering::SeqCst);
    }

    /// The revision writes are compared with, or `None` while the fence is closed.
    pub fn token(&self) -> Option<Revision> {
        match self.token.load(Ordering::SeqCst) {
            0 => None,
            r => Some(Revision(r)),
        }
    }

    /// The error of a write made while the fence is closed or moved.
    pub(crate) fn refused(&self) -> Error {
        Error::Fenced { key: self.key.clone() }
    }
}

impl Storage {
    /// The same store, every write through the handle fenced by `fence` (reads and watches are
    /// the store's own).
    pub fn fenced(&self, fence: Fence) -> Storage {
        Storage { fence: Some(fence), ..self.clone() }
    }

    /// Writes `writes` (in key order) as one commit, fenced when the handle is.
    pub(crate) async fn commit_sorted(&self, writes: Vec<Write>) -> Result<crate::Committed> {
        match &self.fence {
            None => self.inner.commit(writes).await,
            Some(fence) => {
                let token = fence.token().ok_or_else(|| fence.refused())?;
                self.inner.commit_fenced(writes, fence.key(), token).await
            }
        }
    }

    /// Creates `key` (through the fence, when the handle has one).
    pub(crate) async fn store_create(&self, key: &str, value: bytes::Bytes) -> Result<KeyValue> {
        if self.fence.is_none() {
            return self.inner.create(key, value).await;
        }
        let write = Write::Create { key: key.to_owned(), value };
        put_of(self.fenced_one(write).await?, key)
    }

    /// Replaces `key` at `expected` (through the fence, when the handle has one).
    pub(crate) async fn store_update(
        &self,
        key: &str,
        value: bytes::Bytes,
        expected: Revision,
    ) -> Result<KeyValue> {
        if self.fence.is_none() {
            return self.inner.update(key, value, expected).await;
        }
        let write = Write::Update { key: key.to_owned(), value, expected };
        put_of(self.fenced_one(write).await?, key)
    }

    /// Deletes `key` if `pre` holds (through the fence, when the handle has one). A fenced
    /// delete compares the mod revision it read, so a precondition on the create revision alone
    /// is checked on a read and retried when another write lands in between.
    pub(crate) async fn store_delete(&self, key: &str, pre: Preconditions) -> Result<Deleted> {
        if self.fence.is_none() {
            return self.inner.delete(key, pre).await;
        }
        loop {
            let expected = match pre.mod_revision {
                Some(expected) => expected,
                None => {
                    let current = self.inner.get(key).await?;
                    pre.check(&current)?;
                    current.mod_revision
                }
            };
            let write = Write::Delete { key: key.to_owned(), expected };
            match self.fenced_one(write).await {
                Ok(Written::Deleted(deleted)) => return Ok(deleted),
                Ok(Written::Put(_)) => return Err(Error::corrupt(key, "a delete answered a put")),
                Err(Error::Conflict { .. }) if pre.mod_revision.is_none() => {
                    tokio::task::yield_now().await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn fenced_one(&self, write: Write) -> Result<Written> {
        let key = write.key().to_owned();
        let mut committed = self.commit_sorted(vec![write]).await?;
        committed.written.pop().ok_or_else(|| Error::corrupt(key, "a commit answered nothing"))
    }
}

fn put_of(written: Written, key: &str) -> Result<KeyValue> {
    match written {
        Written::Put(kv) => Ok(kv),
        Written::Deleted(_) => Err(Error::corrupt(key, "a put answered a delete")),
    }
}
