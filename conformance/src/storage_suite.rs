//! The storage conformance suite: one function per behaviour of the `ocm-storage` contract, run
//! unchanged against every backend (see `storage_suite!`).
//!
//! Each function gets a fresh, empty store. Revisions are compared relative to the store's own
//! starting revision (etcd starts at 1, the embedded backends at 0).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use ocm_storage::{
    Commit, CommitStream, Committed, Error, EventKind, KeyValue, ListOptions, MAX_COMMIT_BYTES,
    MAX_COMMIT_KEYS, MAX_VALUE_BYTES, Preconditions, Revision, Storage, Update, UpdateOutcome,
    WatchEvent, WatchStream, Write, Written,
};

/// Generates one `#[tokio::test]` per behaviour of the suite for the backend that `$open`
/// (an `async fn() -> Option<TestStore>`) opens, and the restore behaviours of
/// [`crate::restore_suite`].
#[macro_export]
macro_rules! storage_suite {
    ($open:path) => {
        $crate::storage_suite!(@tests $open;
            create_then_get,
            create_existing_is_already_exists,
            get_missing_is_not_found,
            one_revision_per_write,
            update_is_compare_and_swap,
            delete_checks_preconditions,
            guaranteed_update_unchanged_writes_nothing,
            guaranteed_update_creates_and_deletes,
            guaranteed_update_retries_on_conflict,
            guaranteed_update_closure_error_aborts,
            guaranteed_update_checks_preconditions,
            list_prefix_does_not_leak_into_siblings,
            list_pages_share_one_snapshot,
            list_pages_count_the_keys_that_follow,
            list_start_after_a_kept_key,
            list_at_past_revision,
            list_future_revision_is_refused,
            list_at_revision_zero_is_the_empty_store,
            list_below_compaction_is_compacted,
            invalid_continue_tokens_are_refused,
            invalid_keys_are_refused,
            value_size_limit_is_exact,
            watch_replays_history_then_follows_live,
            watch_filters_by_prefix,
            watch_events_carry_previous_values,
            watch_below_compaction_is_compacted,
            watch_from_future_revision_waits,
            watch_from_the_last_revision_never_panics,
            compact_is_idempotent_and_refuses_the_future,
            commit_is_all_or_nothing,
            commit_writes_every_key_at_one_revision,
            commit_reads_at_past_revisions,
            commit_reaches_watchers_together,
            watch_after_a_commit_skips_all_of_it,
            commit_limits_are_typed
        );
    };
    (@tests $open:path; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let Some(store) = $open().await else { return };
                $crate::storage_suite::$name(&store.storage).await;
            }
        )*

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn restore_makes_a_new_store_past_the_snapshot() {
            let Some(store) = $open().await else { return };
            $crate::restore_suite::restore_makes_a_new_store_past_the_snapshot(&store).await;
        }
    };
}

const WAIT: Duration = Duration::from_secs(10);

async fn next_event(stream: &mut WatchStream) -> Arc<WatchEvent> {
    match tokio::time::timeout(WAIT, stream.next()).await {
        Ok(Some(Ok(event))) => event,
        Ok(Some(Err(e))) => panic!("watch failed: {e}"),
        Ok(None) => panic!("watch ended"),
        Err(_) => panic!("no watch event within {WAIT:?}"),
    }
}

async fn assert_quiet(stream: &mut WatchStream) {
    if let Ok(item) = tokio::time::timeout(Duration::from_millis(300), stream.next()).await {
        panic!("expected no event, got {item:?}");
    }
}

fn all() -> ListOptions {
    ListOptions::default()
}

/// `create` returns the new revision as both create and mod revision; `get` reads it back.
pub async fn create_then_get(s: &Storage) {
    let start = s.current_revision().await.unwrap();
    let kv = s.create("/a/one", "v1").await.unwrap();
    assert_eq!(kv.create_revision, Revision(start.0 + 1));
    assert_eq!(kv.mod_revision, kv.create_revision);
    assert_eq!(kv.value, "v1");
    assert_eq!(s.get("/a/one").await.unwrap(), kv);
    assert_eq!(s.current_revision().await.unwrap(), kv.mod_revision);
    let empty = s.create("/a/empty", Bytes::new()).await.unwrap();
    assert_eq!(s.get("/a/empty").await.unwrap(), empty);
    let unicode = s.create("/a/ünïcødé-名前", "x").await.unwrap();
    assert_eq!(s.get("/a/ünïcødé-名前").await.unwrap(), unicode);
}

/// A second `create` of a key fails, writes nothing and leaves the value alone.
pub async fn create_existing_is_already_exists(s: &Storage) {
    let kv = s.create("/a/k", "first").await.unwrap();
    let err = s.create("/a/k", "second").await.unwrap_err();
    assert!(matches!(err, Error::AlreadyExists { ref key } if key == "/a/k"), "{err}");
    assert_eq!(s.get("/a/k").await.unwrap(), kv);
    assert_eq!(s.current_revision().await.unwrap(), kv.mod_revision);
}

/// An absent key is `NotFound` (and `None` from `try_get`).
pub async fn get_missing_is_not_found(s: &Storage) {
    assert!(matches!(s.get("/a/missing").await, Err(Error::NotFound { .. })));
    assert_eq!(s.try_get("/a/missing").await.unwrap(), None);
}

