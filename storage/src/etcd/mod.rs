//! The etcd backend, for several hub replicas: keys under a configurable prefix, revisions are
//! etcd's mod revisions, compare-and-swap through transactions (a commit of several keys is one
//! transaction, one compare per key), watches with a start revision (etcd sends a revision's
//! events in one response), and etcd's compaction reported as `Compacted`. The client it speaks
//! through is `client.rs`.

mod client;
mod format;

use std::sync::Arc;

use bytes::Bytes;

use crate::engine::EtcdOptions;
use crate::error::{Error, Result};
use crate::key::prefix_end;
use crate::{
    BackendPage, Commit, CommitStream, Committed, Deleted, EventKind, KeyValue, ListRequest,
    Preconditions, Revision, Store, WatchEvent, Write, Written,
};
use client::Call;
use client::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use client::etcdserverpb::request_op::Request;
use client::etcdserverpb::response_op::Response;
use client::etcdserverpb::{
    CompactionRequest, Compare, DeleteRangeRequest, PutRequest, RangeRequest, RequestOp,
    ResponseHeader, ResponseOp, TxnRequest, WatchCreateRequest,
};
use client::mvccpb::{self, event::EventType};
use client::{Client, Watching};

struct Etcd {
    client: Client,
    /// Prepended to every key; never ends with `/` (keys start with one).
    prefix: String,
}

pub(crate) async fn open(options: EtcdOptions) -> Result<Arc<dyn Store>> {
    let client = client::connect(&options.endpoints, options.connect_timeout).map_err(|e| {
        Error::unavailable(format!("connecting to etcd {:?}", options.endpoints), e)
    })?;
    let etcd = Etcd { client, prefix: options.prefix.trim_end_matches('/').to_owned() };
    // Fail at start-up, not at the first request, when etcd is not there.
    tokio::time::timeout(options.connect_timeout, etcd.current_revision())
        .await
        .map_err(|e| Error::unavailable("etcd did not answer", e))??;
    format::check(&etcd).await?;
    Ok(Arc::new(etcd))
}

/// The etcd failures the contract names.
enum Failure {
    Compacted,
    Future,
    TooLarge,
    Other,
}

fn classify(status: &tonic::Status) -> Failure {
    let message = status.message();
    if message.contains("required revision has been compacted") {
        Failure::Compacted
    } else if message.contains("required revision is a future revision") {
        Failure::Future
    } else if message.contains("request is too large") {
        Failure::TooLarge
    } else {
        Failure::Other
    }
}

fn unavailable(context: &str, status: tonic::Status) -> Error {
    Error::unavailable(format!("etcd {context} failed"), status)
}

impl Etcd {
    fn full(&self, key: &str) -> Vec<u8> {
        format!("{}{key}", self.prefix).into_bytes()
    }

    fn to_kv(&self, kv: mvccpb::KeyValue) -> Result<KeyValue> {
        Ok(KeyValue {
            key: key_in(&kv.key, &self.prefix)?,
            value: Bytes::from(kv.value),
            create_revision: revision(kv.create_revision),
            mod_revision: revision(kv.mod_revision),
        })
    }

    /// A read of the current revision only (nothing is under the bare prefix), at revision `at`
    /// (`0`: the current one).
    fn probe(&self, at: i64) -> RangeRequest {
        RangeRequest {
            key: self.prefix.clone().into_bytes(),
            count_only: true,
            revision: at,
            ..RangeRequest::default()
        }
    }

