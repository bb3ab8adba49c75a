//! Behaviours only the embedded backends have: persistence across restarts (sled), the history
//! window they enforce themselves, and ending a watcher that falls behind (memory and sled).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use ocm_conformance::backends;
use ocm_storage::{
    Engine, Error, EventKind, HistoryWindow, ListOptions, LocalOptions, Revision, SledOptions,
    Storage, WatchEvent, WatchStream,
};

async fn open_sled(dir: &std::path::Path) -> Storage {
    Storage::open(Engine::Sled(SledOptions::new(dir))).await.unwrap()
}

async fn next(stream: &mut WatchStream) -> Result<Arc<WatchEvent>, Error> {
    tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("an event in time")
        .expect("stream open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sled_keeps_data_and_revisions_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = {
        let s = open_sled(dir.path()).await;
        let a = s.create("/p/a", "1").await.unwrap();
        let b = s.create("/p/b", "2").await.unwrap();
        s.delete("/p/b", &Default::default()).await.unwrap();
        (a, b)
    };
    let s = open_sled(dir.path()).await;
    assert_eq!(s.get("/p/a").await.unwrap(), a);
    assert_eq!(s.try_get("/p/b").await.unwrap(), None);
    assert_eq!(s.current_revision().await.unwrap(), Revision(3));
    // The counter continues; no revision is handed out twice.
    let c = s.create("/p/c", "3").await.unwrap();
    assert_eq!(c.mod_revision, Revision(4));
    // The past is still readable after the restart.
    let at_b = ListOptions { revision: Some(b.mod_revision), ..Default::default() };
    assert_eq!(s.list("/p/", &at_b).await.unwrap().items.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sled_watch_resumes_across_restart() {
    let dir = tempfile::tempdir().unwrap();
    let resume_at = {
        let s = open_sled(dir.path()).await;
        let kv = s.create("/w/k", "before").await.unwrap();
        let at = s.current_revision().await.unwrap();
        s.update("/w/k", "during", kv.mod_revision).await.unwrap();
        at
    };
    let s = open_sled(dir.path()).await;
    let kv = s.get("/w/k").await.unwrap();
    s.update("/w/k", "after", kv.mod_revision).await.unwrap();
    let mut watch = s.watch("/w/", resume_at).await.unwrap();
    let during = next(&mut watch).await.unwrap();
    assert_eq!(
        (during.value.as_ref(), during.prev.as_ref().unwrap().value.as_ref()),
        (&b"during"[..], &b"before"[..])
    );
    let after = next(&mut watch).await.unwrap();
    assert_eq!(after.value, "after");
    assert_eq!(after.revision.0, during.revision.0 + 1);
}

fn window(max_events: u64, max_age: Duration) -> LocalOptions {
    LocalOptions {
        history: HistoryWindow { max_events, max_age, check_every: Duration::from_millis(20) },
        ..LocalOptions::default()
    }
}

/// Waits until a watch from revision 0 is refused, and returns the compaction revision named.
async fn wait_compacted(s: &Storage, at_least: u64) -> u64 {
    for _ in 0..500 {
        match s.watch("/", Revision(0)).await {
            Err(Error::Compacted { oldest, .. }) if oldest.0 >= at_least => return oldest.0,
            Err(Error::Compacted { .. }) | Ok(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await
            }
            Err(e) => panic!("{e}"),
        }
    }
    panic!("history was not compacted to {at_least}");
}

async fn window_by_count(s: Storage) {
    for i in 0..50 {
        s.create(&format!("/c/{i}"), "v").await.unwrap();
    }
    let oldest = wait_compacted(&s, 40).await;
    assert!(oldest <= 50, "compacted past the head: {oldest}");
    let err =
        s.list("/c/", &ListOptions { revision: Some(Revision(5)), ..Default::default() }).await;
    assert!(matches!(err, Err(Error::Compacted { .. })), "{err:?}");
    assert_eq!(s.list("/c/", &ListOptions::default()).await.unwrap().items.len(), 50);
    // What is inside the window still replays.
    let mut watch = s.watch("/c/", Revision(45)).await.unwrap();
    assert_eq!(next(&mut watch).await.unwrap().revision, Revision(46));
}

async fn window_by_age(s: Storage) {
    for i in 0..5 {
        s.create(&format!("/a/{i}"), "v").await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    s.create("/a/fresh", "v").await.unwrap();
    assert_eq!(wait_compacted(&s, 5).await, 5, "only the old revisions leave the history");
    let mut watch = s.watch("/a/", Revision(5)).await.unwrap();
    assert_eq!(next(&mut watch).await.unwrap().key, "/a/fresh");
}

/// A fresh memory store and a fresh sled store with the same options: the embedded behaviours
/// below hold for both.
async fn both(options: LocalOptions) -> [backends::TestStore; 2] {
    [backends::memory_with(options).await.unwrap(), backends::sled_with(options).await.unwrap()]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_window_by_count() {
    for store in both(window(10, Duration::from_secs(3600))).await {
        window_by_count(store.storage.clone()).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_window_by_age() {
    for store in both(window(1000, Duration::from_millis(200))).await {
        window_by_age(store.storage.clone()).await;
    }
}

/// A watcher that stops reading is ended with `Lagged` once the live buffer overflows (writers
/// never wait for it), and resuming from the revision it names continues without a gap.
async fn lagging_watcher(s: Storage) {
    let start = s.current_revision().await.unwrap();
    let mut slow = s.watch("/l/", start).await.unwrap();
    for i in 0..200 {
        s.create(&format!("/l/{i:03}"), "v").await.unwrap();
    }
    let mut seen = Vec::new();
    let resume_from = loop {
        match next(&mut slow).await {
            Ok(e) => seen.push(e.revision.0),
            Err(Error::Lagged { resume_from }) => break resume_from,
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(resume_from.0, seen.last().copied().unwrap_or(start.0));
    let mut resumed = s.watch("/l/", resume_from).await.unwrap();
    while seen.len() < 200 {
        let e = next(&mut resumed).await.unwrap();
        assert_eq!(e.kind, EventKind::Put);
        seen.push(e.revision.0);
    }
    let expected: Vec<u64> = (start.0 + 1..=start.0 + 200).collect();
    assert_eq!(seen, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lagging_watcher_is_ended_and_resumes() {
    let tiny_buffer = LocalOptions { watch_buffer: 16, ..LocalOptions::default() };
    for store in both(tiny_buffer).await {
        lagging_watcher(store.storage.clone()).await;
    }
}

/// Values large enough for sled to keep in blob files read back intact after a restart, and the
/// history that carries them (value and previous value) replays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sled_large_values_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let big = bytes::Bytes::from(vec![b'a'; ocm_storage::MAX_VALUE_BYTES]);
    let medium = bytes::Bytes::from(vec![b'b'; 200 * 1024]);
    let start = {
        let s = open_sled(dir.path()).await;
        let start = s.current_revision().await.unwrap();
        let kv = s.create("/big/k", big.clone()).await.unwrap();
        s.update("/big/k", medium.clone(), kv.mod_revision).await.unwrap();
        s.create("/big/other", big.clone()).await.unwrap();
        start
    };
    let s = open_sled(dir.path()).await;
    assert_eq!(s.get("/big/k").await.unwrap().value, medium);
    assert_eq!(s.get("/big/other").await.unwrap().value, big);
    let mut watch = s.watch("/big/", start).await.unwrap();
    assert_eq!(next(&mut watch).await.unwrap().value, big);
    let update = next(&mut watch).await.unwrap();
    assert_eq!((&update.value, &update.prev.as_ref().unwrap().value), (&medium, &big));
}
