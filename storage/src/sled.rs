//! The sled backend, the embedded default: records, event history and the revision counter in
//! one sled tree, each write stored as one atomic batch and acknowledged only after a flush.
//!
//! Layout of the single tree (all integers big-endian):
//! * `d<key>` → record: `create u64, modified u64, value` (the top bit of `create` set: the value
//!   is stored by content under `v<modified>` or `v<modified><key>`, see [`chunked`])
//! * `h<revision u64>` → event: `at_ms u64, kind u8, create u64, key, value, prev?` (see
//!   [`codec`]; a value or `prev` of [`EXTERNAL_BYTES`] or more is stored by content and
//!   named by its revision and key). A revision whose commit wrote several keys has one event per
//!   key, each under `h<revision u64><key>`, so they sort by key within their revision.
//! * `v<revision>`, `v<revision><key>`, `c<hash>`, `r<hash>` → large values by content
//!   ([`chunked`]);
//! * `m/compacted` → the compaction revision; `m/format` → [`FORMAT`], also in the file
//!   `format` beside the tree ([`marker`]), read before sled opens it.
//!
//! A large value is stored once, when its revision writes it: the record, the event and the next
//! event's `prev` all name it. The next event on the key (an update or the delete) is the last
//! holder, so compacting that event drops the value, in the same batch.
//!
//! There is no revision counter to write: the history always holds every revision from the
//! compaction revision on (compaction never passes the durable revision), so the last revision is
//! the newest history key, or the compaction revision when the history is empty. Record and event
//! go in one `apply_batch`, so recovery can never split them. Durability
//! is `flush()` followed by an `fdatasync` of sled's data file: sled 0.34 syncs its log with
//! `sync_file_range`, which does not persist file metadata or the device cache, so on its own it
//! survives a process crash but not necessarily a power cut (perf.md §5.1). sled writes any message
//! larger than a quarter segment (128 KiB) to a separate blob file that it never syncs: a large
//! value, but also a whole leaf page when it consolidates or moves one (a leaf of neighbouring
//! chunks easily passes 128 KiB). So every sync also `fsync`s the blob files that are new or have
//! grown since the last one (sled writes each blob file once and never changes it afterwards; one
//! seen half written is synced again once it has grown), and their directory when one is new.

/// Large values stored once by content. A child of this module, so nothing else reaches into the
/// sled tree; its file sits beside this one because the tidy check
/// `storage_backends_stay_in_their_files` names the two files that may use sled.
#[path = "chunked.rs"]
mod chunked;
/// The byte layouts of records and events: a child of this module beside it, as `chunked` is.
#[path = "codec.rs"]
mod codec;
/// The format marker file, read before sled opens the store: a child beside it likewise.
#[path = "marker.rs"]
mod marker;

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use crate::engine::SledOptions;
use crate::error::{Error, Result};
use crate::local::{Backend, Change, Healing, Local, Record, Recovered, keep_reserve};
use crate::{Store, WatchEvent};
use chunked::{EXTERNAL_BYTES, Recent, Refs, ValueId};
pub(crate) use codec::read_u64;
use codec::{decode_event, decode_record, encode_event, encode_record, external_prev};

/// The on-disk format this code reads and writes.
const FORMAT: &[u8] = b"ocm-storage/sled/3";
/// Format 2: format 3 without commits of several keys (no `h<revision><key>` or
/// `v<revision><key>` key), so it is read as it is. It is marked format 3 at open, because code
/// that knows only format 2 cannot read such commits.
const FORMAT_2: &[u8] = b"ocm-storage/sled/2";
/// Format 1: format 2 with no value stored by content (no flag set), read as it is and marked
/// format 3 likewise.
const FORMAT_1: &[u8] = b"ocm-storage/sled/1";
/// The number of [`FORMAT`].
const FORMAT_NUMBER: u32 = 3;
/// What every format marker starts with (its number follows).
const FORMAT_PREFIX: &str = "ocm-storage/sled/";
const META_COMPACTED: &[u8] = b"m/compacted";
const META_FORMAT: &[u8] = b"m/format";
/// Present while a restore writes the store (its revision): such a store is refused at open.
const META_RESTORING: &[u8] = b"m/restoring";
/// Why a store with format marker `marker` (none this build reads) is refused: a newer
/// release's format, or damage.
fn unreadable_format(marker: &[u8]) -> Error {
    let text = String::from_utf8_lossy(marker);
    match text.strip_prefix(FORMAT_PREFIX).and_then(|n| n.parse::<u32>().ok()) {
        Some(found) if found > FORMAT_NUMBER => {
            Error::NewerFormat { found, supported: FORMAT_NUMBER }
        }
        _ => Error::corrupt("m/format", format!("unknown format {text:?}")),
    }
}

/// How many bytes of the large values written last are kept to be shared by the reads that
/// follow a write (the next write's `prev` above all). Half the hub's write budget: a
/// key's next write soon after serves its `prev` from here; a value rewritten later is
/// assembled from its chunks, so memory is not spent on values nobody reads again.
const RECENT_BYTES: usize = 8 << 20;

