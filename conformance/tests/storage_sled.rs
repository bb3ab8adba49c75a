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