    /// One transaction of `writes` (a compare and an operation per key), and with a fence a
    /// compare of the fence key's mod revision beside them (read back on failure, last).
    async fn commit_txn(
        &self,
        writes: Vec<Write>,
        fence: Option<(&str, Revision)>,
    ) -> Result<Committed> {
        let full: Vec<Vec<u8>> = writes.iter().map(|w| self.full(w.key())).collect();
        let mut txn = TxnRequest {
            compare: writes.iter().zip(&full).map(|(w, k)| commit_compare(k, w)).collect(),
            success: writes.iter().zip(&full).map(|(w, k)| commit_op(k.clone(), w)).collect(),
            failure: full.iter().map(|k| get(k.clone())).collect(),
        };
        if let Some((key, token)) = fence {
            let full = self.full(key);
            txn.compare.push(mod_revision_is(&full, i64::try_from(token.0).unwrap_or(i64::MAX)));
            txn.failure.push(get(full));
        }
        let bytes: usize = writes.iter().map(|w| w.value().len()).sum();
        let response = self.client.txn(&txn).await.map_err(|e| match classify(&e) {
            Failure::TooLarge => Error::unavailable(
                format!(
                    "etcd refused a commit of {bytes} bytes as too large: start etcd with \
                     --max-request-bytes of at least 2097152"
                ),
                e,
            ),
            _ => unavailable("commit", e),
        })?;
        let rev = header_revision(response.header)?;
        if !response.succeeded {
            let mut found: Vec<Option<mvccpb::KeyValue>> = response
                .responses
                .into_iter()
                .map(|r| match r.response {
                    Some(Response::ResponseRange(get)) => get.kvs.into_iter().next(),
                    _ => None,
                })
                .collect();
            if let Some((key, token)) = fence {
                let held = found.pop().flatten().map(|kv| revision(kv.mod_revision));
                if held != Some(token) {
                    return Err(Error::Fenced { key: key.to_owned() });
                }
            }
            return Err(commit_refusal(&writes, found));
        }
        let mut written = Vec::with_capacity(writes.len());
        for (write, r) in writes.into_iter().zip(response.responses) {
            written.push(match (write, r.response) {
                (Write::Create { key, value }, _) => {
                    Written::Put(KeyValue { key, value, create_revision: rev, mod_revision: rev })
                }
                (Write::Update { key, value, .. }, Some(Response::ResponsePut(put))) => {
                    let create_revision = put.prev_kv.map_or(rev, |p| revision(p.create_revision));
                    Written::Put(KeyValue { key, value, create_revision, mod_revision: rev })
                }
                (Write::Delete { key, .. }, Some(Response::ResponseDeleteRange(d))) => {
                    let prev = d.prev_kvs.into_iter().next().ok_or_else(|| {
                        Error::corrupt(&key, "etcd deleted the key but returned no value")
                    })?;
                    Written::Deleted(Deleted { revision: rev, prev: self.to_kv(prev)? })
                }
                (write, _) => {
                    return Err(Error::corrupt(write.key(), "etcd answered a commit out of order"));
                }
            });
        }
        Ok(Committed { revision: rev, written })
    }

    /// The oldest revision etcd still serves: a watch from revision 1 is answered with it.
    async fn compaction_revision(&self) -> Result<Revision> {
        let create = WatchCreateRequest {
            key: self.full("/\u{1}compaction-probe"),
            start_revision: 1,
            ..WatchCreateRequest::default()
        };
        let mut stream = self.client.watch(create).await.map_err(|e| unavailable("watch", e))?;
        for _ in 0..2 {
            let message = tokio::time::timeout(std::time::Duration::from_secs(5), stream.message())
                .await
                .map_err(|e| Error::unavailable("etcd did not answer a watch", e))?;
            match message.map_err(|e| unavailable("watch", e))? {
                Some(r) if r.compact_revision > 0 => return Ok(revision(r.compact_revision)),
                Some(r) if r.created => continue,
                _ => break,
            }
        }
        Ok(Revision::ZERO)
    }

    /// `Compacted` if etcd can no longer read at `requested` (revision 0, the empty store, is
    /// probed at etcd's first revision, 1). A revision not written yet is fine: watches wait.
    async fn check_readable(&self, requested: Revision) -> Result<()> {
        let at = i64::try_from(requested.0.max(1)).unwrap_or(i64::MAX);
        match self.client.range(&self.probe(at)).await {
            Ok(_) => Ok(()),
            Err(e) => match classify(&e) {
                Failure::Compacted => Err(self.compacted(requested).await),
                Failure::Future => Ok(()),
                _ => Err(unavailable("read", e)),
            },
        }
    }