struct Sled {
    db: sled::Db,
    /// sled's data file, kept open to `fdatasync` it after each flush.
    data_file: File,
    /// Where sled keeps its blob files.
    blob_dir: PathBuf,
    /// The blob files already synced (and still there), with their length when they were: a
    /// sync `fsync`s only new or grown ones. `None` until the first sync, which syncs every file
    /// and the directories (an earlier run may have died before it did).
    synced_blobs: Mutex<Option<HashMap<OsString, u64>>>,
    /// Held from reading chunk reference counts to applying their batch: writes and the
    /// compaction (which runs alongside them) both change counts. Chunking, hashing and reading
    /// value lists happen before it is taken (a list never changes once written).
    counts: Mutex<()>,
    recent: Mutex<Recent>,
    ack_before_flush: bool,
}

pub(crate) async fn open(options: SledOptions) -> Result<Arc<dyn Store>> {
    let local = options.local;
    let again = options.clone();
    let (sled, recovered) = tokio::task::spawn_blocking(move || {
        let opened = Sled::open(&options)?;
        // Room to reopen the store after a failed write, kept beside it.
        if let Err(e) = keep_reserve(&options.path) {
            tracing::warn!(error = %e, "sled: no reserve; a full disk may leave the store unreadable");
        }
        Ok::<_, Error>(opened)
    })
    .await
    .map_err(|e| Error::unavailable("sled open task failed", e))??;
    // After a failed write the store is opened again from disk (see `local::heal`).
    let healing = Healing {
        dir: again.path.clone(),
        min_free: again.min_free_bytes,
        reopen: Box::new(move || Sled::open(&again)),
    };
    Ok(Local::start_healing(sled, recovered, local, Some(healing)))
}

pub(crate) fn sled_error(context: &str, e: sled::Error) -> Error {
    match e {
        sled::Error::Corruption { at, .. } => {
            Error::corrupt(format!("sled:{at:?}"), format!("{context}: sled reports corruption"))
        }
        other => Error::unavailable(format!("sled {context} failed"), other),
    }
}

/// How long `open` waits for another handle to let go of the store's file lock: a handle dropped
/// in this process closes its database in the background a moment later.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

fn open_waiting_for_lock(config: &sled::Config, path: &std::path::Path) -> Result<sled::Db> {
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match config.open() {
            Ok(db) => return Ok(db),
            Err(sled::Error::Io(e))
                if e.to_string().contains("could not acquire lock")
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(sled::Error::Io(e)) if e.to_string().contains("could not acquire lock") => {
                return Err(Error::unavailable(
                    format!("{} is in use by another process or handle", path.display()),
                    e,
                ));
            }
            Err(e) => return Err(sled_error("open", e)),
        }
    }
}

fn data_key(key: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 1);
    k.push(b'd');
    k.extend_from_slice(key.as_bytes());
    k
}

/// The history key of the one event of `revision`; with `shared`, of that key's event in a
/// revision whose commit wrote several keys.
fn history_key(revision: u64, shared: Option<&str>) -> Vec<u8> {
    let suffix = shared.map_or(&[][..], str::as_bytes);
    let mut k = Vec::with_capacity(9 + suffix.len());
    k.push(b'h');
    k.extend_from_slice(&revision.to_be_bytes());
    k.extend_from_slice(suffix);
    k
}

/// The history keys of the revisions in `[from, to]`, as a range.
fn history_range(from: u64, to: u64) -> std::ops::Range<Vec<u8>> {
    let end = match to.checked_add(1) {
        Some(next) => history_key(next, None),
        None => b"i".to_vec(),
    };
    history_key(from, None)..end
}

/// The revision of a history key, and whether its revision is a commit of several keys.
fn history_revision(k: &[u8]) -> Result<(u64, bool)> {
    let what = || String::from_utf8_lossy(k).into_owned();
    let revision = k.get(1..9).ok_or_else(|| Error::corrupt(what(), "history key too short"))?;
    Ok((read_u64(revision, "history key")?, k.len() > 9))
}

