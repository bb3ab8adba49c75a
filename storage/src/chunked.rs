//! Large values of the sled backend, stored once by content: a value of [`EXTERNAL_BYTES`] or
//! more is cut into content-defined chunks (FastCDC), each kept once under its SHA-256 with a
//! reference count, and the value itself becomes the list of its chunks' hashes under the
//! revision that wrote it.
//!
//! Keys (in the backend's one tree, next to its `d`, `h` and `m` keys):
//! * `v<revision u64>` → the value written at that revision: `len u32, hash × n`; a revision
//!   whose commit wrote several keys names each of their values `v<revision u64><key>`;
//! * `c<hash>` → the chunk's bytes (2–32 KiB: no value goes to a sled blob file on its own,
//!   and sled's cache counts the chunks it holds);
//! * `r<hash>` → how many stored value lists name the chunk (`u64`).
//!
//! So the record, its event and the next event's `prev` share one list, and equal or nearly equal
//! values (one ManifestWork sent to a thousand clusters, or a large object whose status changes)
//! share every chunk their changes did not touch. Counts change only in the batch that stores or
//! drops a list, so a crash can never split a list from its counts.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use fastcdc::v2020::FastCDC;

use super::{read_u64, sled_error};
use crate::error::{Error, Result};

/// Values at least this large are stored by content; smaller ones stay inline in their record and
/// event (the largest everyday objects, a ManagedCluster or a CSR, are a few KiB).
pub(crate) const EXTERNAL_BYTES: usize = 32 * 1024;

/// FastCDC sizes: small enough that an edit rewrites little and every chunk stays inline in sled,
/// large enough that a 1.5 MiB value is a list of about 200 hashes.
const MIN_CHUNK: u32 = 2 * 1024;
const AVG_CHUNK: u32 = 8 * 1024;
const MAX_CHUNK: u32 = 32 * 1024;

const HASH_LEN: usize = 32;
type Hash = [u8; HASH_LEN];

/// The key of the value list written at `revision`: `v<revision>` when the revision wrote one
/// key, `v<revision><key>` (`shared` names the key) when its commit wrote several.
pub(crate) fn value_key(revision: u64, shared: Option<&str>) -> Vec<u8> {
    let suffix = shared.map_or(&[][..], str::as_bytes);
    let mut k = Vec::with_capacity(9 + suffix.len());
    k.push(b'v');
    k.extend_from_slice(&revision.to_be_bytes());
    k.extend_from_slice(suffix);
    k
}

/// The name and the stored list of the value `key` got at `revision`, under whichever of its
/// two names the revision used.
pub(crate) fn find_list(
    db: &sled::Db,
    revision: u64,
    key: &str,
) -> Result<Option<(Vec<u8>, sled::IVec)>> {
    for name in [value_key(revision, None), value_key(revision, Some(key))] {
        if let Some(list) = db.get(&name).map_err(|e| sled_error("read", e))? {
            return Ok(Some((name, list)));
        }
    }
    Ok(None)
}

fn hash_key(prefix: u8, hash: &Hash) -> [u8; HASH_LEN + 1] {
    let mut k = [prefix; HASH_LEN + 1];
    k[1..].copy_from_slice(hash);
    k
}

fn chunk_key(hash: &Hash) -> [u8; HASH_LEN + 1] {
    hash_key(b'c', hash)
}

fn count_key(hash: &Hash) -> [u8; HASH_LEN + 1] {
    hash_key(b'r', hash)
}

/// The hashes of a stored value list, and the value's length.
fn parse_list(list: &[u8], revision: u64) -> Result<(usize, impl Iterator<Item = Hash> + '_)> {
    let what = || format!("value@{revision}");
    let (len, hashes) = list.split_first_chunk::<4>().ok_or_else(|| {
        Error::corrupt(what(), format!("value list of {} bytes is too short", list.len()))
    })?;
    if hashes.len() % HASH_LEN != 0 {
        return Err(Error::corrupt(what(), "value list is not a whole number of hashes"));
    }
    let hashes = hashes.chunks_exact(HASH_LEN).map(|h| h.try_into().expect("exact chunk"));
    Ok((u32::from_be_bytes(*len) as usize, hashes))
}