/// Every successful write takes exactly one new revision; failed writes take none.
pub async fn one_revision_per_write(s: &Storage) {
    let r0 = s.current_revision().await.unwrap().0;
    let a = s.create("/r/a", "1").await.unwrap();
    assert_eq!(a.mod_revision.0, r0 + 1);
    let a2 = s.update("/r/a", "2", a.mod_revision).await.unwrap();
    assert_eq!(a2.mod_revision.0, r0 + 2);
    assert!(s.update("/r/a", "3", a.mod_revision).await.is_err());
    assert!(s.create("/r/a", "again").await.is_err());
    let deleted = s.delete("/r/a", &Preconditions::default()).await.unwrap();
    assert_eq!(deleted.revision.0, r0 + 3);
    assert!(s.delete("/r/a", &Preconditions::default()).await.is_err());
    assert_eq!(s.current_revision().await.unwrap().0, r0 + 3);
}

/// `update` succeeds only at the expected mod revision, keeps the create revision, and names
/// both revisions in its conflict.
pub async fn update_is_compare_and_swap(s: &Storage) {
    let v1 = s.create("/u/k", "v1").await.unwrap();
    let v2 = s.update("/u/k", "v2", v1.mod_revision).await.unwrap();
    assert_eq!(v2.create_revision, v1.create_revision);
    assert!(v2.mod_revision > v1.mod_revision);
    match s.update("/u/k", "stale", v1.mod_revision).await.unwrap_err() {
        Error::Conflict { expected, actual, what, .. } => {
            assert_eq!(
                (expected, actual, what),
                (v1.mod_revision, v2.mod_revision, "mod_revision")
            );
        }
        other => panic!("expected a conflict, got {other}"),
    }
    assert_eq!(s.get("/u/k").await.unwrap(), v2);
    assert!(matches!(
        s.update("/u/missing", "x", v1.mod_revision).await,
        Err(Error::NotFound { .. })
    ));
    // etcd compares an absent key's mod revision as 0: that must not create the key.
    assert!(matches!(
        s.update("/u/missing", "x", Revision::ZERO).await,
        Err(Error::NotFound { .. })
    ));
    assert_eq!(s.try_get("/u/missing").await.unwrap(), None);
}

/// `delete` honours mod- and create-revision preconditions and returns what it deleted.
pub async fn delete_checks_preconditions(s: &Storage) {
    let first = s.create("/d/k", "one").await.unwrap();
    s.delete("/d/k", &Preconditions::default()).await.unwrap();
    let second = s.create("/d/k", "two").await.unwrap();
    // The first incarnation's create revision does not match the recreated key.
    let stale = Preconditions { create_revision: Some(first.create_revision), mod_revision: None };
    assert!(matches!(
        s.delete("/d/k", &stale).await,
        Err(Error::Conflict { what: "create_revision", .. })
    ));
    let wrong_mod = Preconditions { mod_revision: Some(first.mod_revision), create_revision: None };
    assert!(matches!(
        s.delete("/d/k", &wrong_mod).await,
        Err(Error::Conflict { what: "mod_revision", .. })
    ));
    assert_eq!(s.get("/d/k").await.unwrap(), second);
    let exact = Preconditions {
        mod_revision: Some(second.mod_revision),
        create_revision: Some(second.create_revision),
    };
    let deleted = s.delete("/d/k", &exact).await.unwrap();
    assert_eq!(deleted.prev, second);
    assert!(deleted.revision > second.mod_revision);
    assert!(matches!(s.get("/d/k").await, Err(Error::NotFound { .. })));
    assert!(matches!(s.delete("/d/k", &exact).await, Err(Error::NotFound { .. })));
}

/// Returning the stored bytes, or `Unchanged`, writes nothing and keeps the revision.
pub async fn guaranteed_update_unchanged_writes_nothing(s: &Storage) {
    let kv = s.create("/g/k", "same").await.unwrap();
    let out = s
        .guaranteed_update::<Error, _>("/g/k", &Preconditions::default(), |cur| {
            Ok(Update::Put(cur.unwrap().value.clone()))
        })
        .await
        .unwrap();
    assert_eq!(out, UpdateOutcome::Unchanged(Some(kv.clone())));
    let out = s
        .guaranteed_update::<Error, _>("/g/k", &Preconditions::default(), |_| Ok(Update::Unchanged))
        .await
        .unwrap();
    assert_eq!(out, UpdateOutcome::Unchanged(Some(kv.clone())));
    assert_eq!(s.current_revision().await.unwrap(), kv.mod_revision);
    assert_eq!(s.get("/g/k").await.unwrap(), kv);
}

/// A guaranteed update creates an absent key and can delete one.
pub async fn guaranteed_update_creates_and_deletes(s: &Storage) {
    let none = Preconditions::default();
    let created = s
        .guaranteed_update::<Error, _>("/g/new", &none, |cur| {
            assert!(cur.is_none());
            Ok(Update::Put(Bytes::from_static(b"made")))
        })
        .await
        .unwrap();
    let UpdateOutcome::Put(kv) = created else { panic!("expected a put, got {created:?}") };
    assert_eq!(kv.create_revision, kv.mod_revision);
    let deleted =
        s.guaranteed_update::<Error, _>("/g/new", &none, |_| Ok(Update::Delete)).await.unwrap();
    let UpdateOutcome::Deleted(d) = deleted else { panic!("expected a delete, got {deleted:?}") };
    assert_eq!(d.prev, kv);
    assert_eq!(s.try_get("/g/new").await.unwrap(), None);
    assert!(matches!(
        s.guaranteed_update::<Error, _>("/g/new", &none, |_| Ok(Update::Delete)).await,
        Err(Error::NotFound { .. })
    ));
}

