//! Model-based property test (reliability.md §7, R12 parity): random operation sequences give
//! identical observable results on memory (the reference) and on sled (with restarts in the
//! middle), and on memory and etcd. Revisions are compared relative to each store's starting
//! revision, since etcd starts at 1 and may carry other tests' history.

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use ocm_conformance::etcd::{self, EtcdServer};
use ocm_storage::{
    Engine, Error, EtcdOptions, KeyValue, ListOptions, LocalOptions, Preconditions, Revision,
    SledOptions, Storage, Update, UpdateOutcome, WatchEvent,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

const KEYS: [&str; 8] =
    ["/m/a/0", "/m/a/1", "/m/a/2", "/m/a/10", "/m/b/0", "/m/b/1", "/m/ab/0", "/m/a"];
const PREFIXES: [&str; 4] = ["/m/", "/m/a/", "/m/b/", "/m/ab/"];

#[derive(Debug, Clone)]
enum Op {
    Create(usize, u8),
    /// Update with the key's current mod revision, or with a revision relative to the start.
    Update(usize, u8, Option<u64>),
    Delete(usize, Option<u64>),
    Get(usize),
    List {
        prefix: usize,
        limit: usize,
        at: Option<u64>,
    },
    GuaranteedAppend(usize, u8),
    GuaranteedDelete(usize),
    Compact(u64),
    Watch {
        prefix: usize,
        from: u64,
    },
    /// Close and reopen the store (sled: from disk; memory and etcd: nothing to do).
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0..KEYS.len();
    let rev = 0u64..40;
    prop_oneof![
        4 => (key.clone(), any::<u8>()).prop_map(|(k, v)| Op::Create(k, v)),
        4 => (key.clone(), any::<u8>(), proptest::option::weighted(0.3, rev.clone()))
            .prop_map(|(k, v, r)| Op::Update(k, v, r)),
        2 => (key.clone(), proptest::option::weighted(0.3, rev.clone())).prop_map(|(k, r)| Op::Delete(k, r)),
        2 => key.clone().prop_map(Op::Get),
        3 => (0..PREFIXES.len(), 0usize..4, proptest::option::weighted(0.4, rev.clone()))
            .prop_map(|(prefix, limit, at)| Op::List { prefix, limit, at }),
        2 => (key.clone(), any::<u8>()).prop_map(|(k, v)| Op::GuaranteedAppend(k, v)),
        1 => key.prop_map(Op::GuaranteedDelete),
        1 => rev.clone().prop_map(Op::Compact),
        2 => (0..PREFIXES.len(), rev).prop_map(|(prefix, from)| Op::Watch { prefix, from }),
        1 => Just(Op::Reopen),
    ]
}

/// One store under test, with what it needs to reopen.
enum Subject {
    Memory(Storage),
    Sled { dir: tempfile::TempDir, store: Option<Storage> },
    Etcd(Storage),
}

impl Subject {
    fn store(&self) -> &Storage {
        match self {
            Subject::Memory(s) | Subject::Etcd(s) => s,
            Subject::Sled { store, .. } => store.as_ref().expect("open"),
        }
    }

    async fn reopen(&mut self) {
        if let Subject::Sled { dir, store } = self {
            drop(store.take());
            let options = SledOptions::new(dir.path());
            *store = Some(Storage::open(Engine::Sled(options)).await.expect("reopen sled"));
        }
    }
}

fn kv(kv: &KeyValue, base: u64) -> String {
    format!(
        "{}={:?}@{}/{}",
        kv.key,
        kv.value,
        kv.create_revision.0 - base,
        kv.mod_revision.0 - base
    )
}

fn event(e: &WatchEvent, base: u64) -> String {
    format!(
        "{:?} {} {:?} @{} c{} prev={:?}",
        e.kind,
        e.key,
        e.value,
        e.revision.0 - base,
        e.create_revision.0.saturating_sub(base),
        e.prev.as_ref().map(|p| kv(p, base))
    )
}

fn error(e: &Error, base: u64) -> String {
    match e {
        Error::NotFound { key } => format!("NotFound({key})"),
        Error::AlreadyExists { key } => format!("AlreadyExists({key})"),
        Error::Conflict { key, what, expected, actual } => {
            format!("Conflict({key},{what},{},{})", expected.0.wrapping_sub(base), actual.0 - base)
        }
        Error::Compacted { requested, oldest } => {
            format!("Compacted({},{})", requested.0 - base, oldest.0.saturating_sub(base))
        }
        Error::FutureRevision { requested, current } => {
            format!("Future({},{})", requested.0 - base, current.0 - base)
        }
        other => panic!("unexpected error: {other}"),
    }
}

fn value(v: u8) -> Bytes {
    Bytes::from(format!("v{v}"))
}

/// Runs one operation and renders its result with revisions relative to `base`.
async fn apply(s: &Storage, op: &Op, base: u64) -> String {
    let abs = |r: u64| Revision(base + r);
    match op {
        Op::Create(k, v) => match s.create(KEYS[*k], value(*v)).await {
            Ok(x) => kv(&x, base),
            Err(e) => error(&e, base),
        },
        Op::Update(k, v, at) => {
            let expected = match at {
                Some(r) => abs(*r),
                None => match s.try_get(KEYS[*k]).await.unwrap() {
                    Some(x) => x.mod_revision,
                    None => abs(0),
                },
            };
            match s.update(KEYS[*k], value(*v), expected).await {
                Ok(x) => kv(&x, base),
                Err(e) => error(&e, base),
            }
        }
        Op::Delete(k, at) => {
            let pre = Preconditions { mod_revision: at.map(abs), create_revision: None };
            match s.delete(KEYS[*k], &pre).await {
                Ok(d) => format!("deleted@{} {}", d.revision.0 - base, kv(&d.prev, base)),
                Err(e) => error(&e, base),
            }
        }
        Op::Get(k) => match s.get(KEYS[*k]).await {
            Ok(x) => kv(&x, base),
            Err(e) => error(&e, base),
        },
        Op::List { prefix, limit, at } => {
            let mut options =
                ListOptions { limit: *limit, revision: at.map(abs), ..Default::default() };
            let mut out = Vec::new();
            loop {
                match s.list(PREFIXES[*prefix], &options).await {
                    Ok(page) => {
                        out.push(format!("page@{}", page.revision.0 - base));
                        out.extend(page.items.iter().map(|x| kv(x, base)));
                        match page.continue_token {
                            Some(token) => options.continue_token = Some(token),
                            None => break,
                        }
                    }
                    Err(e) => {
                        out.push(error(&e, base));
                        break;
                    }
                }
            }
            out.join(" | ")
        }
        Op::GuaranteedAppend(k, v) => {
            let result = s
                .guaranteed_update::<Error, _>(KEYS[*k], &Preconditions::default(), |cur| {
                    let mut next = cur.map(|c| c.value.to_vec()).unwrap_or_default();
                    next.truncate(16);
                    next.extend_from_slice(&value(*v));
                    Ok(Update::Put(Bytes::from(next)))
                })
                .await;
            outcome(result, base)
        }
        Op::GuaranteedDelete(k) => {
            let result = s
                .guaranteed_update::<Error, _>(KEYS[*k], &Preconditions::default(), |_| {
                    Ok(Update::Delete)
                })
                .await;
            outcome(result, base)
        }
        Op::Compact(r) => match s.compact(abs(*r)).await {
            Ok(()) => "compacted".into(),
            Err(e) => error(&e, base),
        },
        Op::Watch { prefix, from } => {
            let current = s.current_revision().await.unwrap();
            // etcd keeps the event at the compaction revision itself; the contract does not
            // promise it, so a watch is only compared where a read at `from` still works.
            let probe = ListOptions { revision: Some(abs(*from)), limit: 1, ..Default::default() };
            if let Err(e) = s.list("/", &probe).await {
                return format!("watch refused: {}", error(&e, base));
            }
            let mut watch = s.watch(PREFIXES[*prefix], abs(*from)).await.unwrap();
            // Mark the end with a write outside every prefix, then read up to it.
            let marker = s.create(&format!("/z/{}", current.0), "end").await.unwrap().mod_revision;
            let mut events = Vec::new();
            let mut all = s.watch("/z/", Revision(marker.0 - 1)).await.unwrap();
            let _ =
                tokio::time::timeout(Duration::from_secs(10), all.next()).await.expect("marker");
            while let Ok(Some(Ok(e))) =
                tokio::time::timeout(Duration::from_millis(200), watch.next()).await
            {
                events.push(event(&e, base));
            }
            events.join(" | ")
        }
        Op::Reopen => "reopened".into(),
    }
}

fn outcome(result: Result<UpdateOutcome, Error>, base: u64) -> String {
    match result {
        Ok(UpdateOutcome::Put(x)) => format!("put {}", kv(&x, base)),
        Ok(UpdateOutcome::Deleted(d)) => format!("deleted@{}", d.revision.0 - base),
        Ok(UpdateOutcome::Unchanged(x)) => format!("unchanged {:?}", x.map(|x| kv(&x, base))),
        Err(e) => error(&e, base),
    }
}

/// Runs the same operations on both subjects and fails at the first difference.
async fn compare(ops: &[Op], a: &mut Subject, b: &mut Subject) -> Result<(), TestCaseError> {
    let base_a = a.store().current_revision().await.unwrap().0;
    let base_b = b.store().current_revision().await.unwrap().0;
    for (i, op) in ops.iter().enumerate() {
        if matches!(op, Op::Reopen) {
            a.reopen().await;
            b.reopen().await;
        }
        let ra = apply(a.store(), op, base_a).await;
        let rb = apply(b.store(), op, base_b).await;
        prop_assert_eq!(&ra, &rb, "operation {} {:?} differs", i, op);
    }
    Ok(())
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() })
}