/// Reads the value `key` got at `revision` back from its chunks.
pub(crate) fn read_value(db: &sled::Db, revision: u64, key: &str) -> Result<Bytes> {
    let (_, list) = find_list(db, revision, key)?
        .ok_or_else(|| Error::corrupt(format!("value@{revision}"), "stored value is missing"))?;
    let (len, hashes) = parse_list(&list, revision)?;
    let mut value = Vec::with_capacity(len);
    for hash in hashes {
        let chunk =
            db.get(chunk_key(&hash)).map_err(|e| sled_error("read", e))?.ok_or_else(|| {
                Error::corrupt(format!("value@{revision}"), "a chunk of the value is missing")
            })?;
        value.extend_from_slice(&chunk);
    }
    if value.len() != len {
        return Err(Error::corrupt(
            format!("value@{revision}"),
            format!("chunks hold {} bytes, the value {len}", value.len()),
        ));
    }
    Ok(Bytes::from(value))
}

/// The chunk reference changes of one batch, written with it by [`Refs::write`].
#[derive(Default)]
pub(crate) struct Refs {
    /// Per chunk: the change of its count, and its bytes if this batch may be the one to store it.
    deltas: HashMap<Hash, (i64, Option<Bytes>)>,
}

impl Refs {
    /// Cuts `value` into chunks, counts one more reference to each, and returns the list to store
    /// under the value's key.
    pub(crate) fn add_value(&mut self, value: &Bytes) -> Vec<u8> {
        let mut list = Vec::with_capacity(4 + (value.len() / AVG_CHUNK as usize + 2) * HASH_LEN);
        // Values are at most 1.5 MiB (the contract's limit), so the length always fits.
        list.extend_from_slice(&(value.len() as u32).to_be_bytes());
        for chunk in FastCDC::new(value, MIN_CHUNK, AVG_CHUNK, MAX_CHUNK) {
            let bytes = value.slice(chunk.offset..chunk.offset + chunk.length);
            let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
            let hash: Hash = digest.as_ref().try_into().expect("SHA-256 is 32 bytes");
            list.extend_from_slice(&hash);
            let entry = self.deltas.entry(hash).or_insert((0, None));
            entry.0 += 1;
            entry.1.get_or_insert(bytes);
        }
        list
    }

    /// Counts one reference less to each chunk of the value list stored for `revision`.
    pub(crate) fn drop_value(&mut self, list: &[u8], revision: u64) -> Result<()> {
        let (_, hashes) = parse_list(list, revision)?;
        for hash in hashes {
            self.deltas.entry(hash).or_insert((0, None)).0 -= 1;
        }
        Ok(())
    }

    /// Adds the counted changes to `batch`: a chunk gaining its first reference is stored, one
    /// losing its last is removed with its count. The caller must keep every other writer of
    /// chunks out from reading the counts until `batch` is applied.
    pub(crate) fn write(self, db: &sled::Db, batch: &mut sled::Batch) -> Result<()> {
        for (hash, (delta, bytes)) in self.deltas {
            if delta == 0 {
                continue;
            }
            let what = || format!("chunk {}", hex(&hash));
            let old = match db.get(count_key(&hash)).map_err(|e| sled_error("read", e))? {
                Some(count) => read_u64(&count, &what())? as i64,
                None => 0,
            };
            let new = old + delta;
            if new < 0 {
                return Err(Error::corrupt(what(), format!("{old} references, {delta} dropped")));
            }
            if new == 0 {
                batch.remove(&chunk_key(&hash)[..]);
                batch.remove(&count_key(&hash)[..]);
                continue;
            }
            if old == 0 {
                let bytes =
                    bytes.ok_or_else(|| Error::corrupt(what(), "referenced but never stored"))?;
                batch.insert(&chunk_key(&hash)[..], bytes.as_ref());
            }
            batch.insert(&count_key(&hash)[..], &(new as u64).to_be_bytes());
        }
        Ok(())
    }
}