/// Concurrent read-modify-write loops never lose an increment.
pub async fn guaranteed_update_retries_on_conflict(s: &Storage) {
    s.create("/g/counter", "0").await.unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let s = s.clone();
            tokio::spawn(async move {
                for _ in 0..25 {
                    s.guaranteed_update::<Error, _>(
                        "/g/counter",
                        &Preconditions::default(),
                        |cur| {
                            let n: u64 =
                                std::str::from_utf8(&cur.unwrap().value).unwrap().parse().unwrap();
                            Ok(Update::Put(Bytes::from((n + 1).to_string())))
                        },
                    )
                    .await
                    .unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(s.get("/g/counter").await.unwrap().value, "200");
}

/// The closure's own error ends the loop and is returned; nothing is written.
pub async fn guaranteed_update_closure_error_aborts(s: &Storage) {
    #[derive(Debug)]
    enum MyError {
        Refused,
        Storage(Error),
    }
    impl From<Error> for MyError {
        fn from(e: Error) -> Self {
            MyError::Storage(e)
        }
    }
    let kv = s.create("/g/k", "v").await.unwrap();
    let out = s
        .guaranteed_update::<MyError, _>("/g/k", &Preconditions::default(), |_| {
            Err(MyError::Refused)
        })
        .await;
    assert!(matches!(out, Err(MyError::Refused)), "{out:?}");
    assert_eq!(s.get("/g/k").await.unwrap(), kv);
    let out = s
        .guaranteed_update::<MyError, _>("/g/bad//key", &Preconditions::default(), |_| {
            Ok(Update::Unchanged)
        })
        .await;
    assert!(matches!(out, Err(MyError::Storage(Error::InvalidKey { .. }))), "{out:?}");
}

/// Preconditions are checked against the stored value before the closure runs.
pub async fn guaranteed_update_checks_preconditions(s: &Storage) {
    let kv = s.create("/g/k", "v").await.unwrap();
    let wrong = Preconditions {
        mod_revision: Some(Revision(kv.mod_revision.0 + 100)),
        ..Default::default()
    };
    let out = s.guaranteed_update::<Error, _>("/g/k", &wrong, |_| panic!("must not run")).await;
    assert!(matches!(out, Err(Error::Conflict { .. })), "{out:?}");
    let absent =
        s.guaranteed_update::<Error, _>("/g/none", &wrong, |_| panic!("must not run")).await;
    assert!(matches!(absent, Err(Error::NotFound { .. })), "{absent:?}");
}

/// Listing `/ns1/` never returns keys of `/ns10/` or of `/ns1` itself, and sorts by key.
pub async fn list_prefix_does_not_leak_into_siblings(s: &Storage) {
    for key in ["/ns1/b", "/ns1/a", "/ns10/a", "/ns1", "/ns1-x/a", "/ns2/a", "/ns1/sub/c"] {
        s.create(key, "v").await.unwrap();
    }
    let page = s.list("/ns1/", &all()).await.unwrap();
    let keys: Vec<_> = page.items.iter().map(|kv| kv.key.as_str()).collect();
    assert_eq!(keys, ["/ns1/a", "/ns1/b", "/ns1/sub/c"]);
    assert_eq!(page.continue_token, None);
    assert_eq!(page.revision, s.current_revision().await.unwrap());
    assert_eq!(s.list("/", &all()).await.unwrap().items.len(), 7);
    assert!(s.list("/nothing/", &all()).await.unwrap().items.is_empty());
}

/// Pages of one list come from the first page's snapshot, whatever is written in between.
pub async fn list_pages_share_one_snapshot(s: &Storage) {
    for i in 0..25 {
        s.create(&format!("/p/{i:02}"), format!("v{i}")).await.unwrap();
    }
    let first = s.list("/p/", &ListOptions { limit: 10, ..all() }).await.unwrap();
    assert_eq!(first.items.len(), 10);
    let token = first.continue_token.clone().expect("more pages");
    // Writes after the first page must not show in later pages.
    s.create("/p/15a", "new").await.unwrap();
    s.delete("/p/20", &Preconditions::default()).await.unwrap();
    let kv = s.get("/p/21").await.unwrap();
    s.update("/p/21", "changed", kv.mod_revision).await.unwrap();

    let mut keys: Vec<String> = first.items.iter().map(|kv| kv.key.clone()).collect();
    let mut next = Some(token);
    let mut pages = 1;
    while let Some(token) = next {
        let page = s
            .list("/p/", &ListOptions { limit: 10, continue_token: Some(token), ..all() })
            .await
            .unwrap();
        assert_eq!(page.revision, first.revision, "every page reads the first page's snapshot");
        for kv in &page.items {
            if kv.key == "/p/21" {
                assert_eq!(kv.value, "v21");
            }
        }
        keys.extend(page.items.iter().map(|kv| kv.key.clone()));
        next = page.continue_token;
        pages += 1;
    }
    assert_eq!(pages, 3);
    let expected: Vec<String> = (0..25).map(|i| format!("/p/{i:02}")).collect();
    assert_eq!(keys, expected);
    // An exact page boundary ends without a dangling token.
    let exact = s.list("/p/", &ListOptions { limit: 25, ..all() }).await.unwrap();
    assert_eq!(exact.items.len(), 25);
    assert_eq!(exact.continue_token, None);
}

/// Each page says how many keys of its prefix follow it in its snapshot (kube's
/// `remainingItemCount`), whatever is written after the first page; the last page says 0.
pub async fn list_pages_count_the_keys_that_follow(s: &Storage) {
    for i in 0..25 {
        s.create(&format!("/p/{i:02}"), "v").await.unwrap();
    }
    s.create("/p0/sibling", "v").await.unwrap();
    let page = |token| ListOptions { limit: 10, continue_token: token, ..all() };
    let first = s.list("/p/", &page(None)).await.unwrap();
    assert_eq!(first.remaining, 15);
    s.create("/p/15a", "new").await.unwrap();
    s.delete("/p/20", &Preconditions::default()).await.unwrap();
    s.delete("/p/05", &Preconditions::default()).await.unwrap();
    let second = s.list("/p/", &page(first.continue_token)).await.unwrap();
    assert_eq!(second.remaining, 5, "counted in the first page's snapshot");
    let last = s.list("/p/", &page(second.continue_token)).await.unwrap();
    assert_eq!((last.items.len(), last.remaining, last.continue_token), (5, 0, None));
    let now = s.list("/p/", &page(None)).await.unwrap();
    assert_eq!(now.remaining, 14, "24 keys now, 10 on the page");
    assert_eq!(s.list("/p/", &all()).await.unwrap().remaining, 0);
}

/// `start_after` resumes a list after a key the caller kept, at a revision it pinned; a key
/// outside the prefix is refused.
pub async fn list_start_after_a_kept_key(s: &Storage) {
    for k in ["/s/a", "/s/b", "/s/c", "/s/d"] {
        s.create(k, "v").await.unwrap();
    }
    let pinned = s.current_revision().await.unwrap();
    s.delete("/s/c", &Preconditions::default()).await.unwrap();
    let options =
        ListOptions { limit: 2, revision: Some(pinned), start_after: Some("/s/a".into()), ..all() };
    let page = s.list("/s/", &options).await.unwrap();
    let keys: Vec<_> = page.items.iter().map(|kv| kv.key.as_str()).collect();
    assert_eq!(keys, ["/s/b", "/s/c"], "read at the pinned revision, after the kept key");
    assert_eq!(page.revision, pinned);
    let outside = ListOptions { start_after: Some("/t/a".into()), ..all() };
    assert!(matches!(s.list("/s/", &outside).await, Err(Error::InvalidContinue { .. })));
}

/// A list at a past revision inside the history shows exactly the state at that revision.
pub async fn list_at_past_revision(s: &Storage) {
    s.create("/h/a", "a1").await.unwrap();
    let b = s.create("/h/b", "b1").await.unwrap();
    let then = s.current_revision().await.unwrap();
    let a = s.get("/h/a").await.unwrap();
    s.update("/h/a", "a2", a.mod_revision).await.unwrap();
    s.delete("/h/b", &Preconditions::default()).await.unwrap();
    s.create("/h/c", "c1").await.unwrap();
    s.delete("/h/c", &Preconditions::default()).await.unwrap();
    s.create("/h/c", "c2").await.unwrap();

    let past = s.list("/h/", &ListOptions { revision: Some(then), ..all() }).await.unwrap();
    assert_eq!(past.revision, then);
    let got: Vec<_> = past.items.iter().map(|kv| (kv.key.as_str(), kv.value.clone())).collect();
    assert_eq!(got, [("/h/a", Bytes::from("a1")), ("/h/b", Bytes::from("b1"))]);
    assert_eq!(past.items[1], b);
    let paged =
        s.list("/h/", &ListOptions { revision: Some(then), limit: 1, ..all() }).await.unwrap();
    assert_eq!(paged.items[0].key, "/h/a");
    let rest = s
        .list("/h/", &ListOptions { continue_token: paged.continue_token, ..all() })
        .await
        .unwrap();
    assert_eq!(rest.items, vec![b]);

    let now = s.list("/h/", &all()).await.unwrap();
    let got: Vec<_> = now.items.iter().map(|kv| (kv.key.as_str(), kv.value.clone())).collect();
    assert_eq!(got, [("/h/a", Bytes::from("a2")), ("/h/c", Bytes::from("c2"))]);
}

/// A revision not yet written is refused with the current revision named.
pub async fn list_future_revision_is_refused(s: &Storage) {
    s.create("/f/a", "v").await.unwrap();
    let current = s.current_revision().await.unwrap();
    let err = s
        .list("/f/", &ListOptions { revision: Some(Revision(current.0 + 10)), ..all() })
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::FutureRevision { requested, current: c } if requested.0 == current.0 + 10 && c == current),
        "{err}"
    );
}

/// Revision 0 is the store before its first write: empty, with no continue token (and
/// `Compacted` once compaction passed it). etcd reads "revision 0" as "current"; we do not.
pub async fn list_at_revision_zero_is_the_empty_store(s: &Storage) {
    for i in 0..3 {
        s.create(&format!("/z/{i}"), "v").await.unwrap();
    }
    let options = ListOptions { revision: Some(Revision::ZERO), limit: 1, ..all() };
    let page = s.list("/z/", &options).await.unwrap();
    assert_eq!((page.items.len(), page.revision, page.continue_token), (0, Revision::ZERO, None));
    let current = s.current_revision().await.unwrap();
    s.compact(current).await.unwrap();
    let err = s.list("/z/", &options).await.unwrap_err();
    assert!(matches!(err, Error::Compacted { requested: Revision::ZERO, .. }), "{err}");
}

/// After compaction, reads below it are `Compacted` (naming the oldest revision) and reads at
/// it still work; a continue token whose snapshot was compacted is `Compacted` too.
pub async fn list_below_compaction_is_compacted(s: &Storage) {
    for i in 0..5 {
        s.create(&format!("/c/{i}"), "v").await.unwrap();
    }
    let old = s.current_revision().await.unwrap();
    let page = s.list("/c/", &ListOptions { limit: 2, ..all() }).await.unwrap();
    for i in 5..10 {
        s.create(&format!("/c/{i}"), "v").await.unwrap();
    }
    let compact_at = Revision(old.0 + 2);
    s.compact(compact_at).await.unwrap();
    let err = s.list("/c/", &ListOptions { revision: Some(old), ..all() }).await.unwrap_err();
    assert!(
        matches!(err, Error::Compacted { requested, oldest } if requested == old && oldest == compact_at),
        "{err}"
    );
    let err = s
        .list("/c/", &ListOptions { continue_token: page.continue_token, ..all() })
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Compacted { .. }), "{err}");
    let at = s.list("/c/", &ListOptions { revision: Some(compact_at), ..all() }).await.unwrap();
    assert_eq!(at.items.len(), 7);
    assert_eq!(s.list("/c/", &all()).await.unwrap().items.len(), 10);
}

