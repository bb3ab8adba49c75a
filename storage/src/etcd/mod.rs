//! The etcd backend, for several hub replicas: keys under a configurable prefix, revisions are
//! etcd's mod revisions, compare-and-swap through transactions, watches with a start revision,
//! and etcd's compaction reported as `Compacted`.

use std::sync::Arc;

use bytes::Bytes;
use etcd_client::{
    Client, CompactionOptions, Compare, CompareOp, ConnectOptions, DeleteOptions, EventType,
    GetOptions, KvClient, PutOptions, Txn, TxnOp, TxnOpResponse, WatchClient, WatchOptions,
};

use crate::engine::EtcdOptions;
use crate::error::{Error, Result};
use crate::key::prefix_end;
use crate::{
    BackendPage, Deleted, EventKind, KeyValue, ListRequest, Preconditions, Revision, Store,
    WatchEvent, WatchStream,
};

/// The largest gRPC message accepted from etcd. tonic's default (4 MiB) is too small for a list of
/// a few thousand objects; kube-apiserver lifts its etcd client's limit the same way.
const MAX_RECEIVE_BYTES: usize = i32::MAX as usize;

struct Etcd {
    kv: KvClient,
    watch: WatchClient,
    /// Prepended to every key; never ends with `/` (keys start with one).
    prefix: String,
}

pub(crate) async fn open(options: EtcdOptions) -> Result<Arc<dyn Store>> {
    let connect = ConnectOptions::new()
        .with_connect_timeout(options.connect_timeout)
        .with_keep_alive(std::time::Duration::from_secs(10), std::time::Duration::from_secs(5));
    let client = tokio::time::timeout(
        options.connect_timeout,
        Client::connect(&options.endpoints, Some(connect)),
    )
    .await
    .map_err(|e| Error::unavailable(format!("connecting to etcd {:?}", options.endpoints), e))?
    .map_err(|e| Error::unavailable(format!("connecting to etcd {:?}", options.endpoints), e))?;
    let etcd = Etcd {
        kv: client.kv_client().max_decoding_message_size(MAX_RECEIVE_BYTES),
        watch: client.watch_client().max_decoding_message_size(MAX_RECEIVE_BYTES),
        prefix: options.prefix.trim_end_matches('/').to_owned(),
    };
    // Fail at start-up, not at the first request, when etcd is not there.
    tokio::time::timeout(options.connect_timeout, etcd.current_revision())
        .await
        .map_err(|e| Error::unavailable("etcd did not answer", e))??;
    Ok(Arc::new(etcd))
}

/// The etcd failures the contract names.
enum Failure {
    Compacted,
    Future,
    TooLarge,
    Other,
}