/// A large value's identity: the revision that wrote it and its key.
pub(crate) type ValueId = (u64, String);

/// The large values written last, as their writers gave them, up to a byte budget: reading one
/// back (the next write's `prev`, a read right after a write) shares those bytes instead of
/// assembling a copy from the chunks.
pub(crate) struct Recent {
    values: BTreeMap<ValueId, Bytes>,
    bytes: usize,
    limit: usize,
}

impl Recent {
    /// Holds at most `limit` bytes of values.
    pub(crate) fn new(limit: usize) -> Recent {
        Recent { values: BTreeMap::new(), bytes: 0, limit }
    }

    /// The value written at `revision` under `key`, if still held.
    pub(crate) fn get(&self, revision: u64, key: &str) -> Option<Bytes> {
        // Keyed by (revision, key): a lookup by borrowed parts needs the owned pair.
        self.values.get(&(revision, key.to_owned())).cloned()
    }

    /// Holds the value just stored as `id`, letting the oldest go past the budget.
    pub(crate) fn insert(&mut self, id: ValueId, value: Bytes) {
        self.bytes += value.len();
        if let Some(old) = self.values.insert(id, value) {
            self.bytes -= old.len();
        }
        while self.bytes > self.limit {
            let Some((_, oldest)) = self.values.pop_first() else { break };
            self.bytes -= oldest.len();
        }
    }

    /// Lets go of the value `id` (its list was dropped).
    pub(crate) fn remove(&mut self, id: &ValueId) {
        if let Some(old) = self.values.remove(id) {
            self.bytes -= old.len();
        }
    }
}