/// Garbage continue tokens, and tokens of another prefix, are refused.
pub async fn invalid_continue_tokens_are_refused(s: &Storage) {
    for i in 0..3 {
        s.create(&format!("/t/{i}"), "v").await.unwrap();
    }
    let page = s.list("/t/", &ListOptions { limit: 1, ..all() }).await.unwrap();
    let token = page.continue_token.unwrap();
    let other =
        s.list("/u/", &ListOptions { continue_token: Some(token), ..all() }).await.unwrap_err();
    assert!(matches!(other, Error::InvalidContinue { .. }), "{other}");
    for bad in ["", "!!!", "bm90IGEgdG9rZW4", "MDovdC8x"] {
        let err = s
            .list("/t/", &ListOptions { continue_token: Some(bad.into()), ..all() })
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidContinue { .. }), "{bad:?}: {err}");
    }
}

/// Malformed keys and prefixes are refused with `InvalidKey` and nothing is written.
pub async fn invalid_keys_are_refused(s: &Storage) {
    let before = s.current_revision().await.unwrap();
    for bad in ["", "no-slash", "/trailing/", "//double", "/a/../b", "/nul\0byte", "/new\nline"] {
        assert!(matches!(s.create(bad, "v").await, Err(Error::InvalidKey { .. })), "{bad:?}");
        assert!(matches!(s.get(bad).await, Err(Error::InvalidKey { .. })), "{bad:?}");
        assert!(
            matches!(s.delete(bad, &Preconditions::default()).await, Err(Error::InvalidKey { .. })),
            "{bad:?}"
        );
    }
    let long = format!("/{}", "k".repeat(ocm_storage::key::MAX_KEY_BYTES));
    assert!(matches!(s.create(&long, "v").await, Err(Error::InvalidKey { .. })));
    for bad in ["", "/no-trailing", "x/", "//"] {
        assert!(matches!(s.list(bad, &all()).await, Err(Error::InvalidKey { .. })), "{bad:?}");
        assert!(matches!(s.watch(bad, before).await, Err(Error::InvalidKey { .. })), "{bad:?}");
    }
    assert_eq!(s.current_revision().await.unwrap(), before);
}