fn classify(e: &etcd_client::Error) -> Failure {
    let etcd_client::Error::GRpcStatus(status) = e else { return Failure::Other };
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

fn unavailable(context: &str, e: etcd_client::Error) -> Error {
    Error::unavailable(format!("etcd {context} failed"), e)
}

impl Etcd {
    fn kv(&self) -> KvClient {
        self.kv.clone()
    }

    fn watch_client(&self) -> WatchClient {
        self.watch.clone()
    }

    fn full(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    fn to_kv(&self, kv: &etcd_client::KeyValue) -> Result<KeyValue> {
        Ok(KeyValue {
            key: key_in(kv.key(), &self.prefix)?,
            value: Bytes::copy_from_slice(kv.value()),
            create_revision: revision(kv.create_revision()),
            mod_revision: revision(kv.mod_revision()),
        })
    }

    /// The oldest revision etcd still serves: a watch from revision 1 is answered with it.
    async fn compaction_revision(&self) -> Result<Revision> {
        let options = WatchOptions::new().with_start_revision(1);
        let mut stream = self
            .watch_client()
            .watch(self.full("/\u{1}compaction-probe"), Some(options))
            .await
            .map_err(|e| unavailable("watch", e))?;
        for _ in 0..2 {
            let message = tokio::time::timeout(std::time::Duration::from_secs(5), stream.message())
                .await
                .map_err(|e| Error::unavailable("etcd did not answer a watch", e))?;
            match message.map_err(|e| unavailable("watch", e))? {
                Some(r) if r.compact_revision() > 0 => return Ok(revision(r.compact_revision())),
                Some(r) if r.created() => continue,
                _ => break,
            }
        }
        Ok(Revision::ZERO)
    }

    /// `Compacted` if etcd can no longer read at `requested` (revision 0, the empty store, is
    /// probed at etcd's first revision, 1). A revision not written yet is fine: watches wait.
    async fn check_readable(&self, requested: Revision) -> Result<()> {
        let at = i64::try_from(requested.0.max(1)).unwrap_or(i64::MAX);
        let probe = GetOptions::new().with_count_only().with_revision(at);
        match self.kv().get(self.prefix.clone(), Some(probe)).await {
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
        let response = self
            .kv()
            .get(self.prefix.clone(), Some(GetOptions::new().with_count_only()))
            .await
            .map_err(|e| unavailable("read", e))?;
        header_revision(response.header())
    }

    /// A failed write. Values over our limit never reach etcd, so etcd refusing one as too large
    /// means etcd runs with a smaller `--max-request-bytes` than the contract needs.
    fn write_failed(key: &str, value: &Bytes, e: etcd_client::Error) -> Error {
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

fn header_revision(header: Option<&etcd_client::ResponseHeader>) -> Result<Revision> {
    header
        .map(|h| revision(h.revision()))
        .ok_or_else(|| Error::corrupt("etcd", "response without a header"))
}

fn first_get(responses: Vec<TxnOpResponse>) -> Option<etcd_client::KeyValue> {
    responses.into_iter().find_map(|r| match r {
        TxnOpResponse::Get(mut get) => get.take_kvs().into_iter().next(),
        _ => None,
    })
}

#[async_trait::async_trait]
impl Store for Etcd {
    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue> {
        let full = self.full(key);
        let txn = Txn::new()
            .when([Compare::create_revision(full.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(full, value.to_vec(), None)]);
        let response = self.kv().txn(txn).await.map_err(|e| Etcd::write_failed(key, &value, e))?;
        if !response.succeeded() {
            return Err(Error::AlreadyExists { key: key.to_owned() });
        }
        let rev = header_revision(response.header())?;
        Ok(KeyValue { key: key.to_owned(), value, create_revision: rev, mod_revision: rev })
    }

    async fn get(&self, key: &str) -> Result<KeyValue> {
        let mut response =
            self.kv().get(self.full(key), None).await.map_err(|e| unavailable("read", e))?;
        match response.take_kvs().first() {
            Some(kv) => self.to_kv(kv),
            None => Err(Error::NotFound { key: key.to_owned() }),
        }
    }

    async fn list(&self, req: ListRequest<'_>) -> Result<BackendPage> {
        let start = match req.start_after {
            Some(after) => format!("{after}\0"),
            None => req.prefix.to_owned(),
        };
        let mut options = GetOptions::new().with_range(self.full(&prefix_end(req.prefix)));
        if req.limit > 0 {
            options = options.with_limit(i64::try_from(req.limit).unwrap_or(i64::MAX));
        }
        match req.revision {
            // etcd reads "revision 0" as "current"; the contract means the empty store before
            // the first write, still readable unless compacted.
            Some(Revision(0)) => {
                self.check_readable(Revision::ZERO).await?;
                return Ok(BackendPage {
                    items: Vec::new(),
                    revision: Revision::ZERO,
                    more: false,
                });
            }
            Some(Revision(r)) => match i64::try_from(r) {
                Ok(r) => options = options.with_revision(r),
                Err(_) => return Err(self.future(Revision(r)).await),
            },
            None => {}
        }
        let response = match self.kv().get(self.full(&start), Some(options)).await {
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
        let items = response.kvs().iter().map(|kv| self.to_kv(kv)).collect::<Result<Vec<_>>>()?;
        let revision = match req.revision {
            Some(r) => r,
            None => header_revision(response.header())?,
        };
        Ok(BackendPage { items, revision, more: response.more() })
    }

    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> Result<KeyValue> {
        let full = self.full(key);
        let expected_i64 = i64::try_from(expected.0).unwrap_or(i64::MAX);
        let txn = Txn::new()
            .when([
                // etcd compares an absent key's mod revision as 0: require the key to exist.
                Compare::create_revision(full.clone(), CompareOp::Greater, 0),
                Compare::mod_revision(full.clone(), CompareOp::Equal, expected_i64),
            ])
            .and_then([TxnOp::put(
                full.clone(),
                value.to_vec(),
                Some(PutOptions::new().with_prev_key()),
            )])
            .or_else([TxnOp::get(full, None)]);
        let response = self.kv().txn(txn).await.map_err(|e| Etcd::write_failed(key, &value, e))?;
        let rev = header_revision(response.header())?;
        let succeeded = response.succeeded();
        let responses = response.op_responses();
        if !succeeded {
            return Err(match first_get(responses) {
                None => Error::NotFound { key: key.to_owned() },
                Some(kv) => Error::Conflict {
                    key: key.to_owned(),
                    what: "mod_revision",
                    expected,
                    actual: revision(kv.mod_revision()),
                },
            });
        }
        let prev = responses.into_iter().find_map(|r| match r {
            TxnOpResponse::Put(mut put) => put.take_prev_key(),
            _ => None,
        });
        let create_revision = prev.map_or(rev, |p| revision(p.create_revision()));
        Ok(KeyValue { key: key.to_owned(), value, create_revision, mod_revision: rev })
    }

    async fn delete(&self, key: &str, pre: Preconditions) -> Result<Deleted> {
        let full = self.full(key);
        let mut compares = vec![Compare::create_revision(full.clone(), CompareOp::Greater, 0)];
        if let Some(Revision(r)) = pre.mod_revision {
            let r = i64::try_from(r).unwrap_or(i64::MAX);
            compares.push(Compare::mod_revision(full.clone(), CompareOp::Equal, r));
        }
        if let Some(Revision(r)) = pre.create_revision {
            let r = i64::try_from(r).unwrap_or(i64::MAX);
            compares.push(Compare::create_revision(full.clone(), CompareOp::Equal, r));
        }
        let txn = Txn::new()
            .when(compares)
            .and_then([TxnOp::delete(full.clone(), Some(DeleteOptions::new().with_prev_key()))])
            .or_else([TxnOp::get(full, None)]);
        let response = self.kv().txn(txn).await.map_err(|e| unavailable("delete", e))?;
        let rev = header_revision(response.header())?;
        let succeeded = response.succeeded();
        let responses = response.op_responses();
        if !succeeded {
            return match first_get(responses) {
                None => Err(Error::NotFound { key: key.to_owned() }),
                Some(kv) => {
                    pre.check(&self.to_kv(&kv)?)?;
                    Err(Error::Unavailable {
                        message: format!("etcd refused the delete of {key:?} for no stated reason"),
                        source: None,
                    })
                }
            };
        }
        let prev = responses
            .into_iter()
            .find_map(|r| match r {
                TxnOpResponse::Delete(mut d) => d.take_prev_kvs().into_iter().next(),
                _ => None,
            })
            .ok_or_else(|| Error::corrupt(key, "etcd deleted the key but returned no value"))?;
        Ok(Deleted { revision: rev, prev: self.to_kv(&prev)? })
    }

    async fn watch(&self, prefix: &str, from: Revision) -> Result<WatchStream> {
        // etcd reports a compacted start revision only inside the stream; check first so that
        // every backend answers `Compacted` from the call itself.
        self.check_readable(from).await?;
        let start = i64::try_from(from.0 + 1).unwrap_or(i64::MAX);
        let options = WatchOptions::new()
            .with_range(self.full(&prefix_end(prefix)))
            .with_prev_key()
            .with_start_revision(start);
        let mut stream = self
            .watch_client()
            .watch(self.full(prefix), Some(options))
            .await
            .map_err(|e| unavailable("watch", e))?;
        let etcd_prefix = self.prefix.clone();
        let out = async_stream::try_stream! {
            loop {
                let message = stream.message().await.map_err(|e| unavailable("watch", e))?;
                let Some(response) = message else {
                    Err(Error::Unavailable { message: "etcd ended the watch".into(), source: None })?;
                    return;
                };
                if response.compact_revision() > 0 {
                    Err(Error::Compacted {
                        requested: from,
                        oldest: revision(response.compact_revision()),
                    })?;
                }
                if response.canceled() {
                    Err(Error::Unavailable {
                        message: format!("etcd cancelled the watch: {}", response.cancel_reason()),
                        source: None,
                    })?;
                }
                for event in response.events() {
                    yield Arc::new(convert_event(event, &etcd_prefix)?);
                }
            }
        };
        Ok(Box::pin(out))
    }

    async fn current_revision(&self) -> Result<Revision> {
        Etcd::current_revision(self).await
    }

    async fn compact(&self, rev: Revision) -> Result<()> {
        let r = i64::try_from(rev.0).unwrap_or(i64::MAX);
        if r == 0 {
            return Ok(());
        }
        match self.kv().compact(r, Some(CompactionOptions::new().with_physical())).await {
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

fn convert_event(event: &etcd_client::Event, prefix: &str) -> Result<WatchEvent> {
    let kv = event.kv().ok_or_else(|| Error::corrupt("etcd", "watch event without a key"))?;
    let key = key_in(kv.key(), prefix)?;
    let prev = event.prev_kv().map(|p| KeyValue {
        key: key.clone(),
        value: Bytes::copy_from_slice(p.value()),
        create_revision: revision(p.create_revision()),
        mod_revision: revision(p.mod_revision()),
    });
    let (kind, value, create_revision) = match event.event_type() {
        EventType::Put => {
            (EventKind::Put, Bytes::copy_from_slice(kv.value()), revision(kv.create_revision()))
        }
        EventType::Delete => (
            EventKind::Delete,
            Bytes::new(),
            prev.as_ref().map_or(Revision::ZERO, |p| p.create_revision),
        ),
    };
    Ok(WatchEvent {
        kind,
        revision: revision(kv.mod_revision()),
        key,
        value,
        create_revision,
        prev,
    })
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
