//! Watch stress test (reliability.md §7 R3), on every backend: several writers, many watchers on
//! overlapping prefixes that disconnect at random and resume from the last revision they saw.
//! Every watcher must see exactly the events of its prefix from the global commit log, in
//! revision order, none missed, none duplicated; resuming below the kept history is `Compacted`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use ocm_conformance::backends::{self, TestStore};
use ocm_storage::{Error, EventKind, Preconditions, Revision, Storage};
use rand::Rng;

const WRITERS: usize = 4;
const OPS_PER_WRITER: usize = 250;
const PREFIXES: [&str; 5] = ["/ws/", "/ws/ns0/", "/ws/ns1/", "/ws/ns2/", "/ws/ns0/sub/"];
/// Written after the writers finish, in this order; a watcher stops at the last one under its prefix.
const MARKERS: [&str; 3] = ["/ws/ns0/sub/zz-end", "/ws/ns1/zz-end", "/ws/ns2/zz-end"];
const WATCHERS: usize = 36;

/// One committed change: what every watcher of a matching prefix must see.
type Logged = (u64, String, EventKind);

async fn writer(store: Storage, id: usize, log: Arc<Mutex<Vec<Logged>>>) {
    let mut seq = 0;
    while seq < OPS_PER_WRITER {
        let (key, roll) = {
            let mut rng = rand::rng();
            let ns = rng.random_range(0..3);
            let sub = if rng.random_bool(0.3) { "sub/" } else { "" };
            (format!("/ws/ns{ns}/{sub}w{id}-k{}", rng.random_range(0..8)), rng.random_range(0..10))
        };
        let entry = match store.try_get(&key).await.unwrap() {
            None => {
                let kv = store.create(&key, format!("{seq}")).await.unwrap();
                (kv.mod_revision.0, key, EventKind::Put)
            }
            Some(kv) if roll < 3 => {
                let pre =
                    Preconditions { mod_revision: Some(kv.mod_revision), create_revision: None };
                let deleted = store.delete(&key, &pre).await.unwrap();
                (deleted.revision.0, key, EventKind::Delete)
            }
            Some(kv) => {
                let kv = store.update(&key, format!("{seq}"), kv.mod_revision).await.unwrap();
                (kv.mod_revision.0, key, EventKind::Put)
            }
        };
        log.lock().unwrap().push(entry);
        seq += 1;
    }
}

/// Watches `prefix` from `from` until it receives `stop`, dropping and resuming the watch at
/// random. Returns what it saw and how often it resumed.
async fn watcher(
    store: Storage,
    prefix: &'static str,
    from: u64,
    stop: &'static str,
) -> (Vec<Logged>, usize) {
    let mut seen: Vec<Logged> = Vec::new();
    let mut last = from;
    let mut resumes = 0;
    loop {
        let mut stream = store.watch(prefix, Revision(last)).await.unwrap();
        let budget = rand::rng().random_range(3..40);
        let mut taken = 0;
        while taken < budget {
            match stream.next().await {
                Some(Ok(event)) => {
                    last = event.revision.0;
                    let finished = event.key == stop;
                    seen.push((event.revision.0, event.key.clone(), event.kind));
                    if finished {
                        return (seen, resumes);
                    }
                    taken += 1;
                }
                Some(Err(Error::Lagged { resume_from })) => {
                    last = resume_from.0;
                    break;
                }
                Some(Err(e)) => panic!("watch on {prefix} failed: {e}"),
                None => panic!("watch on {prefix} ended"),
            }
        }
        // Disconnect and resume from the last revision seen.
        resumes += 1;
    }
}

fn stop_marker(prefix: &str) -> &'static str {
    MARKERS.iter().rev().find(|m| m.starts_with(prefix)).expect("every prefix has a marker")
}

async fn stress(store: TestStore) {
    let s = store.storage;
    let base = s.current_revision().await.unwrap().0;
    let log = Arc::new(Mutex::new(Vec::new()));
    let watchers: Vec<_> = (0..WATCHERS)
        .map(|i| {
            let prefix = PREFIXES[i % PREFIXES.len()];
            tokio::spawn(watcher(s.clone(), prefix, base, stop_marker(prefix)))
        })
        .collect();
    let writers: Vec<_> =
        (0..WRITERS).map(|id| tokio::spawn(writer(s.clone(), id, log.clone()))).collect();
    for w in writers {
        w.await.unwrap();
    }
    for marker in MARKERS {
        let kv = s.create(marker, "end").await.unwrap();
        log.lock().unwrap().push((kv.mod_revision.0, marker.to_owned(), EventKind::Put));
    }
    let end = s.current_revision().await.unwrap().0;

    let mut log = log.lock().unwrap().clone();
    log.sort_by_key(|(r, ..)| *r);
    assert_eq!(log.len(), WRITERS * OPS_PER_WRITER + MARKERS.len());
    let revisions: Vec<u64> = log.iter().map(|(r, ..)| *r).collect();
    let expected_revisions: Vec<u64> = (base + 1..=end).collect();
    assert_eq!(revisions, expected_revisions, "one revision per write, no gaps");

    let mut total_resumes = 0;
    for (i, w) in watchers.into_iter().enumerate() {
        let prefix = PREFIXES[i % PREFIXES.len()];
        let (seen, resumes) = tokio::time::timeout(Duration::from_secs(120), w)
            .await
            .expect("watcher finished")
            .unwrap();
        total_resumes += resumes;
        let expected: Vec<Logged> =
            log.iter().filter(|(_, key, _)| key.starts_with(prefix)).cloned().collect();
        if seen != expected {
            let dup = seen.windows(2).find(|w| w[0].0 >= w[1].0);
            let missing = expected.iter().find(|e| !seen.contains(e));
            panic!(
                "watcher {i} on {prefix}: saw {} events, expected {}; first out-of-order/duplicate {dup:?}; first missing {missing:?}",
                seen.len(),
                expected.len()
            );
        }
    }
    assert!(total_resumes >= WATCHERS, "watchers should have resumed many times ({total_resumes})");
    eprintln!(
        "{} writes, {WATCHERS} watchers, {total_resumes} resumes, 0 gaps or duplicates",
        log.len()
    );

    // Resuming below the kept history is refused.
    s.compact(Revision(end - 10)).await.unwrap();
    let err = s.watch("/ws/", Revision(base)).await.err().expect("compacted");
    assert!(matches!(err, Error::Compacted { .. }), "{err}");
    let mut tail = s.watch("/ws/", Revision(end - 10)).await.unwrap();
    for r in end - 9..=end {
        let e = tokio::time::timeout(Duration::from_secs(10), tail.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(e.revision.0, r);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_watchers_see_exactly_their_events() {
    stress(backends::memory().await.unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sled_watchers_see_exactly_their_events() {
    stress(backends::sled().await.unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_watchers_see_exactly_their_events() {
    let Some(store) = backends::etcd().await else { return };
    stress(store).await;
}