/// The revisions of `changes` that more than one change shares (commits of several keys).
fn shared_revisions(changes: &[Change<'_>]) -> HashSet<u64> {
    changes
        .windows(2)
        .filter(|w| w[0].event.revision == w[1].event.revision)
        .map(|w| w[0].event.revision.0)
        .collect()
}

impl Sled {
    fn open(options: &SledOptions) -> Result<(Sled, Recovered)> {
        // Before sled touches the files: a store it refuses stays exactly as it was.
        marker::check(&options.path)?;
        std::fs::create_dir_all(&options.path).map_err(|e| {
            Error::unavailable(format!("cannot create {}", options.path.display()), e)
        })?;
        let config = sled::Config::new()
            .path(&options.path)
            .cache_capacity(options.cache_capacity)
            // A backstop only: writes are acknowledged after our own flush.
            .flush_every_ms(Some(500));
        let db = open_waiting_for_lock(&config, &options.path)?;
        match db.get(META_FORMAT).map_err(|e| sled_error("read", e))? {
            Some(format) if format == FORMAT => {}
            Some(format) if format == FORMAT_1 || format == FORMAT_2 => {
                db.insert(META_FORMAT, FORMAT).map_err(|e| sled_error("write", e))?;
                db.flush().map_err(|e| sled_error("flush", e))?;
            }
            Some(format) => return Err(unreadable_format(&format)),
            None if db.is_empty() => {
                db.insert(META_FORMAT, FORMAT).map_err(|e| sled_error("write", e))?;
                db.flush().map_err(|e| sled_error("flush", e))?;
            }
            None => return Err(Error::corrupt("m/format", "data present but no format marker")),
        }
        refuse_unfinished_restore(&db, &options.path)?;
        marker::write(&options.path)?;
        let data_path = options.path.join("db");
        let data_file = File::open(&data_path)
            .map_err(|e| Error::unavailable(format!("cannot open {}", data_path.display()), e))?;
        let sled = Sled {
            db,
            data_file,
            blob_dir: options.path.join("blobs"),
            synced_blobs: Mutex::default(),
            counts: Mutex::default(),
            recent: Mutex::new(Recent::new(RECENT_BYTES)),
            ack_before_flush: options.unsafe_ack_before_flush,
        };
        let recovered = sled.recover()?;
        Ok((sled, recovered))
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, ()> {
        self.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Drops the events in `(from, to]` and the large values only they still name, and records
    /// `compacted` as the compaction revision if given, in one atomic batch.
    fn drop_events(&self, from: u64, to: u64, compacted: Option<u64>) -> Result<()> {
        let mut batch = sled::Batch::default();
        let mut refs = Refs::default();
        if from >= to {
            return self.finish_drop(batch, refs, compacted);
        }
        for entry in self.db.range(history_range(from + 1, to)) {
            let (k, v) = entry.map_err(|e| sled_error("scan", e))?;
            let (revision, _) = history_revision(&k)?;
            if let Some((prev, key)) = external_prev(revision, &v)? {
                let (name, list) = chunked::find_list(&self.db, prev, &key)?.ok_or_else(|| {
                    Error::corrupt(format!("history@{revision}"), "its prev value is missing")
                })?;
                refs.drop_value(&list, prev)?;
                batch.remove(name);
                self.recent().remove(&(prev, key));
            }
            batch.remove(k);
        }
        self.finish_drop(batch, refs, compacted)
    }

    /// Applies a compaction's batch with its chunk counts and the compaction revision.
    fn finish_drop(
        &self,
        mut batch: sled::Batch,
        refs: Refs,
        compacted: Option<u64>,
    ) -> Result<()> {
        if let Some(compacted) = compacted {
            batch.insert(META_COMPACTED, &compacted.to_be_bytes());
        }
        let _counts = self.counts();
        refs.write(&self.db, &mut batch)?;
        self.db.apply_batch(batch).map_err(|e| sled_error("compact", e))
    }

    fn decode_record(&self, key: &str, bytes: &[u8]) -> Result<Record> {
        let (mut record, external) = decode_record(key, bytes)?;
        if external {
            record.value = self.value(record.modified, key)?;
        }
        Ok(record)
    }

    fn decode_event(&self, revision: u64, bytes: &[u8]) -> Result<WatchEvent> {
        decode_event(revision, bytes, |r, key| self.value(r, key))
    }

    fn recent(&self) -> std::sync::MutexGuard<'_, Recent> {
        self.recent.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The large value `key` got at `revision`: shared if written lately, else read back.
    fn value(&self, revision: u64, key: &str) -> Result<Bytes> {
        if let Some(value) = self.recent().get(revision, key) {
            return Ok(value);
        }
        chunked::read_value(&self.db, revision, key)
    }

    fn meta(&self, key: &[u8]) -> Result<u64> {
        match self.db.get(key).map_err(|e| sled_error("read", e))? {
            Some(v) => read_u64(&v, &String::from_utf8_lossy(key)),
            None => Ok(0),
        }
    }

    /// `fsync`s the blob files that are new or have grown since the last sync, the blob directory
    /// when it names a new file, and its parent at the first sync. Nothing changed: one
    /// directory read.
    fn sync_blobs(&self) -> std::io::Result<()> {
        let mut synced =
            self.synced_blobs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let entries = match std::fs::read_dir(&self.blob_dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        let first = synced.is_none();
        let known = synced.take().unwrap_or_default();
        let mut present = HashMap::with_capacity(known.len());
        let mut named_new = first;
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            // The length before the sync: whatever was written by then is durable after.
            let synced_now = entry.metadata().and_then(|m| {
                let len = m.len();
                if known.get(&name) != Some(&len) {
                    File::open(entry.path())?.sync_data()?;
                }
                Ok(len)
            });
            match synced_now {
                Ok(len) => {
                    named_new |= !known.contains_key(&name);
                    present.insert(name, len);
                }
                // sled removed a blob it no longer needs.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    // Keep what was synced before, so the next sync tries the rest again.
                    *synced = (!first).then_some(known);
                    return Err(e);
                }
            }
        }
        let dirs = (|| {
            if named_new {
                File::open(&self.blob_dir)?.sync_all()?;
            }
            match self.blob_dir.parent() {
                Some(parent) if first => File::open(parent)?.sync_all(),
                _ => Ok(()),
            }
        })();
        *synced = match dirs {
            Ok(()) => Some(present),
            Err(_) => (!first).then_some(known),
        };
        dirs
    }

    /// Reads the compaction revision and the history, which must hold every revision after it
    /// with no hole (one event, or one per key of a commit of several); the last of them is the
    /// store's revision.
    fn recover(&self) -> Result<Recovered> {
        let compacted = self.meta(META_COMPACTED)?;
        // Events at or below the compaction revision are garbage a failed deletion could leave
        // behind: nobody reads them; drop them now so they cannot pile up.
        if self.db.range(history_range(0, compacted)).next().is_some() {
            self.drop_events(0, compacted, None)?;
        }
        let mut times = Vec::new();
        let mut expected = compacted + 1;
        // Whether the revision before `expected` was a commit of several keys.
        let mut last_shared = false;
        for entry in self.db.range(history_range(compacted + 1, u64::MAX)) {
            let (k, v) = entry.map_err(|e| sled_error("scan", e))?;
            let (r, shared) = history_revision(&k)?;
            if r + 1 == expected && shared && last_shared {
                continue; // the next key of the same commit
            }
            if r != expected {
                return Err(Error::corrupt(
                    format!("history@{r}"),
                    format!("history holds revision {r} where {expected} was expected"),
                ));
            }
            let at_ms = read_u64(v.get(..8).unwrap_or_default(), "history time")?;
            times.push((r, at_ms));
            expected += 1;
            last_shared = shared;
        }
        Ok(Recovered { revision: expected - 1, compacted, times })
    }
}

/// A store whose restore did not finish holds only part of its keys: it is refused.
fn refuse_unfinished_restore(db: &sled::Db, path: &std::path::Path) -> Result<()> {
    if db.get(META_RESTORING).map_err(|e| sled_error("read", e))?.is_some() {
        return Err(Error::Restore {
            reason: format!(
                "the restore into {} did not finish: remove it and restore again",
                path.display()
            ),
        });
    }
    Ok(())
}

impl Sled {
    /// Restore: stores `records` in one batch, with no events. The records of a restore share
    /// one revision, so a large value is named by revision and key (`v<revision><key>`), as a
    /// commit of several keys names it.
    fn import_records(&self, records: &[(String, Record)]) -> Result<()> {
        let mut batch = sled::Batch::default();
        let mut refs = Refs::default();
        for (key, record) in records {
            let external = record.value.len() >= EXTERNAL_BYTES;
            if external {
                let list = refs.add_value(&record.value);
                batch.insert(chunked::value_key(record.modified, Some(key)), list);
            }
            batch.insert(data_key(key), encode_record(record, external));
        }
        batch.insert(META_RESTORING, &records.first().map_or(0, |(_, r)| r.modified).to_be_bytes());
        let _counts = self.counts();
        refs.write(&self.db, &mut batch)?;
        self.db.apply_batch(batch).map_err(|e| sled_error("restore", e))
    }
}

/// How long closing waits for sled's last flush.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

impl Drop for Sled {
    /// sled 0.34 flushes when its last handle goes and, once its files are gone (a data
    /// directory removed under a running hub), waits for that flush forever: a hub told to stop
    /// would never exit. The last flush runs on a thread of its own instead; one that does not
    /// finish within [`CLOSE_WAIT`] is given up (the thread keeps the handle). One that fails
    /// closes the handle anyway: sled fails at once on a handle whose write failed, and closing
    /// it lets the store be opened again in this process (the healing after a full disk does).
    /// What was acknowledged had been synced already.
    fn drop(&mut self) {
        let db = self.db.clone();
        let (done, finished) = std::sync::mpsc::channel();
        let closing = std::thread::Builder::new().name("sled-close".into()).spawn(move || {
            if let Err(e) = db.flush() {
                tracing::error!(error = %e, "sled: the last flush failed; closing without it");
            }
            drop(db);
            let _ = done.send(());
        });
        match closing {
            Ok(_) => {
                if finished.recv_timeout(CLOSE_WAIT).is_err() {
                    tracing::error!(
                        wait = ?CLOSE_WAIT,
                        "sled: the last flush did not finish; closing without it"
                    );
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "sled: no thread for the last flush; closing without it");
                std::mem::forget(self.db.clone());
            }
        }
    }
}

impl Backend for Sled {
    const SYNCS: bool = true;

    fn get(&self, key: &str) -> Result<Option<Record>> {
        match self.db.get(data_key(key)).map_err(|e| sled_error("read", e))? {
            Some(bytes) => self.decode_record(key, &bytes).map(Some),
            None => Ok(None),
        }
    }

    fn scan(&self, start: &str, end: &str, limit: usize) -> Result<Vec<(String, Record)>> {
        let mut out = Vec::new();
        for entry in self.db.range(data_key(start)..data_key(end)).take(limit) {
            let (k, v) = entry.map_err(|e| sled_error("scan", e))?;
            let key = std::str::from_utf8(&k[1..])
                .map_err(|_| Error::corrupt(String::from_utf8_lossy(&k), "key is not UTF-8"))?;
            out.push((key.to_owned(), self.decode_record(key, &v)?));
        }
        Ok(out)
    }

    fn count(&self, start: &str, end: &str) -> Result<u64> {
        let mut count = 0;
        for entry in self.db.range(data_key(start)..data_key(end)) {
            entry.map_err(|e| sled_error("scan", e))?;
            count += 1;
        }
        Ok(count)
    }

    fn history(&self, from: u64, to: u64) -> Result<Vec<Arc<WatchEvent>>> {
        let mut events = Vec::with_capacity((to - from + 1).min(4096) as usize);
        for entry in self.db.range(history_range(from, to)) {
            let (k, v) = entry.map_err(|e| sled_error("scan", e))?;
            let (revision, _) = history_revision(&k)?;
            events.push(Arc::new(self.decode_event(revision, &v)?));
        }
        Ok(events)
    }

    fn apply(&self, changes: &[Change<'_>]) -> Result<()> {
        let mut batch = sled::Batch::default();
        let mut refs = Refs::default();
        let shared_revisions = shared_revisions(changes);
        // Values this batch stores by content (a later write of the same batch may name one as
        // its `prev`).
        let mut stored: HashSet<ValueId> = HashSet::new();
        for change in changes {
            let name = &change.event.key;
            let revision = change.event.revision.0;
            let shared = shared_revisions.contains(&revision).then_some(name.as_str());
            let key = data_key(name);
            let external = change.record.is_some_and(|r| r.value.len() >= EXTERNAL_BYTES);
            match change.record {
                Some(record) if external => {
                    let list = refs.add_value(&record.value);
                    batch.insert(chunked::value_key(record.modified, shared), list);
                    stored.insert((record.modified, name.clone()));
                    batch.insert(key, encode_record(record, true));
                }
                Some(record) => batch.insert(key, encode_record(record, false)),
                None => batch.remove(key),
            }
            // A large `prev` is stored by content, unless a format-1 store wrote it inline.
            let prev_external = match &change.event.prev {
                Some(prev) if prev.value.len() >= EXTERNAL_BYTES => {
                    let at = prev.mod_revision.0;
                    stored.contains(&(at, name.clone()))
                        || chunked::find_list(&self.db, at, name)?.is_some()
                }
                _ => false,
            };
            let event = encode_event(change.event, change.at_ms, external, prev_external);
            batch.insert(history_key(revision, shared), event);
        }
        let counts = self.counts();
        refs.write(&self.db, &mut batch)?;
        self.db.apply_batch(batch).map_err(|e| sled_error("write", e))?;
        drop(counts);
        // Only once stored: a failed batch's revisions are given out again.
        let mut recent = self.recent();
        for change in changes {
            if let Some(record) = change.record.filter(|r| r.value.len() >= EXTERNAL_BYTES) {
                recent.insert((record.modified, change.event.key.clone()), record.value.clone());
            }
        }
        Ok(())
    }

    fn compact(&self, from: u64, to: u64) -> Result<()> {
        self.drop_events(from, to, Some(to))
    }

    fn import(&self, records: &[(String, Record)]) -> Result<()> {
        self.import_records(records)
    }

    fn finish_import(&self, at: u64) -> Result<()> {
        let mut batch = sled::Batch::default();
        batch.insert(META_COMPACTED, &at.to_be_bytes());
        batch.remove(META_RESTORING);
        self.db.apply_batch(batch).map_err(|e| sled_error("restore", e))
    }

    fn sync(&self) -> Result<()> {
        if self.ack_before_flush {
            return Ok(());
        }
        self.db.flush().map_err(|e| sled_error("flush", e))?;
        self.data_file.sync_data().map_err(|e| Error::unavailable("fdatasync of sled data", e))?;
        self.sync_blobs().map_err(|e| Error::unavailable("fsync of sled blobs", e))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::{Engine, EventKind, ListOptions, Preconditions, Revision, Storage};

    /// The sled database itself, bypassing the backend (to damage it on purpose).
    fn raw_open(path: &Path) -> sled::Db {
        open_waiting_for_lock(&sled::Config::new().path(path), path).unwrap()
    }

    async fn open_path(path: &Path) -> Storage {
        Storage::open(Engine::Sled(SledOptions::new(path))).await.unwrap()
    }

    /// A store whose directory is removed under it still closes (sled would wait for its
    /// last flush forever).
    #[tokio::test]
    async fn a_store_whose_directory_is_gone_still_closes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let store = open_path(&path).await;
        // Distinct values, so that sled writes many pages (and blob files for large ones).
        let value = |i: u64| Bytes::from(chunked::tests::noise(300_000, i));
        for i in 0..300 {
            store.create(&format!("/k/a{i}"), value(i)).await.unwrap();
        }
        // sled's own threads may add a file while the directory goes: remove it until it is gone.
        let mut tries = 0;
        while let Err(e) = std::fs::remove_dir_all(&path) {
            tries += 1;
            let racing = e.kind() == std::io::ErrorKind::DirectoryNotEmpty;
            assert!(racing && tries < 100, "removing {}: {e}", path.display());
        }
        // Writes after the removal fail (the store then refuses work) or are lost with it;
        // sled's own periodic flush meets the missing files meanwhile.
        for i in 0..50 {
            let _ = store.create(&format!("/k/b{i}"), value(1000 + i)).await;
        }
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        let (done, closed) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            drop(store);
            let _ = done.send(());
        });
        closed
            .recv_timeout(CLOSE_WAIT * 6)
            .expect("the store closes although its directory is gone");
    }

    /// A damaged record surfaces as `Corrupt` (never a panic), and the other keys still read.
    #[tokio::test]
    async fn corrupt_records_are_reported_not_panicked() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = open_path(dir.path()).await;
            store.create("/k/good", "fine").await.unwrap();
            store.create("/k/bad", "soon broken").await.unwrap();
        }
        {
            let db = raw_open(dir.path());
            db.insert(data_key("/k/bad"), &b"short"[..]).unwrap();
            db.flush().unwrap();
        }
        let store = open_path(dir.path()).await;
        assert!(matches!(store.get("/k/bad").await, Err(Error::Corrupt { .. })));
        assert!(matches!(store.list("/k/", &Default::default()).await, Err(Error::Corrupt { .. })));
        assert_eq!(store.get("/k/good").await.unwrap().value, "fine");
    }

    /// Events left below the compaction revision (a deletion that failed) are dropped at open
    /// instead of making the store refuse to open.
    #[tokio::test]
    async fn stranded_history_below_compaction_is_cleaned_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let stranded_event = {
            let store = open_path(dir.path()).await;
            for i in 0..6 {
                store.create(&format!("/k/{i}"), "v").await.unwrap();
            }
            store.compact(Revision(4)).await.unwrap();
            store.get("/k/0").await.unwrap()
        };
        {
            let db = raw_open(dir.path());
            let event = WatchEvent {
                kind: EventKind::Put,
                revision: Revision(2),
                key: "/k/x".into(),
                value: Bytes::from_static(b"stranded"),
                create_revision: Revision(2),
                prev: None,
            };
            db.insert(history_key(2, None), encode_event(&event, 0, false, false)).unwrap();
            db.flush().unwrap();
        }
        let store = open_path(dir.path()).await;
        assert_eq!(store.get("/k/0").await.unwrap(), stranded_event);
        assert_eq!(store.current_revision().await.unwrap(), Revision(6));
        drop(store);
        let db = raw_open(dir.path());
        assert_eq!(db.get(history_key(2, None)).unwrap(), None);
    }

    /// 300 KiB of letters from `seed`, then `tail`.
    fn large(seed: u64, tail: &str) -> Bytes {
        let mut v = chunked::tests::noise(300 * 1024, seed);
        v.extend_from_slice(tail.as_bytes());
        Bytes::from(v)
    }

    fn keys_with(db: &sled::Db, prefix: &[u8]) -> usize {
        db.scan_prefix(prefix).count()
    }

    /// Large values are stored once by content: 40 keys holding nearly the same 300 KiB value
    /// through creates, updates and a delete keep one copy of what they share; every read
    /// (current, at a past revision, the history, after reopening) returns the exact bytes; and
    /// compacting past the last holder frees every chunk, count and list.
    #[tokio::test]
    async fn large_values_are_stored_once_and_freed_by_compaction() {
        let dir = tempfile::tempdir().unwrap();
        let before_updates;
        {
            let store = open_path(dir.path()).await;
            for i in 0..40 {
                store.create(&format!("/w/{i}"), large(9, &format!("create {i}"))).await.unwrap();
            }
            before_updates = store.current_revision().await.unwrap();
            for i in 0..40 {
                let key = format!("/w/{i}");
                let current = store.get(&key).await.unwrap();
                store
                    .update(&key, large(9, &format!("update {i}")), current.mod_revision)
                    .await
                    .unwrap();
            }
            store.delete("/w/0", &Preconditions::default()).await.unwrap();
            store.create("/small", "inline").await.unwrap();
        }
        let store = open_path(dir.path()).await;
        assert!(store.get("/w/7").await.unwrap().value == large(9, "update 7"));
        assert!(matches!(store.get("/w/0").await, Err(Error::NotFound { .. })));
        let past = ListOptions { revision: Some(before_updates), ..Default::default() };
        let old = store.list("/w/", &past).await.unwrap();
        assert_eq!(old.items.len(), 40);
        for item in &old.items {
            let i = item.key.trim_start_matches("/w/");
            assert!(item.value == large(9, &format!("create {i}")), "{}", item.key);
        }
        let mut watch = store.watch("/w/", before_updates).await.unwrap();
        let first = futures::StreamExt::next(&mut watch).await.unwrap().unwrap();
        let event = &first;
        let (value, prev) = (&event.value, &event.prev.as_ref().unwrap().value);
        assert!(*value == large(9, "update 0"), "the event's value");
        assert!(*prev == large(9, "create 0"), "the event's prev");
        drop(watch);
        let now = store.current_revision().await.unwrap();
        drop(store);
        {
            let db = raw_open(dir.path());
            // 80 large values written (40 creates, 40 updates), all still needed by a record or an
            // event; their chunks are the shared 300 KiB once, plus a few per value.
            assert_eq!(keys_with(&db, b"v"), 80);
            let chunk_bytes: usize = db.scan_prefix(b"c").values().map(|v| v.unwrap().len()).sum();
            // (Each value's own last chunk is at most 32 KiB; unshared it would be 24 MB.)
            assert!(chunk_bytes < 300 * 1024 + 80 * 33 * 1024, "{chunk_bytes} bytes of chunks");
        }
        let store = open_path(dir.path()).await;
        for i in 1..40 {
            store.delete(&format!("/w/{i}"), &Preconditions::default()).await.unwrap();
        }
        store.compact(Revision(now.0 + 39)).await.unwrap();
        drop(store);
        let db = raw_open(dir.path());
        for prefix in [&b"v"[..], b"c", b"r"] {
            assert_eq!(keys_with(&db, prefix), 0, "{:?} keys left", prefix);
        }
    }

    /// A large key created and updated in one batch (the update queued before the create is
    /// applied) names the create's value as its `prev`, stored by the same batch; deleting and
    /// compacting frees both.
    #[tokio::test]
    async fn a_large_key_written_twice_in_one_batch_is_freed() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_path(dir.path()).await;
        let next = Revision(store.current_revision().await.unwrap().0 + 1);
        let (created, updated) = tokio::join!(
            store.create("/w/a", large(5, "first")),
            store.update("/w/a", large(5, "second"), next),
        );
        assert_eq!(created.unwrap().mod_revision, next);
        let updated = updated.unwrap();
        let mut watch = store.watch("/w/", next).await.unwrap();
        let event = futures::StreamExt::next(&mut watch).await.unwrap().unwrap();
        assert!(event.prev.as_ref().unwrap().value == large(5, "first"), "the update's prev");
        drop(watch);
        let deleted = store.delete("/w/a", &Preconditions::default()).await.unwrap();
        assert!(deleted.revision > updated.mod_revision);
        store.compact(deleted.revision).await.unwrap();
        drop(store);
        let db = raw_open(dir.path());
        for prefix in [&b"v"[..], b"c", b"r", b"d", b"h"] {
            assert_eq!(keys_with(&db, prefix), 0, "{:?} keys left", prefix);
        }
    }

    /// A commit of several large keys stores each value once, named by revision and key; they
    /// read back (current, in the history, after reopening), a second commit names them as its
    /// `prev`s, and deleting and compacting frees every list, chunk and event.
    #[tokio::test]
    async fn a_commit_of_several_large_keys_is_stored_by_key_and_freed() {
        use crate::{Write, Written};
        let dir = tempfile::tempdir().unwrap();
        let keys = ["/w/a", "/w/b", "/w/c"];
        let first = {
            let store = open_path(dir.path()).await;
            let writes = keys
                .iter()
                .map(|k| Write::Create { key: (*k).to_owned(), value: large(3, k) })
                .collect();
            store.commit(writes).await.unwrap().revision
        };
        {
            let db = raw_open(dir.path());
            assert_eq!(keys_with(&db, b"v"), 3, "one value list per key of the commit");
            assert_eq!(keys_with(&db, b"h"), 3, "one event per key of the commit");
        }
        let store = open_path(dir.path()).await;
        assert_eq!(store.current_revision().await.unwrap(), first);
        for k in keys {
            assert!(store.get(k).await.unwrap().value == large(3, k), "{k}");
        }
        let writes = keys
            .iter()
            .map(|k| Write::Update {
                key: (*k).to_owned(),
                value: large(3, &format!("{k} again")),
                expected: first,
            })
            .collect();
        let second = store.commit(writes).await.unwrap();
        assert!(
            matches!(&second.written[0], Written::Put(kv) if kv.mod_revision == second.revision)
        );
        let mut watch = store.watch("/w/", first).await.unwrap();
        for k in keys {
            let event = futures::StreamExt::next(&mut watch).await.unwrap().unwrap();
            assert_eq!((event.key.as_str(), event.revision), (k, second.revision));
            assert!(event.prev.as_ref().unwrap().value == large(3, k), "{k}'s prev");
        }
        drop(watch);
        let deletes = keys
            .iter()
            .map(|k| Write::Delete { key: (*k).to_owned(), expected: second.revision })
            .collect();
        let gone = store.commit(deletes).await.unwrap();
        store.compact(gone.revision).await.unwrap();
        drop(store);
        let db = raw_open(dir.path());
        for prefix in [&b"v"[..], b"c", b"r", b"d", b"h"] {
            assert_eq!(keys_with(&db, prefix), 0, "{:?} keys left", prefix);
        }
    }

    /// A database of format 1 (large values inline) opens, is marked format 3, reads as it was,
    /// and its inline large values are updated and compacted without leaving anything behind.
    #[tokio::test]
    async fn format_1_databases_open_and_keep_working() {
        let dir = tempfile::tempdir().unwrap();
        let value = large(4, "old");
        {
            let db = raw_open(dir.path());
            db.insert(META_FORMAT, FORMAT_1).unwrap();
            let record = Record { create: 1, modified: 1, value: value.clone() };
            db.insert(data_key("/k/a"), encode_record(&record, false)).unwrap();
            let event = WatchEvent {
                kind: EventKind::Put,
                revision: Revision(1),
                key: "/k/a".into(),
                value: value.clone(),
                create_revision: Revision(1),
                prev: None,
            };
            db.insert(history_key(1, None), encode_event(&event, 0, false, false)).unwrap();
            db.flush().unwrap();
        }
        let store = open_path(dir.path()).await;
        assert!(store.get("/k/a").await.unwrap().value == value);
        store.update("/k/a", large(4, "new"), Revision(1)).await.unwrap();
        let mut events = store.watch("/k/", Revision(1)).await.unwrap();
        let first = futures::StreamExt::next(&mut events).await.unwrap().unwrap();
        assert!(first.prev.as_ref().unwrap().value == value, "the inline prev");
        drop(events);
        store.delete("/k/a", &Preconditions::default()).await.unwrap();
        store.compact(Revision(3)).await.unwrap();
        drop(store);
        let db = raw_open(dir.path());
        assert_eq!(db.get(META_FORMAT).unwrap().unwrap(), FORMAT);
        for prefix in [&b"v"[..], b"c", b"r", b"d", b"h"] {
            assert_eq!(keys_with(&db, prefix), 0, "{:?} keys left", prefix);
        }
    }

    /// A store in a newer release's format is refused with both format numbers, and left as
    /// it was; an unknown marker is `Corrupt`.
    #[tokio::test]
    async fn a_newer_format_is_refused_and_left_alone() {
        assert_eq!(format!("{FORMAT_PREFIX}{FORMAT_NUMBER}").as_bytes(), FORMAT);
        let dir = tempfile::tempdir().unwrap();
        drop(open_path(dir.path()).await);
        {
            let db = raw_open(dir.path());
            db.insert(META_FORMAT, &b"ocm-storage/sled/4"[..]).unwrap();
            db.flush().unwrap();
        }
        let refused = Storage::open(Engine::Sled(SledOptions::new(dir.path()))).await;
        let Err(err) = refused else { panic!("a newer format is refused") };
        assert!(matches!(err, Error::NewerFormat { found: 4, supported: 3 }), "{err:?}");
        assert!(!err.to_string().contains('\n'), "one line: {err}");
        let db = raw_open(dir.path());
        assert_eq!(db.get(META_FORMAT).unwrap().unwrap(), &b"ocm-storage/sled/4"[..]);
        db.insert(META_FORMAT, &b"something else"[..]).unwrap();
        db.flush().unwrap();
        drop(db);
        let refused = Storage::open(Engine::Sled(SledOptions::new(dir.path()))).await;
        assert!(matches!(refused.err(), Some(Error::Corrupt { .. })));
    }

    /// Every file under `dir` and its bytes.
    fn files(dir: &Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
        let mut out = std::collections::BTreeMap::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                out.extend(files(&path));
            } else {
                out.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
        out
    }

    /// A store whose marker file names a newer format (as a newer release writes it, the tree
    /// marked alike) is refused before sled opens it: every file stays byte for byte as it was.
    #[tokio::test]
    async fn a_newer_format_marked_beside_the_tree_is_refused_untouched() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = open_path(dir.path()).await;
            store.create("/k/a", "kept").await.unwrap();
        }
        assert_eq!(std::fs::read(dir.path().join("format")).unwrap(), b"ocm-storage/sled/3\n");
        {
            let db = raw_open(dir.path());
            db.insert(META_FORMAT, &b"ocm-storage/sled/9"[..]).unwrap();
            db.flush().unwrap();
        }
        std::fs::write(dir.path().join("format"), "ocm-storage/sled/9\n").unwrap();
        let before = files(dir.path());
        let refused = Storage::open(Engine::Sled(SledOptions::new(dir.path()))).await;
        let Err(err) = refused else { panic!("a newer format is refused") };
        assert!(matches!(err, Error::NewerFormat { found: 9, supported: 3 }), "{err:?}");
        assert!(files(dir.path()) == before, "the refused store's files changed");
    }

    /// A history with a hole is refused at open with `Corrupt`.
    #[tokio::test]
    async fn broken_history_is_refused_at_open() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = open_path(dir.path()).await;
            for i in 0..3 {
                store.create(&format!("/k/{i}"), "v").await.unwrap();
            }
        }
        {
            let db = raw_open(dir.path());
            db.remove(history_key(2, None)).unwrap();
            db.flush().unwrap();
        }
        let err = Storage::open(Engine::Sled(SledOptions::new(dir.path()))).await.unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    }
}