    async fn compacted(&self, requested: Revision) -> Error {
        match self.compaction_revision().await {
            Ok(oldest) => Error::Compacted { requested, oldest },
            Err(e) => e,
        }
    }

    async fn future(&self, requested: Revision) -> Error {
        match self.current_revision().await {
            Ok(current) => Error::FutureRevision { requested, current },
            Err(e) => e,
        }
    }

    async fn current_revision(&self) -> Result<Revision> {
        let response =
            self.client.range(&self.probe(0)).await.map_err(|e| unavailable("read", e))?;
        header_revision(response.header)
    }

    /// A failed write. Values over our limit never reach etcd, so etcd refusing one as too large
    /// means etcd runs with a smaller `--max-request-bytes` than the contract needs.
    fn write_failed(key: &str, value: &Bytes, e: tonic::Status) -> Error {
        match classify(&e) {
            Failure::TooLarge => Error::unavailable(
                format!(
                    "etcd refused {} bytes for {key:?} as too large: start etcd with \
                     --max-request-bytes of at least 2097152",
                    value.len()
                ),
                e,
            ),
            _ => unavailable("write", e),
        }
    }
}

fn revision(r: i64) -> Revision {
    Revision(u64::try_from(r).unwrap_or(0))
}

fn header_revision(header: Option<ResponseHeader>) -> Result<Revision> {
    header
        .map(|h| revision(h.revision))
        .ok_or_else(|| Error::corrupt("etcd", "response without a header"))
}

/// A comparison of `key`'s create revision (`0` for an absent key) with `value`.
fn create_revision_is(key: &[u8], result: CompareResult, value: i64) -> Compare {
    Compare {
        result: result.into(),
        target: CompareTarget::Create.into(),
        key: key.to_vec(),
        target_union: Some(TargetUnion::CreateRevision(value)),
        ..Compare::default()
    }
}

/// A comparison of `key`'s mod revision (`0` for an absent key) with `value`.
fn mod_revision_is(key: &[u8], value: i64) -> Compare {
    Compare {
        result: CompareResult::Equal.into(),
        target: CompareTarget::Mod.into(),
        key: key.to_vec(),
        target_union: Some(TargetUnion::ModRevision(value)),
        ..Compare::default()
    }
}

/// A put of `value` under `key`, returning the previous key-value if `prev_kv`.
fn put(key: Vec<u8>, value: Bytes, prev_kv: bool) -> RequestOp {
    let put = PutRequest { key, value, prev_kv, ..PutRequest::default() };
    RequestOp { request: Some(Request::RequestPut(put)) }
}

/// A read of `key`.
fn get(key: Vec<u8>) -> RequestOp {
    let get = RangeRequest { key, ..RangeRequest::default() };
    RequestOp { request: Some(Request::RequestRange(get)) }
}

/// A delete of `key`, returning the deleted key-value.
fn delete(key: Vec<u8>) -> RequestOp {
    let delete = DeleteRangeRequest { key, prev_kv: true, ..DeleteRangeRequest::default() };
    RequestOp { request: Some(Request::RequestDeleteRange(delete)) }
}

/// The compare of one write of a commit (one per key: etcd's `--max-txn-ops` bounds the
/// compares too): an absent key for a create, the expected mod revision otherwise. etcd compares
/// an absent key's mod revision as 0, and no stored key has mod revision 0, so an expected 0
/// becomes a compare that never holds.
fn commit_compare(full: &[u8], write: &Write) -> Compare {
    match write {
        Write::Create { .. } => create_revision_is(full, CompareResult::Equal, 0),
        Write::Update { expected: Revision(0), .. }
        | Write::Delete { expected: Revision(0), .. } => {
            create_revision_is(full, CompareResult::Less, 0)
        }
        Write::Update { expected, .. } | Write::Delete { expected, .. } => {
            mod_revision_is(full, i64::try_from(expected.0).unwrap_or(i64::MAX))
        }
    }
}

/// The operation of one write of a commit.
fn commit_op(full: Vec<u8>, write: &Write) -> RequestOp {
    match write {
        Write::Create { value, .. } => put(full, value.clone(), false),
        Write::Update { value, .. } => put(full, value.clone(), true),
        Write::Delete { .. } => delete(full),
    }
}

