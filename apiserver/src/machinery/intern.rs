//! Interning of large byte strings: equal contents are held once, however many objects (and
//! versions of them) carry them — one ManifestWork's manifests sent to a thousand clusters, a
//! big spec kept in the watch cache's history across its status updates. Also of the short
//! strings RBAC rules and bindings repeat for every cluster (verbs, groups, resources, the
//! cluster's own name): [`symbol`].

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, LazyLock, Mutex, PoisonError, Weak};

use bytes::Bytes;

/// Byte strings shorter than this are not worth a lookup: they are kept as they are.
pub const MIN_BYTES: usize = 16 * 1024;

/// The process's interned byte strings, by hash; an entry lives as long as some `Bytes` made
/// from it does. Equal hashes are compared byte for byte, so a collision never mixes contents.
struct Interner {
    hasher: RandomState,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    entries: HashMap<u64, Vec<Weak<Held>>>,
    /// Entries after the last sweep: the next sweep comes when the table has doubled.
    swept_at: usize,
}

/// Held bytes in their own allocation: a dead entry's `Weak` keeps only this small box alive,
/// never the bytes.
struct Held(Box<[u8]>);

/// What a `Bytes` made from held bytes owns.
struct Owner(Arc<Held>);

impl AsRef<[u8]> for Owner {
    fn as_ref(&self) -> &[u8] {
        &self.0.0
    }
}

static INTERNER: LazyLock<Interner> =
    LazyLock::new(|| Interner { hasher: RandomState::new(), table: Mutex::default() });

/// `bytes` as shared bytes: the held copy of equal contents when there is one, else a new
/// held copy. Short byte strings are only freed of their spare capacity. Comparing and copying
/// happen outside the table's lock.
pub fn intern(bytes: Vec<u8>) -> Bytes {
    if bytes.len() < MIN_BYTES {
        return tight(bytes);
    }
    let interner = &*INTERNER;
    let hash = interner.hasher.hash_one(&bytes);
    let candidates: Vec<Arc<Held>> = {
        let mut table = interner.table.lock().unwrap_or_else(PoisonError::into_inner);
        let bucket = table.entries.entry(hash).or_default();
        bucket.retain(|w| w.strong_count() > 0);
        bucket.iter().filter_map(Weak::upgrade).collect()
    };
    if let Some(held) = candidates.into_iter().find(|h| *h.0 == *bytes) {
        return Bytes::from_owner(Owner(held));
    }
    // Two threads interning equal new contents at once may each keep a copy: rare, and
    // harmless (both are correct, one is not shared).
    let held = Arc::new(Held(bytes.into_boxed_slice()));
    let mut table = interner.table.lock().unwrap_or_else(PoisonError::into_inner);
    table.entries.entry(hash).or_default().push(Arc::downgrade(&held));
    if table.entries.len() > 2 * table.swept_at.max(64) {
        table.entries.retain(|_, b| {
            b.retain(|w| w.strong_count() > 0);
            !b.is_empty()
        });
        table.swept_at = table.entries.len();
    }
    drop(table);
    Bytes::from_owner(Owner(held))
}

/// A short string held once however many holders carry it.
pub type Symbol = Arc<str>;

/// The process's symbols; swept of those nobody else holds when the set has doubled.
#[derive(Default)]
struct Symbols {
    set: HashSet<Symbol>,
    swept_at: usize,
}

static SYMBOLS: LazyLock<Mutex<Symbols>> = LazyLock::new(Mutex::default);

/// `text` as a shared symbol: the held one when there is one, else a new one.
pub fn symbol(text: &str) -> Symbol {
    let mut symbols = SYMBOLS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(held) = symbols.set.get(text) {
        return Arc::clone(held);
    }
    let held: Symbol = Arc::from(text);
    symbols.set.insert(Arc::clone(&held));
    if symbols.set.len() > 2 * symbols.swept_at.max(1024) {
        symbols.set.retain(|s| Arc::strong_count(s) > 1);
        symbols.swept_at = symbols.set.len();
    }
    held
}

/// `bytes` as `Bytes` without the spare capacity a grown `Vec` has (up to half of it), for bytes
/// kept long but never shared.
pub fn tight(mut bytes: Vec<u8>) -> Bytes {
    bytes.shrink_to_fit();
    Bytes::from(bytes)
}

/// How many live holders there are of contents equal to `bytes` (for tests).
#[cfg(test)]
fn holders(bytes: &[u8]) -> usize {
    let hash = INTERNER.hasher.hash_one(bytes);
    let table = INTERNER.table.lock().unwrap_or_else(PoisonError::into_inner);
    table
        .entries
        .get(&hash)
        .into_iter()
        .flatten()
        .filter_map(Weak::upgrade)
        .filter(|h| *h.0 == *bytes)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_contents_are_held_once_and_freed_with_their_last_holder() {
        let big = |c: u8| vec![c; MIN_BYTES + 1];
        let a = intern(big(b'a'));
        let b = intern(big(b'a'));
        assert_eq!(a.as_ptr(), b.as_ptr(), "equal contents share one copy");
        assert_eq!(holders(&big(b'a')), 1);
        let c = intern(big(b'c'));
        assert_ne!(a.as_ptr(), c.as_ptr());
        assert_eq!(&c[..], &big(b'c')[..]);
        drop((a, b));
        assert_eq!(holders(&big(b'a')), 0, "freed with its last holder");
        let again = intern(big(b'a'));
        assert_eq!(&again[..], &big(b'a')[..], "a freed entry is made again");
        assert_eq!(holders(&big(b'a')), 1);
        // Short strings are not held.
        let (s1, s2) = (intern(b"short".to_vec()), intern(b"short".to_vec()));
        assert_eq!(&s1[..], b"short");
        assert_ne!(s1.as_ptr(), s2.as_ptr(), "short strings are not looked up");
    }

    #[test]
    fn symbols_are_held_once_and_swept_when_unheld() {
        let (a, b) = (symbol("managedclusters"), symbol("managedclusters"));
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(&*a, "managedclusters");
        // Unheld symbols are swept once the set doubles (enough are made here to get there,
        // whatever other tests hold); held ones stay.
        let n = {
            let symbols = SYMBOLS.lock().unwrap();
            2 * symbols.swept_at.max(1024) + symbols.set.len() + 1
        };
        for i in 0..n {
            symbol(&format!("unheld-{i}"));
        }
        let symbols = SYMBOLS.lock().unwrap();
        let unheld = symbols.set.iter().filter(|s| s.starts_with("unheld-")).count();
        assert!(unheld < n, "{unheld} of {n} unheld symbols kept");
        assert!(symbols.set.contains("managedclusters"));
    }
}