/// Exactly `MAX_VALUE_BYTES` is accepted; one byte more is `TooLarge` and keeps the old value.
pub async fn value_size_limit_is_exact(s: &Storage) {
    let max = Bytes::from(vec![b'x'; MAX_VALUE_BYTES]);
    let kv = s.create("/big/k", max.clone()).await.unwrap();
    assert_eq!(s.get("/big/k").await.unwrap().value.len(), MAX_VALUE_BYTES);
    let over = Bytes::from(vec![b'y'; MAX_VALUE_BYTES + 1]);
    let err = s.update("/big/k", over.clone(), kv.mod_revision).await.unwrap_err();
    assert!(
        matches!(err, Error::TooLarge { size, limit, .. } if size == MAX_VALUE_BYTES + 1 && limit == MAX_VALUE_BYTES),
        "{err}"
    );
    assert!(matches!(s.create("/big/other", over).await, Err(Error::TooLarge { .. })));
    assert_eq!(s.get("/big/k").await.unwrap(), kv);
    assert_eq!(s.try_get("/big/other").await.unwrap(), None);
}

/// A watch from a past revision replays the history after it, then follows live writes.
pub async fn watch_replays_history_then_follows_live(s: &Storage) {
    let start = s.current_revision().await.unwrap();
    for i in 0..5 {
        s.create(&format!("/w/{i}"), format!("v{i}")).await.unwrap();
    }
    let mut watch = s.watch("/w/", start).await.unwrap();
    for i in 0..5u64 {
        let e = next_event(&mut watch).await;
        assert_eq!((e.kind, e.key.as_str()), (EventKind::Put, format!("/w/{i}").as_str()));
        assert_eq!(e.revision, Revision(start.0 + 1 + i));
    }
    let live = s.create("/w/live", "now").await.unwrap();
    let e = next_event(&mut watch).await;
    assert_eq!(e.kv(), Some(live));
    assert_quiet(&mut watch).await;
    // From the current revision: only what comes next.
    let now = s.current_revision().await.unwrap();
    let mut fresh = s.watch("/w/", now).await.unwrap();
    assert_quiet(&mut fresh).await;
    let later = s.create("/w/later", "x").await.unwrap();
    assert_eq!(next_event(&mut fresh).await.revision, later.mod_revision);
}

