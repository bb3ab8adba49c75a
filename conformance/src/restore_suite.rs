//! The storage suite's restore behaviours (`Storage::restore`), run per backend by
//! `storage_suite!`: each gets a fresh store and an empty target of the same backend.

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt as _;
use ocm_storage::{Engine, Error, ListOptions, Preconditions, Revision, Storage, Write};

use crate::backends::TestStore;

const WAIT: Duration = Duration::from_secs(10);

/// The source's keys and values, as a paged list at `at` reads them.
async fn snapshot(s: &Storage, at: Revision) -> Vec<(String, Bytes)> {
    let mut out = Vec::new();
    let mut options = ListOptions {
        limit: 2,
        revision: Some(at),
        skip_remaining: true,
        ..ListOptions::default()
    };
    loop {
        let page = s.list("/", &options).await.unwrap();
        assert_eq!(page.revision, at, "every page at the snapshot's revision");
        assert_eq!(page.remaining, 0, "nothing counted when told not to");
        out.extend(page.items.into_iter().map(|kv| (kv.key, kv.value)));
        match page.continue_token {
            Some(token) => options.continue_token = Some(token),
            None => return out,
        }
    }
}

/// A restore makes a new store from a snapshot taken with paged lists at one revision (counting
/// nothing after each page, as a backup reads): the same keys and values (a large one too, a
/// commit's keys), every key at a revision above the one named and at or below the restored
/// store's revision `R`, which is also its compaction revision (reads and watches from below
/// it, the original's revisions included, are `Compacted`; at `R` they work). The restored store
/// takes writes with its own revisions (compare-and-swap on what it returned, a stale token of
/// the original refused), keeps all this when reopened, and refuses a second restore. Keys out
/// of order are refused.
pub async fn restore_makes_a_new_store_past_the_snapshot(t: &TestStore) {
    let s = &t.storage;
    s.create("/r/a", "a1").await.unwrap();
    let b = s.create("/r/b", "b1").await.unwrap();
    let gone = s.create("/r/gone", "x").await.unwrap();
    s.update("/r/b", "b2", b.mod_revision).await.unwrap();
    s.delete(
        "/r/gone",
        &Preconditions { mod_revision: Some(gone.mod_revision), ..Preconditions::default() },
    )
    .await
    .unwrap();
    let large = Bytes::from(crate::data::letters(300 * 1024, 7));
    let writes = vec![
        Write::Create { key: "/r/c/1".into(), value: Bytes::from_static(b"c1") },
        Write::Create { key: "/r/c/2".into(), value: large.clone() },
        Write::Create { key: "/s/x".into(), value: Bytes::from_static(b"x") },
    ];
    s.commit(writes).await.unwrap();
    let at = s.current_revision().await.unwrap();
    let stale = s.get("/r/b").await.unwrap().mod_revision;
    s.create("/r/after", "not in the snapshot").await.unwrap();
    let items = snapshot(s, at).await;
    let keys: Vec<&str> = items.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["/r/a", "/r/b", "/r/c/1", "/r/c/2", "/s/x"]);

    let after = Revision(at.0 + 1000);
    let mut restore = Storage::restore(t.restore_target.clone(), after).await.unwrap();
    let (first, second) = items.split_at(2);
    restore.put(first.to_vec()).await.unwrap();
    restore.put(second.to_vec()).await.unwrap();
    let (restored, r) = restore.finish().await.unwrap();
    assert!(r > after, "the restored revision {r} is past {after}");
    check_restored(&restored, &items, after, r, at).await;

    // Writes go on with the restored store's revisions; its tokens work, the original's not.
    let a = restored.get("/r/a").await.unwrap();
    let mut watch = restored.watch("/r/", r).await.unwrap();
    let updated = restored.update("/r/a", "a2", a.mod_revision).await.unwrap();
    assert!(updated.mod_revision > r);
    let event = tokio::time::timeout(WAIT, watch.next())
        .await
        .expect("an event in time")
        .expect("the watch open")
        .unwrap();
    assert_eq!((event.key.as_str(), event.revision), ("/r/a", updated.mod_revision));
    assert_eq!(
        event.prev.as_ref().map(|p| (p.value.clone(), p.mod_revision)),
        Some((a.value, a.mod_revision))
    );
    drop(watch);
    let err = restored.update("/r/b", "b3", stale).await.unwrap_err();
    assert!(matches!(err, Error::Conflict { expected, .. } if expected == stale), "{err}");

    if matches!(t.restore_target, Engine::Memory(_)) {
        // Nothing outlives a memory store: there is no reopening, and every new one is empty.
    } else {
        drop(restored);
        let reopened = open_again(&t.restore_target).await;
        let mut items = items.clone();
        items[0].1 = Bytes::from_static(b"a2");
        check_restored(&reopened, &items, after, updated.mod_revision, at).await;
        assert_eq!(reopened.get("/r/a").await.unwrap(), updated);
        drop(reopened);
        let err = Storage::restore(t.restore_target.clone(), after).await.unwrap_err();
        assert!(matches!(err, Error::NotEmpty { .. }), "{err}");
    }

    let mut unordered =
        Storage::restore(Engine::Memory(Default::default()), Revision(10)).await.unwrap();
    let pair = |k: &str| (k.to_owned(), Bytes::from_static(b"v"));
    unordered.put(vec![pair("/k/b")]).await.unwrap();
    let err = unordered.put(vec![pair("/k/a")]).await.unwrap_err();
    assert!(matches!(err, Error::Restore { .. }), "{err}");
}