#[test]
fn memory_and_sled_agree_across_restarts() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let result = runner(48).run(&proptest::collection::vec(op(), 1..60), |ops| {
        rt.block_on(async {
            let mut memory = Subject::Memory(
                Storage::open(Engine::Memory(LocalOptions::default())).await.unwrap(),
            );
            let dir = tempfile::tempdir().unwrap();
            let store = Storage::open(Engine::Sled(SledOptions::new(dir.path()))).await.unwrap();
            let mut sled = Subject::Sled { dir, store: Some(store) };
            compare(&ops, &mut memory, &mut sled).await
        })
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn memory_and_etcd_agree() {
    if etcd::skip("the whole test") {
        return;
    }
    let server = EtcdServer::start().unwrap_or_else(|e| panic!("{e:#}"));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let case = std::sync::atomic::AtomicU32::new(0);
    let result = runner(32).run(&proptest::collection::vec(op(), 1..40), |ops| {
        let case = case.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        rt.block_on(async {
            let mut memory = Subject::Memory(
                Storage::open(Engine::Memory(LocalOptions::default())).await.unwrap(),
            );
            let options = EtcdOptions::new(vec![server.endpoint.clone()], format!("/case{case}"));
            let mut etcd = Subject::Etcd(Storage::open(Engine::Etcd(options)).await.unwrap());
            compare(&ops, &mut memory, &mut etcd).await
        })
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