/// A watcher sees only its prefix, and never a sibling prefix that shares its spelling.
pub async fn watch_filters_by_prefix(s: &Storage) {
    let start = s.current_revision().await.unwrap();
    let mut watch = s.watch("/ns1/", start).await.unwrap();
    s.create("/ns10/a", "x").await.unwrap();
    s.create("/ns1/a", "y").await.unwrap();
    s.create("/ns2/a", "z").await.unwrap();
    s.create("/ns1/b", "w").await.unwrap();
    assert_eq!(next_event(&mut watch).await.key, "/ns1/a");
    assert_eq!(next_event(&mut watch).await.key, "/ns1/b");
    assert_quiet(&mut watch).await;
}

/// Put events carry the previous value (none on create); delete events carry the deleted value.
pub async fn watch_events_carry_previous_values(s: &Storage) {
    let start = s.current_revision().await.unwrap();
    let mut watch = s.watch("/e/", start).await.unwrap();
    let v1 = s.create("/e/k", "one").await.unwrap();
    let v2 = s.update("/e/k", "two", v1.mod_revision).await.unwrap();
    let gone = s.delete("/e/k", &Preconditions::default()).await.unwrap();

    let created = next_event(&mut watch).await;
    assert_eq!((created.kind, created.prev.clone()), (EventKind::Put, None));
    assert_eq!(created.kv(), Some(v1.clone()));
    let updated = next_event(&mut watch).await;
    assert_eq!(updated.prev, Some(v1));
    assert_eq!(updated.kv(), Some(v2.clone()));
    let deleted = next_event(&mut watch).await;
    assert_eq!(deleted.kind, EventKind::Delete);
    assert_eq!(deleted.revision, gone.revision);
    assert_eq!(deleted.create_revision, v2.create_revision);
    assert_eq!(deleted.prev, Some(v2));
    assert!(deleted.value.is_empty());
    assert_eq!(deleted.kv(), None);
}

/// A watch from below the compaction revision is refused with `Compacted`.
pub async fn watch_below_compaction_is_compacted(s: &Storage) {
    let start = s.current_revision().await.unwrap();
    for i in 0..6 {
        s.create(&format!("/wc/{i}"), "v").await.unwrap();
    }
    let compact_at = Revision(start.0 + 4);
    s.compact(compact_at).await.unwrap();
    let err = s.watch("/wc/", start).await.err().expect("watch below compaction must fail");
    assert!(
        matches!(err, Error::Compacted { requested, oldest } if requested == start && oldest == compact_at),
        "{err}"
    );
    let err = s.watch("/wc/", Revision::ZERO).await.err().expect("watch from 0 must fail");
    assert!(matches!(err, Error::Compacted { .. }), "{err}");
    // From the compaction revision itself the rest of the history is still there.
    let mut watch = s.watch("/wc/", compact_at).await.unwrap();
    assert_eq!(next_event(&mut watch).await.key, "/wc/4");
    assert_eq!(next_event(&mut watch).await.key, "/wc/5");
}

/// A watch from a revision not yet written waits and starts after it.
pub async fn watch_from_future_revision_waits(s: &Storage) {
    let now = s.current_revision().await.unwrap();
    let mut watch = s.watch("/fw/", Revision(now.0 + 2)).await.unwrap();
    s.create("/fw/1", "v").await.unwrap();
    s.create("/fw/2", "v").await.unwrap();
    s.create("/fw/3", "v").await.unwrap();
    let e = next_event(&mut watch).await;
    assert_eq!((e.key.as_str(), e.revision), ("/fw/3", Revision(now.0 + 3)));
}

/// A watch from the largest revision is accepted and simply never delivers (no overflow).
pub async fn watch_from_the_last_revision_never_panics(s: &Storage) {
    let mut watch = s.watch("/max/", Revision(u64::MAX)).await.unwrap();
    s.create("/max/k", "v").await.unwrap();
    assert_quiet(&mut watch).await;
    let mut watch = s.watch("/max/", Revision(i64::MAX as u64 - 1)).await.unwrap();
    s.create("/max/k2", "v").await.unwrap();
    assert_quiet(&mut watch).await;
}

/// Compaction at or below an earlier one is a no-op; above the current revision it is refused.
pub async fn compact_is_idempotent_and_refuses_the_future(s: &Storage) {
    for i in 0..4 {
        s.create(&format!("/ci/{i}"), "v").await.unwrap();
    }
    let current = s.current_revision().await.unwrap();
    s.compact(Revision(current.0 - 1)).await.unwrap();
    s.compact(Revision(current.0 - 1)).await.unwrap();
    s.compact(Revision(current.0 - 2)).await.unwrap();
    let err = s.compact(Revision(current.0 + 5)).await.unwrap_err();
    assert!(matches!(err, Error::FutureRevision { .. }), "{err}");
    assert_eq!(s.list("/ci/", &all()).await.unwrap().items.len(), 4);
}

async fn next_commit(stream: &mut CommitStream) -> Commit {
    match tokio::time::timeout(WAIT, stream.next()).await {
        Ok(Some(Ok(commit))) => commit,
        Ok(Some(Err(e))) => panic!("watch failed: {e}"),
        Ok(None) => panic!("watch ended"),
        Err(_) => panic!("no commit within {WAIT:?}"),
    }
}

fn create(key: &str, value: &str) -> Write {
    Write::Create { key: key.to_owned(), value: Bytes::from(value.to_owned()) }
}

fn update(kv: &KeyValue, value: &str) -> Write {
    Write::Update {
        key: kv.key.clone(),
        value: Bytes::from(value.to_owned()),
        expected: kv.mod_revision,
    }
}

fn delete(kv: &KeyValue) -> Write {
    Write::Delete { key: kv.key.clone(), expected: kv.mod_revision }
}

