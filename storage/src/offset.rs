//! The revisions of a store restored into etcd: etcd numbers its own revisions, so a restore
//! records an offset under the prefix, and this wrapper adds it to every revision the backend
//! reports and takes it off every revision it is asked for. Below the restore's revision (the
//! floor) nothing is readable: reads and watches from there are `Compacted`, as after a
//! compaction, so no reader of the original store resumes into the restored one.

use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt as _;

use crate::error::{Error, Result};
use crate::{
    BackendPage, Commit, CommitStream, Committed, Deleted, KeyValue, ListRequest, Preconditions,
    Revision, Store, WatchEvent, Write, Written,
};

/// The translation between the backend's revisions and the ones reported.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shift {
    /// Added to every revision the backend reports (but 0, "none").
    pub(crate) offset: u64,
    /// The restore's revision, as reported: the oldest one readable.
    pub(crate) floor: u64,
}

impl Shift {
    fn up(self, r: Revision) -> Revision {
        if r.0 == 0 { r } else { Revision(r.0.saturating_add(self.offset)) }
    }

    /// A reported revision as the backend's; one at or below the offset names no revision
    /// the backend wrote for this store and becomes 0, which matches no stored key.
    fn down(self, r: Revision) -> Revision {
        Revision(r.0.saturating_sub(self.offset))
    }

    fn kv(self, kv: KeyValue) -> KeyValue {
        KeyValue {
            create_revision: self.up(kv.create_revision),
            mod_revision: self.up(kv.mod_revision),
            ..kv
        }
    }

    fn deleted(self, d: Deleted) -> Deleted {
        Deleted { revision: self.up(d.revision), prev: self.kv(d.prev) }
    }

    fn event(self, e: &WatchEvent) -> WatchEvent {
        WatchEvent {
            kind: e.kind,
            revision: self.up(e.revision),
            key: e.key.clone(),
            value: e.value.clone(),
            create_revision: self.up(e.create_revision),
            prev: e.prev.clone().map(|p| self.kv(p)),
        }
    }

    fn compacted(self, requested: Revision) -> Error {
        Error::Compacted { requested, oldest: Revision(self.floor) }
    }

    /// Whether `r` lies below the restore (nothing there is readable).
    fn below(self, r: Revision) -> bool {
        r.0 < self.floor
    }

    /// The backend's error with its revisions reported; a compared revision the caller gave
    /// (`expected`, by key and what was compared) is named as the caller gave it.
    fn error(self, e: Error, expected: impl Fn(&str, &str) -> Option<Revision>) -> Error {
        match e {
            Error::Compacted { requested, oldest } => Error::Compacted {
                requested: self.up(requested),
                oldest: self.up(oldest).max(Revision(self.floor)),
            },
            Error::FutureRevision { requested, current } => {
                Error::FutureRevision { requested: self.up(requested), current: self.up(current) }
            }
            Error::Conflict { key, what, expected: compared, actual } => Error::Conflict {
                expected: expected(&key, what).unwrap_or_else(|| self.up(compared)),
                actual: self.up(actual),
                key,
                what,
            },
            Error::Lagged { resume_from } => Error::Lagged { resume_from: self.up(resume_from) },
            other => other,
        }
    }

    fn plain(self, e: Error) -> Error {
        self.error(e, |_, _| None)
    }
}

/// A store whose revisions are shifted by a restore's offset.
pub(crate) struct Offset {
    pub(crate) inner: Arc<dyn Store>,
    pub(crate) shift: Shift,
}

impl Offset {
    /// A commit with its compared revisions taken down to the backend's (the fence's too).
    async fn commit_shifted(
        &self,
        writes: Vec<Write>,
        fence: Option<(&str, Revision)>,
    ) -> Result<Committed> {
        let s = self.shift;
        let asked: Vec<(String, Revision)> = writes
            .iter()
            .filter_map(|w| match w {
                Write::Update { key, expected, .. } | Write::Delete { key, expected } => {
                    Some((key.clone(), *expected))
                }
                Write::Create { .. } => None,
            })
            .collect();
        let shifted = writes
            .into_iter()
            .map(|w| match w {
                Write::Update { key, value, expected } => {
                    Write::Update { key, value, expected: s.down(expected) }
                }
                Write::Delete { key, expected } => {
                    Write::Delete { key, expected: s.down(expected) }
                }
                create => create,
            })
            .collect();
        let committed = match fence {
            None => self.inner.commit(shifted).await,
            Some((key, token)) => self.inner.commit_fenced(shifted, key, s.down(token)).await,
        };
        match committed {
            Ok(c) => Ok(Committed {
                revision: s.up(c.revision),
                written: c
                    .written
                    .into_iter()
                    .map(|w| match w {
                        Written::Put(kv) => Written::Put(s.kv(kv)),
                        Written::Deleted(d) => Written::Deleted(s.deleted(d)),
                    })
                    .collect(),
            }),
            Err(e) => Err(s.error(e, |key, _| {
                asked.iter().find(|(k, _)| k == key).map(|&(_, expected)| expected)
            })),
        }
    }
}