/// Why a commit's transaction failed: the first write whose key, as read in the failure branch
/// (`found`), breaks its compare.
fn commit_refusal(writes: &[Write], found: Vec<Option<mvccpb::KeyValue>>) -> Error {
    for (write, kv) in writes.iter().zip(found) {
        let key = write.key().to_owned();
        match (write, kv) {
            (Write::Create { .. }, Some(_)) => return Error::AlreadyExists { key },
            (Write::Create { .. }, None) => {}
            (Write::Update { .. } | Write::Delete { .. }, None) => return Error::NotFound { key },
            (Write::Update { expected, .. } | Write::Delete { expected, .. }, Some(kv)) => {
                let actual = revision(kv.mod_revision);
                if actual != *expected {
                    return Error::Conflict {
                        key,
                        what: "mod_revision",
                        expected: *expected,
                        actual,
                    };
                }
            }
        }
    }
    Error::Unavailable {
        message: "etcd refused a commit for no stated reason".into(),
        source: None,
    }
}

fn first_get(responses: Vec<ResponseOp>) -> Option<mvccpb::KeyValue> {
    responses.into_iter().find_map(|r| match r.response {
        Some(Response::ResponseRange(get)) => get.kvs.into_iter().next(),
        _ => None,
    })
}

#[async_trait::async_trait]
impl Store for Etcd {
    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue> {
        let full = self.full(key);
        let txn = TxnRequest {
            compare: vec![create_revision_is(&full, CompareResult::Equal, 0)],
            success: vec![put(full, value.clone(), false)],
            failure: vec![],
        };
        let response =
            self.client.txn(&txn).await.map_err(|e| Etcd::write_failed(key, &value, e))?;
        if !response.succeeded {
            return Err(Error::AlreadyExists { key: key.to_owned() });
        }
        let rev = header_revision(response.header)?;
        Ok(KeyValue { key: key.to_owned(), value, create_revision: rev, mod_revision: rev })
    }

    async fn get(&self, key: &str) -> Result<KeyValue> {
        let request = RangeRequest { key: self.full(key), ..RangeRequest::default() };
        let response = self.client.range(&request).await.map_err(|e| unavailable("read", e))?;
        match response.kvs.into_iter().next() {
            Some(kv) => self.to_kv(kv),
            None => Err(Error::NotFound { key: key.to_owned() }),
        }
    }