/// Two keys, `/m/a` and `/m/b`, created one by one.
async fn two_keys(s: &Storage) -> (KeyValue, KeyValue) {
    (s.create("/m/a", "a1").await.unwrap(), s.create("/m/b", "b1").await.unwrap())
}

/// A commit with one failing compare writes nothing, uses no revision, and names the key and
/// the compare that failed: an existing key for a create, a stale revision for an update or a
/// delete, an absent key for an update or a delete.
pub async fn commit_is_all_or_nothing(s: &Storage) {
    let (a, b) = two_keys(s).await;
    let stale = Write::Delete { key: b.key.clone(), expected: a.mod_revision };
    let before = s.current_revision().await.unwrap();
    let err = s.commit(vec![create("/m/c", "c1"), update(&a, "a2"), stale]).await.unwrap_err();
    assert!(
        matches!(&err, Error::Conflict { key, what: "mod_revision", expected, actual }
            if key == "/m/b" && *expected == a.mod_revision && *actual == b.mod_revision),
        "{err}"
    );
    let err = s.commit(vec![update(&a, "a2"), create("/m/b", "again")]).await.unwrap_err();
    assert!(matches!(&err, Error::AlreadyExists { key } if key == "/m/b"), "{err}");
    let gone = KeyValue { key: "/m/gone".into(), ..a.clone() };
    // etcd compares an absent key's mod revision as 0: an expected 0 must not create the key.
    let never = KeyValue { mod_revision: Revision::ZERO, ..gone.clone() };
    for missing in [update(&gone, "x"), delete(&gone), update(&never, "x"), delete(&never)] {
        let err = s.commit(vec![create("/m/c", "c1"), missing]).await.unwrap_err();
        assert!(matches!(&err, Error::NotFound { key } if key == "/m/gone"), "{err}");
    }
    let zero = KeyValue { mod_revision: Revision::ZERO, ..a.clone() };
    let err = s.commit(vec![update(&zero, "a2")]).await.unwrap_err();
    assert!(
        matches!(&err, Error::Conflict { key, expected: Revision::ZERO, .. } if key == "/m/a"),
        "{err}"
    );
    assert_eq!(s.current_revision().await.unwrap(), before, "a refused commit takes no revision");
    assert_eq!(s.get("/m/a").await.unwrap(), a);
    assert_eq!(s.get("/m/b").await.unwrap(), b);
    assert_eq!(s.try_get("/m/c").await.unwrap(), None);
    assert_eq!(s.list("/m/", &all()).await.unwrap().items, vec![a, b]);
    let next = s.create("/m/d", "d").await.unwrap();
    assert_eq!(next.mod_revision, Revision(before.0 + 1), "the next write takes the next revision");
}

/// A commit of creates, updates and deletes is one write: one new revision, every key's mod
/// revision, creates' create revision; updates keep theirs; what each did comes back in the
/// order given.
pub async fn commit_writes_every_key_at_one_revision(s: &Storage) {
    let (a, b) = two_keys(s).await;
    let before = s.current_revision().await.unwrap();
    // Given out of key order: the answer follows the order given.
    let Committed { revision, written } =
        s.commit(vec![delete(&b), create("/m/c", "c1"), update(&a, "a2")]).await.unwrap();
    assert_eq!(revision, Revision(before.0 + 1));
    assert_eq!(s.current_revision().await.unwrap(), revision);
    let c = KeyValue {
        key: "/m/c".into(),
        value: Bytes::from_static(b"c1"),
        create_revision: revision,
        mod_revision: revision,
    };
    let a2 = KeyValue { value: Bytes::from_static(b"a2"), mod_revision: revision, ..a.clone() };
    assert_eq!(
        written,
        vec![
            Written::Deleted(ocm_storage::Deleted { revision, prev: b.clone() }),
            Written::Put(c.clone()),
            Written::Put(a2.clone()),
        ]
    );
    assert_eq!(s.get("/m/a").await.unwrap(), a2);
    assert_eq!(s.get("/m/c").await.unwrap(), c);
    assert_eq!(s.try_get("/m/b").await.unwrap(), None);
    // A commit of one key is an ordinary write.
    let one = s.commit(vec![update(&c, "c2")]).await.unwrap();
    assert_eq!(one.revision, Revision(revision.0 + 1));
    // An empty commit writes nothing.
    let empty = s.commit(Vec::new()).await.unwrap();
    assert_eq!((empty.revision, empty.written.len()), (one.revision, 0));
}

/// Lists at the revisions around a commit see all of it or none of it.
pub async fn commit_reads_at_past_revisions(s: &Storage) {
    let (a, b) = two_keys(s).await;
    let before = s.current_revision().await.unwrap();
    let commit = s.commit(vec![update(&a, "a2"), delete(&b), create("/m/c", "c1")]).await.unwrap();
    s.create("/m/later", "x").await.unwrap();
    let at = |r: Revision| ListOptions { revision: Some(r), ..Default::default() };
    let old = s.list("/m/", &at(before)).await.unwrap();
    assert_eq!(old.items, vec![a.clone(), b]);
    let new = s.list("/m/", &at(commit.revision)).await.unwrap();
    let values: Vec<(&str, &[u8])> =
        new.items.iter().map(|kv| (kv.key.as_str(), &kv.value[..])).collect();
    assert_eq!(values, [("/m/a", &b"a2"[..]), ("/m/c", b"c1")]);
    assert!(new.items.iter().all(|kv| kv.mod_revision == commit.revision));
}