#[async_trait::async_trait]
impl Store for Offset {
    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue> {
        let s = self.shift;
        self.inner.create(key, value).await.map(|kv| s.kv(kv)).map_err(|e| s.plain(e))
    }

    async fn get(&self, key: &str) -> Result<KeyValue> {
        let s = self.shift;
        self.inner.get(key).await.map(|kv| s.kv(kv)).map_err(|e| s.plain(e))
    }

    async fn list(&self, req: ListRequest<'_>) -> Result<BackendPage> {
        let s = self.shift;
        let revision = match req.revision {
            Some(r) if s.below(r) => return Err(s.compacted(r)),
            other => other.map(|r| s.down(r)),
        };
        let page =
            self.inner.list(ListRequest { revision, ..req }).await.map_err(|e| s.plain(e))?;
        Ok(BackendPage {
            items: page.items.into_iter().map(|kv| s.kv(kv)).collect(),
            revision: s.up(page.revision),
            more: page.more,
            remaining: page.remaining,
        })
    }

    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> Result<KeyValue> {
        let s = self.shift;
        match self.inner.update(key, value, s.down(expected)).await {
            Ok(kv) => Ok(s.kv(kv)),
            Err(e) => Err(s.error(e, |_, _| Some(expected))),
        }
    }

    async fn delete(&self, key: &str, pre: Preconditions) -> Result<Deleted> {
        let s = self.shift;
        let shifted = Preconditions {
            mod_revision: pre.mod_revision.map(|r| s.down(r)),
            create_revision: pre.create_revision.map(|r| s.down(r)),
        };
        match self.inner.delete(key, shifted).await {
            Ok(d) => Ok(s.deleted(d)),
            Err(e) => Err(s.error(e, |_, what| match what {
                "create_revision" => pre.create_revision,
                _ => pre.mod_revision,
            })),
        }
    }

    async fn commit(&self, writes: Vec<Write>) -> Result<Committed> {
        self.commit_shifted(writes, None).await
    }

    async fn commit_fenced(
        &self,
        writes: Vec<Write>,
        fence: &str,
        token: Revision,
    ) -> Result<Committed> {
        self.commit_shifted(writes, Some((fence, token))).await
    }

    async fn watch(&self, prefix: &str, from: Revision) -> Result<CommitStream> {
        let s = self.shift;
        if s.below(from) {
            return Err(s.compacted(from));
        }
        let commits = self.inner.watch(prefix, s.down(from)).await.map_err(|e| s.plain(e))?;
        Ok(Box::pin(commits.map(move |item| match item {
            Ok(commit) => Ok(Commit {
                revision: s.up(commit.revision),
                events: commit.events.iter().map(|e| Arc::new(s.event(e))).collect(),
            }),
            Err(e) => Err(s.plain(e)),
        })))
    }

    async fn current_revision(&self) -> Result<Revision> {
        let s = self.shift;
        self.inner.current_revision().await.map(|r| s.up(r)).map_err(|e| s.plain(e))
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        let s = self.shift;
        if s.below(revision) {
            // Everything below the restore is unreadable already.
            return Ok(());
        }
        self.inner.compact(s.down(revision)).await.map_err(|e| s.plain(e))
    }

    fn failed(&self) -> bool {
        self.inner.failed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_go_up_and_down_by_the_offset() {
        let s = Shift { offset: 1000, floor: 1050 };
        assert_eq!(s.up(Revision(0)), Revision(0));
        assert_eq!(s.up(Revision(60)), Revision(1060));
        assert_eq!(s.down(Revision(1060)), Revision(60));
        assert_eq!(s.down(Revision(7)), Revision(0), "a revision from before the restore");
        assert!(s.below(Revision(1049)) && !s.below(Revision(1050)));
        let e = s.error(
            Error::Conflict {
                key: "/k".into(),
                what: "mod_revision",
                expected: Revision(0),
                actual: Revision(60),
            },
            |_, _| Some(Revision(7)),
        );
        assert!(
            matches!(e, Error::Conflict { expected: Revision(7), actual: Revision(1060), .. }),
            "{e:?}"
        );
        let e = s.plain(Error::Compacted { requested: Revision(3), oldest: Revision(2) });
        assert!(
            matches!(e, Error::Compacted { requested: Revision(1003), oldest: Revision(1050) }),
            "{e:?}"
        );
    }
}