/// `restored` holds `items` at revisions in `(after, r]` (`r` at least its newest write),
/// reads from below `r` are `Compacted` (the original's revision `original` too) and from `r`
/// on they work.
async fn check_restored(
    restored: &Storage,
    items: &[(String, Bytes)],
    after: Revision,
    newest: Revision,
    original: Revision,
) {
    let listed = restored.list("/", &ListOptions::default()).await.unwrap();
    assert!(listed.revision >= newest, "listed at {} before {newest}", listed.revision);
    let got: Vec<(String, Bytes)> =
        listed.items.iter().map(|kv| (kv.key.clone(), kv.value.clone())).collect();
    assert!(got == items, "the restored keys and values");
    let mut r = Revision(0);
    for kv in &listed.items {
        assert!(kv.create_revision > after && kv.create_revision <= kv.mod_revision, "{kv:?}");
        assert!(kv.mod_revision <= newest, "{kv:?}");
        r = r.max(kv.create_revision);
    }
    // Every key was restored at or below the compaction revision: reading there works, and
    // just below it, as at the original's revisions, is compacted.
    let floor = match restored
        .list("/", &ListOptions { revision: Some(after), ..ListOptions::default() })
        .await
    {
        Err(Error::Compacted { oldest, .. }) => oldest,
        other => panic!("a read at {after} gave {other:?}"),
    };
    assert!(floor > after && floor >= r, "compacted at {floor}");
    let at_floor = ListOptions { revision: Some(floor), ..ListOptions::default() };
    let keys = restored.list("/", &at_floor).await.unwrap().items.len();
    assert_eq!(keys, items.len());
    let below = ListOptions { revision: Some(Revision(floor.0 - 1)), ..ListOptions::default() };
    assert!(matches!(restored.list("/", &below).await, Err(Error::Compacted { .. })));
    for from in [original, Revision(floor.0 - 1)] {
        let err = restored.watch("/", from).await.err();
        assert!(matches!(err, Some(Error::Compacted { oldest, .. }) if oldest == floor), "{err:?}");
    }
    assert!(restored.watch("/", floor).await.is_ok());
}

async fn open_again(engine: &Engine) -> Storage {
    Storage::open(engine.clone()).await.unwrap()
}