/// Every watcher receives a commit's events together, at its revision, in key order, with
/// their previous values; a watcher of a narrower prefix receives its part; a plain watch
/// yields them one after another.
pub async fn commit_reaches_watchers_together(s: &Storage) {
    let (a, b) = two_keys(s).await;
    let start = s.current_revision().await.unwrap();
    let mut commits = s.watch_commits("/m/", start).await.unwrap();
    let mut events = s.watch("/m/", start).await.unwrap();
    let mut narrow = s.watch_commits("/m/x/", start).await.unwrap();
    let writes = vec![create("/m/x/new", "n"), delete(&b), update(&a, "a2")];
    let commit = s.commit(writes).await.unwrap();
    let later = s.create("/m/z", "z").await.unwrap();
    let got = next_commit(&mut commits).await;
    assert_eq!(got.revision, commit.revision);
    let summary: Vec<(EventKind, &str, Revision)> =
        got.events.iter().map(|e| (e.kind, e.key.as_str(), e.revision)).collect();
    let r = commit.revision;
    assert_eq!(
        summary,
        [
            (EventKind::Put, "/m/a", r),
            (EventKind::Delete, "/m/b", r),
            (EventKind::Put, "/m/x/new", r)
        ]
    );
    assert_eq!((got.events[0].prev.as_ref(), got.events[1].prev.as_ref()), (Some(&a), Some(&b)));
    assert_eq!(got.events[2].prev, None);
    let next = next_commit(&mut commits).await;
    assert_eq!((next.revision, next.events.len()), (later.mod_revision, 1));
    for key in ["/m/a", "/m/b", "/m/x/new"] {
        let e = next_event(&mut events).await;
        assert_eq!((e.key.as_str(), e.revision), (key, r));
    }
    assert_eq!(next_event(&mut events).await.revision, later.mod_revision);
    let part = next_commit(&mut narrow).await;
    assert_eq!((part.revision, part.events.len()), (r, 1));
    assert_eq!(part.events[0].key, "/m/x/new");
    // Replayed from the history, the commit comes together as well.
    let mut replay = s.watch_commits("/m/", start).await.unwrap();
    assert_eq!(next_commit(&mut replay).await, got);
}

/// A watch after a commit's revision skips all of its events; from the revision before, it
/// gets all of them.
pub async fn watch_after_a_commit_skips_all_of_it(s: &Storage) {
    let (a, b) = two_keys(s).await;
    let commit = s.commit(vec![update(&a, "a2"), update(&b, "b2")]).await.unwrap();
    let mut after = s.watch("/m/", commit.revision).await.unwrap();
    let mut before = s.watch("/m/", Revision(commit.revision.0 - 1)).await.unwrap();
    let later = s.create("/m/c", "c").await.unwrap();
    assert_eq!(next_event(&mut after).await.kv(), Some(later.clone()));
    assert_quiet(&mut after).await;
    for key in ["/m/a", "/m/b"] {
        let e = next_event(&mut before).await;
        assert_eq!((e.key.as_str(), e.revision), (key, commit.revision));
    }
    assert_eq!(next_event(&mut before).await.kv(), Some(later));
}

/// The limits of a commit are typed errors and write nothing: more than `MAX_COMMIT_KEYS`
/// keys, more than `MAX_COMMIT_BYTES` in all, a value over its own limit, a key twice, an
/// invalid key. Exactly `MAX_COMMIT_KEYS` keys are one commit.
pub async fn commit_limits_are_typed(s: &Storage) {
    let before = s.current_revision().await.unwrap();
    let creates = |n: usize| (0..n).map(|i| create(&format!("/l/{i:03}"), "v")).collect::<Vec<_>>();
    let err = s.commit(creates(MAX_COMMIT_KEYS + 1)).await.unwrap_err();
    assert!(
        matches!(err, Error::CommitTooLarge { keys, .. } if keys == MAX_COMMIT_KEYS + 1),
        "{err}"
    );
    let half = Bytes::from(vec![b'h'; MAX_COMMIT_BYTES / 2 + 1]);
    let big = |k: &str| Write::Create { key: k.to_owned(), value: half.clone() };
    let err = s.commit(vec![big("/l/x"), big("/l/y")]).await.unwrap_err();
    assert!(
        matches!(err, Error::CommitTooLarge { keys: 2, bytes } if bytes > MAX_COMMIT_BYTES),
        "{err}"
    );
    let over =
        Write::Create { key: "/l/o".into(), value: Bytes::from(vec![b'o'; MAX_VALUE_BYTES + 1]) };
    let err = s.commit(vec![create("/l/a", "a"), over]).await.unwrap_err();
    assert!(matches!(&err, Error::TooLarge { key, .. } if key == "/l/o"), "{err}");
    let err = s.commit(vec![create("/l/t", "1"), create("/l/t", "2")]).await.unwrap_err();
    assert!(matches!(&err, Error::InvalidKey { key, .. } if key == "/l/t"), "{err}");
    let err = s.commit(vec![create("/l/a", "a"), create("/l/bad/", "b")]).await.unwrap_err();
    assert!(matches!(err, Error::InvalidKey { .. }), "{err}");
    assert_eq!(s.current_revision().await.unwrap(), before);
    assert!(s.list("/l/", &all()).await.unwrap().items.is_empty());
    let full = s.commit(creates(MAX_COMMIT_KEYS)).await.unwrap();
    assert_eq!(full.revision, Revision(before.0 + 1));
    let listed = s.list("/l/", &all()).await.unwrap().items;
    assert_eq!(listed.len(), MAX_COMMIT_KEYS);
    assert!(listed.iter().all(|kv| kv.mod_revision == full.revision));
}