    async fn list(&self, req: ListRequest<'_>) -> Result<BackendPage> {
        let start = match req.start_after {
            Some(after) => format!("{after}\0"),
            None => req.prefix.to_owned(),
        };
        let mut request = RangeRequest {
            key: self.full(&start),
            range_end: self.full(&prefix_end(req.prefix)),
            limit: i64::try_from(req.limit).unwrap_or(i64::MAX),
            ..RangeRequest::default()
        };
        match req.revision {
            // etcd reads "revision 0" as "current"; the contract means the empty store before
            // the first write, still readable unless compacted.
            Some(Revision(0)) => {
                self.check_readable(Revision::ZERO).await?;
                return Ok(BackendPage {
                    items: Vec::new(),
                    revision: Revision::ZERO,
                    more: false,
                    remaining: 0,
                });
            }
            Some(Revision(r)) => match i64::try_from(r) {
                Ok(r) => request.revision = r,
                Err(_) => return Err(self.future(Revision(r)).await),
            },
            None => {}
        }
        let response = match self.client.range(&request).await {
            Ok(response) => response,
            Err(e) => {
                let requested = req.revision.unwrap_or_default();
                return Err(match classify(&e) {
                    Failure::Compacted => self.compacted(requested).await,
                    Failure::Future => self.future(requested).await,
                    _ => unavailable("list", e),
                });
            }
        };
        let revision = match req.revision {
            Some(r) => r,
            None => header_revision(response.header)?,
        };
        let items =
            response.kvs.into_iter().map(|kv| self.to_kv(kv)).collect::<Result<Vec<_>>>()?;
        // etcd counts every key of the range from `start`, whatever the limit.
        let counted = u64::try_from(response.count).unwrap_or(0);
        let remaining = counted.saturating_sub(items.len() as u64);
        Ok(BackendPage { items, revision, more: response.more, remaining })
    }

    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> Result<KeyValue> {
        let full = self.full(key);
        let expected_i64 = i64::try_from(expected.0).unwrap_or(i64::MAX);
        let txn = TxnRequest {
            compare: vec![
                // etcd compares an absent key's mod revision as 0: require the key to exist.
                create_revision_is(&full, CompareResult::Greater, 0),
                mod_revision_is(&full, expected_i64),
            ],
            success: vec![put(full.clone(), value.clone(), true)],
            failure: vec![get(full)],
        };
        let response =
            self.client.txn(&txn).await.map_err(|e| Etcd::write_failed(key, &value, e))?;
        let rev = header_revision(response.header)?;
        if !response.succeeded {
            return Err(match first_get(response.responses) {
                None => Error::NotFound { key: key.to_owned() },
                Some(kv) => Error::Conflict {
                    key: key.to_owned(),
                    what: "mod_revision",
                    expected,
                    actual: revision(kv.mod_revision),
                },
            });
        }
        let prev = response.responses.into_iter().find_map(|r| match r.response {
            Some(Response::ResponsePut(put)) => put.prev_kv,
            _ => None,
        });
        let create_revision = prev.map_or(rev, |p| revision(p.create_revision));
        Ok(KeyValue { key: key.to_owned(), value, create_revision, mod_revision: rev })
    }

    async fn delete(&self, key: &str, pre: Preconditions) -> Result<Deleted> {
        let full = self.full(key);
        let mut compare = vec![create_revision_is(&full, CompareResult::Greater, 0)];
        if let Some(Revision(r)) = pre.mod_revision {
            compare.push(mod_revision_is(&full, i64::try_from(r).unwrap_or(i64::MAX)));
        }
        if let Some(Revision(r)) = pre.create_revision {
            let r = i64::try_from(r).unwrap_or(i64::MAX);
            compare.push(create_revision_is(&full, CompareResult::Equal, r));
        }
        let txn =
            TxnRequest { compare, success: vec![delete(full.clone())], failure: vec![get(full)] };
        let response = self.client.txn(&txn).await.map_err(|e| unavailable("delete", e))?;
        let rev = header_revision(response.header)?;
        if !response.succeeded {
            return match first_get(response.responses) {
                None => Err(Error::NotFound { key: key.to_owned() }),
                Some(kv) => {
                    pre.check(&self.to_kv(kv)?)?;
                    Err(Error::Unavailable {
                        message: format!("etcd refused the delete of {key:?} for no stated reason"),
                        source: None,
                    })
                }
            };
        }
        let prev = response
            .responses
            .into_iter()
            .find_map(|r| match r.response {
                Some(Response::ResponseDeleteRange(d)) => d.prev_kvs.into_iter().next(),
                _ => None,
            })
            .ok_or_else(|| Error::corrupt(key, "etcd deleted the key but returned no value"))?;
        Ok(Deleted { revision: rev, prev: self.to_kv(prev)? })
    }

    async fn commit(&self, writes: Vec<Write>) -> Result<Committed> {
        self.commit_txn(writes, None).await
    }

    async fn commit_fenced(
        &self,
        writes: Vec<Write>,
        fence: &str,
        token: Revision,
    ) -> Result<Committed> {
        self.commit_txn(writes, Some((fence, token))).await
    }

    async fn watch(&self, prefix: &str, from: Revision) -> Result<CommitStream> {
        // etcd reports a compacted start revision only inside the stream; check first so that
        // every backend answers `Compacted` from the call itself.
        self.check_readable(from).await?;
        // Neither progress notifications nor fragments are asked for, so every response holds
        // whole events; one without events (the watcher's creation) adds nothing.
        let create = WatchCreateRequest {
            key: self.full(prefix),
            range_end: self.full(&prefix_end(prefix)),
            start_revision: i64::try_from(from.0 + 1).unwrap_or(i64::MAX),
            prev_kv: true,
            ..WatchCreateRequest::default()
        };
        let stream = self.client.watch(create).await.map_err(|e| unavailable("watch", e))?;
        Ok(Box::pin(events(stream, self.prefix.clone(), from)))
    }

