//! The storage conformance suite against the sled backend, and what only sled adds to it: a
//! commit of several keys survives a restart whole.

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use ocm_storage::{Engine, EventKind, Revision, SledOptions, Storage, Write};

ocm_conformance::storage_suite!(ocm_conformance::backends::sled);

async fn open(dir: &std::path::Path) -> Storage {
    Storage::open(Engine::Sled(SledOptions::new(dir))).await.unwrap()
}

/// A commit is durable once acknowledged: after a reopen every key holds its value at the
/// commit's revision, the revision counter goes on after it, and a watch from before replays
/// the commit as one, in key order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_survives_a_restart_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (before, committed) = {
        let s = open(dir.path()).await;
        let a = s.create("/c/a", "a1").await.unwrap();
        let b = s.create("/c/b", "b1").await.unwrap();
        let before = s.current_revision().await.unwrap();
        let writes = vec![
            Write::Update {
                key: "/c/a".into(),
                value: Bytes::from_static(b"a2"),
                expected: a.mod_revision,
            },
            Write::Delete { key: "/c/b".into(), expected: b.mod_revision },
            Write::Create { key: "/c/c".into(), value: Bytes::from_static(b"c1") },
        ];
        (before, s.commit(writes).await.unwrap())
    };
    let s = open(dir.path()).await;
    assert_eq!(s.current_revision().await.unwrap(), committed.revision);
    let a = s.get("/c/a").await.unwrap();
    assert_eq!((&a.value[..], a.mod_revision), (&b"a2"[..], committed.revision));
    assert_eq!(s.try_get("/c/b").await.unwrap(), None);
    let c = s.get("/c/c").await.unwrap();
    assert_eq!((c.create_revision, c.mod_revision), (committed.revision, committed.revision));
    let next = s.create("/c/d", "d").await.unwrap();
    assert_eq!(next.mod_revision, Revision(committed.revision.0 + 1));
    let mut watch = s.watch_commits("/c/", before).await.unwrap();
    let replayed = tokio::time::timeout(Duration::from_secs(10), watch.next())
        .await
        .expect("the commit in time")
        .expect("stream open")
        .expect("no error");
    let seen: Vec<(EventKind, &str)> =
        replayed.events.iter().map(|e| (e.kind, e.key.as_str())).collect();
    assert_eq!(
        (replayed.revision, seen),
        (
            committed.revision,
            vec![(EventKind::Put, "/c/a"), (EventKind::Delete, "/c/b"), (EventKind::Put, "/c/c")]
        )
    );
}

/// A restore that never finished (its process died between batches) leaves a store that is
/// refused at open, naming what to do, rather than served with part of its keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unfinished_restore_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::Sled(SledOptions::new(dir.path()));
    let mut restore = Storage::restore(engine.clone(), Revision(100)).await.unwrap();
    restore.put(vec![("/k/a".into(), Bytes::from_static(b"a"))]).await.unwrap();
    drop(restore);
    let err = Storage::open(engine).await.unwrap_err();
    assert!(matches!(err, ocm_storage::Error::Restore { .. }), "{err}");
    assert!(err.to_string().contains("did not finish"), "{err}");
}

/// Large values (stored by content) restored at one revision read back, survive a reopen, are
/// named as the `prev` of the next write, and leave nothing unreadable once their keys are
/// deleted and the history compacted past them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restored_large_values_live_and_go_like_written_ones() {
    let dir = tempfile::tempdir().unwrap();
    let large = |seed: u64| Bytes::from(ocm_conformance::data::letters(200 * 1024, seed));
    let engine = Engine::Sled(SledOptions::new(dir.path()));
    let mut restore = Storage::restore(engine.clone(), Revision(5)).await.unwrap();
    let items: Vec<(String, Bytes)> = (0..4).map(|i| (format!("/w/{i}"), large(i))).collect();
    restore.put(items.clone()).await.unwrap();
    let (restored, at) = restore.finish().await.unwrap();
    drop(restored);
    let s = open(dir.path()).await;
    assert_eq!(s.current_revision().await.unwrap(), at);
    for (key, value) in &items {
        assert!(s.get(key).await.unwrap().value == *value, "{key}");
    }
    let mut watch = s.watch("/w/", at).await.unwrap();
    s.update("/w/0", large(10), at).await.unwrap();
    let event = tokio::time::timeout(Duration::from_secs(10), watch.next())
        .await
        .expect("the update in time")
        .expect("stream open")
        .expect("no error");
    assert!(event.prev.as_ref().is_some_and(|p| p.value == items[0].1), "the restored prev");
    drop(watch);
    for i in 0..4 {
        let key = format!("/w/{i}");
        s.delete(&key, &Default::default()).await.unwrap();
    }
    let now = s.current_revision().await.unwrap();
    s.compact(now).await.unwrap();
    drop(s);
    let s = open(dir.path()).await;
    assert!(s.list("/w/", &Default::default()).await.unwrap().items.is_empty());
    assert_eq!(s.current_revision().await.unwrap(), now);
}