fn hex(hash: &Hash) -> String {
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Pseudo-random letters (a SHA-256 chain from `seed`, the hash this module already uses),
    /// so chunk boundaries fall as they would in real data and nothing compresses.
    pub(crate) fn noise(len: usize, seed: u64) -> Vec<u8> {
        let mut block = seed.to_be_bytes().to_vec();
        let mut out = Vec::with_capacity(len + HASH_LEN);
        while out.len() < len {
            block = ring::digest::digest(&ring::digest::SHA256, &block).as_ref().to_vec();
            out.extend(block.iter().map(|b| b'a' + b % 26));
        }
        out.truncate(len);
        out
    }

    fn db() -> (tempfile::TempDir, sled::Db) {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::Config::new().path(dir.path()).open().unwrap();
        (dir, db)
    }

    fn store(db: &sled::Db, revision: u64, value: &Bytes) {
        let mut refs = Refs::default();
        let list = refs.add_value(value);
        let mut batch = sled::Batch::default();
        batch.insert(value_key(revision, None), list);
        refs.write(db, &mut batch).unwrap();
        db.apply_batch(batch).unwrap();
    }

    fn drop(db: &sled::Db, revision: u64) {
        let list = db.get(value_key(revision, None)).unwrap().unwrap();
        let mut refs = Refs::default();
        refs.drop_value(&list, revision).unwrap();
        let mut batch = sled::Batch::default();
        batch.remove(value_key(revision, None));
        refs.write(db, &mut batch).unwrap();
        db.apply_batch(batch).unwrap();
    }

    fn chunk_bytes(db: &sled::Db) -> usize {
        db.scan_prefix(b"c").values().map(|v| v.unwrap().len()).sum()
    }

    /// Values that differ only at their start and end share every chunk in between; each reads
    /// back exactly; dropping them all leaves no chunk, count or list behind.
    #[test]
    fn near_equal_values_share_chunks_and_free_them_with_the_last_reference() {
        let (_dir, db) = db();
        let body = noise(500 * 1024, 7);
        let values: Vec<Bytes> = (0..20)
            .map(|i| {
                let mut v = format!("{{\"name\":\"work-{i}\",\"spec\":\"").into_bytes();
                v.extend_from_slice(&body);
                v.extend_from_slice(format!("\",\"status\":{i}}}").as_bytes());
                Bytes::from(v)
            })
            .collect();
        for (i, value) in values.iter().enumerate() {
            store(&db, i as u64 + 1, value);
        }
        for (i, value) in values.iter().enumerate() {
            assert_eq!(&read_value(&db, i as u64 + 1, "k").unwrap(), value);
        }
        // 20 values of 500 KiB: the shared body once, plus at most a few chunks per value.
        let stored = chunk_bytes(&db);
        assert!(stored < body.len() + 20 * 3 * MAX_CHUNK as usize, "{stored} bytes of chunks");
        assert!(stored >= body.len(), "{stored} bytes of chunks");
        for i in 0..20 {
            drop(&db, i + 1);
            if i < 19 {
                assert_eq!(&read_value(&db, 20, "k").unwrap(), &values[19]);
            }
        }
        assert_eq!(db.iter().count(), 0, "everything is freed with the last reference");
    }

    /// The same value twice in one batch is stored once with two references.
    #[test]
    fn one_batch_counts_each_reference() {
        let (_dir, db) = db();
        let value = Bytes::from(noise(100 * 1024, 3));
        let mut refs = Refs::default();
        let mut batch = sled::Batch::default();
        batch.insert(value_key(1, None), refs.add_value(&value));
        batch.insert(value_key(2, Some("/k")), refs.add_value(&value));
        refs.write(&db, &mut batch).unwrap();
        db.apply_batch(batch).unwrap();
        drop(&db, 1);
        assert_eq!(read_value(&db, 2, "/k").unwrap(), value);
        assert!(read_value(&db, 2, "/other").is_err(), "named by its own key only");
        let mut refs = Refs::default();
        refs.drop_value(&db.get(value_key(2, Some("/k"))).unwrap().unwrap(), 2).unwrap();
        let mut batch = sled::Batch::default();
        batch.remove(value_key(2, Some("/k")));
        refs.write(&db, &mut batch).unwrap();
        db.apply_batch(batch).unwrap();
        assert_eq!(db.iter().count(), 0);
    }

    /// The recent values keep to their budget, oldest out first.
    #[test]
    fn recent_values_keep_to_their_budget() {
        let mut recent = Recent::new(10);
        let id = |r: u64| (r, "/k".to_owned());
        recent.insert(id(1), Bytes::from_static(b"aaaa"));
        recent.insert(id(2), Bytes::from_static(b"bbbb"));
        recent.insert(id(3), Bytes::from_static(b"cccc"));
        assert_eq!(recent.get(1, "/k"), None);
        assert_eq!(recent.get(3, "/k").unwrap(), "cccc");
        assert_eq!(recent.get(3, "/other"), None);
        recent.remove(&id(2));
        recent.insert(id(4), Bytes::from_static(b"dddddd"));
        assert_eq!(
            (recent.get(3, "/k").unwrap(), recent.get(4, "/k").unwrap()),
            ("cccc".into(), "dddddd".into())
        );
        assert_eq!(recent.bytes, 10);
    }

    /// A missing chunk or a list of the wrong shape is `Corrupt`, never a panic or a short value.
    #[test]
    fn damage_is_reported_as_corrupt() {
        let (_dir, db) = db();
        let value = Bytes::from(noise(100 * 1024, 5));
        store(&db, 1, &value);
        let first_chunk = db.scan_prefix(b"c").keys().next().unwrap().unwrap();
        db.remove(first_chunk).unwrap();
        assert!(matches!(read_value(&db, 1, "k"), Err(Error::Corrupt { .. })));
        db.insert(value_key(2, None), &b"\0\0"[..]).unwrap();
        assert!(matches!(read_value(&db, 2, "k"), Err(Error::Corrupt { .. })));
        db.insert(value_key(3, None), &b"\0\0\0\x01abc"[..]).unwrap();
        assert!(matches!(read_value(&db, 3, "k"), Err(Error::Corrupt { .. })));
        assert!(matches!(read_value(&db, 4, "k"), Err(Error::Corrupt { .. })));
    }
}