    async fn current_revision(&self) -> Result<Revision> {
        Etcd::current_revision(self).await
    }

    async fn compact(&self, rev: Revision) -> Result<()> {
        let r = i64::try_from(rev.0).unwrap_or(i64::MAX);
        if r == 0 {
            return Ok(());
        }
        match self
            .client
            .kv(Call::Write, |mut kv| async move {
                kv.compact(CompactionRequest { revision: r, physical: true }).await
            })
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => match classify(&e) {
                // Already compacted at or past `rev`: nothing to do.
                Failure::Compacted => Ok(()),
                Failure::Future => Err(self.future(rev).await),
                _ => Err(unavailable("compact", e)),
            },
        }
    }
}

/// The events of a watch created from `from`, one [`Commit`] per revision, until etcd ends or
/// cancels it. etcd never splits a revision's events across responses (fragments are not asked
/// for), so each response is cut into whole commits.
fn events(
    mut stream: Watching,
    prefix: String,
    from: Revision,
) -> impl futures::Stream<Item = Result<Commit>> + Send + 'static {
    async_stream::try_stream! {
        loop {
            let message = stream.message().await.map_err(|e| unavailable("watch", e))?;
            let Some(response) = message else {
                Err(Error::Unavailable { message: "etcd ended the watch".into(), source: None })?;
                return;
            };
            if response.compact_revision > 0 {
                Err(Error::Compacted { requested: from, oldest: revision(response.compact_revision) })?;
            }
            if response.canceled {
                Err(Error::Unavailable {
                    message: format!("etcd cancelled the watch: {}", response.cancel_reason),
                    source: None,
                })?;
            }
            let mut commit: Option<Commit> = None;
            for event in response.events {
                let event = Arc::new(convert_event(event, &prefix)?);
                match &mut commit {
                    Some(c) if c.revision == event.revision => c.events.push(event),
                    _ => {
                        let next = Commit { revision: event.revision, events: vec![event] };
                        if let Some(done) = commit.replace(next) {
                            yield done;
                        }
                    }
                }
            }
            if let Some(done) = commit {
                yield done;
            }
        }
    }
}

fn convert_event(event: mvccpb::Event, prefix: &str) -> Result<WatchEvent> {
    let kind = EventType::try_from(event.r#type)
        .map_err(|_| Error::corrupt("etcd", format!("watch event of type {}", event.r#type)))?;
    let kv = event.kv.ok_or_else(|| Error::corrupt("etcd", "watch event without a key"))?;
    let key = key_in(&kv.key, prefix)?;
    let prev = event.prev_kv.map(|p| KeyValue {
        key: key.clone(),
        value: Bytes::from(p.value),
        create_revision: revision(p.create_revision),
        mod_revision: revision(p.mod_revision),
    });
    let (kind, value, create_revision) = match kind {
        EventType::Put => (EventKind::Put, Bytes::from(kv.value), revision(kv.create_revision)),
        EventType::Delete => (
            EventKind::Delete,
            Bytes::new(),
            prev.as_ref().map_or(Revision::ZERO, |p| p.create_revision),
        ),
    };
    Ok(WatchEvent { kind, revision: revision(kv.mod_revision), key, value, create_revision, prev })
}

/// Our key for an etcd key: the etcd key without the configured prefix.
fn key_in(raw: &[u8], prefix: &str) -> Result<String> {
    let Some(ours) = raw.strip_prefix(prefix.as_bytes()) else {
        return Err(Error::corrupt(String::from_utf8_lossy(raw), "key outside the prefix"));
    };
    std::str::from_utf8(ours)
        .map(str::to_owned)
        .map_err(|_| Error::corrupt(String::from_utf8_lossy(raw), "key is not UTF-8"))
}
