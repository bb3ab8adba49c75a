//! `ocm-hub backup` and `ocm-hub restore`: a running hub's store at one revision, streamed from
//! its `/ocm/v1/backup` (`serve/rest/backup.rs`) with the data dir's `admin.kubeconfig`, plus the
//! hub's identity (`pki/`) read from the data dir, so private keys never cross the wire; and a
//! new data dir (and store: sled, or an etcd prefix) made from such a file.
//!
//! A backup is written to a temporary name beside the target, private (0600) from its
//! creation, and renamed only once complete and synced. A restore reads the file twice: first
//! its length and checksum against the header (a truncated or damaged file is refused before
//! anything is created), then its frames into the new store.

use std::io::{BufReader, BufWriter, Read as _, Seek as _, Write as _};
use std::path::Path;

use bytes::Bytes;
use futures::AsyncReadExt as _;
use ocm_storage::{Engine, EtcdOptions, Revision, SledOptions, Storage};
use sha2::Digest as _;

use super::admin::{CliError, client};
use crate::auth::identity::{self, IdentityFile, create_private, create_private_dir, sync_dir};
use crate::machinery::backup::{End, FORMAT, Frame, HEADER_BYTES, Header, PATH, hex};
use crate::machinery::scheme::{Profile, Scheme};

/// How far past the backup's revision a restored store starts by default: more than a hub
/// writes in weeks, so revisions clients saw from the original after the backup was taken are
/// still below it (etcd's documented restore for Kubernetes bumps by the same).
pub const DEFAULT_BUMP_REVISION: u64 = 1_000_000_000;

/// Keys handed to the store at a time while restoring, and the bytes they may hold.
const RESTORE_BATCH_KEYS: usize = 2048;
const RESTORE_BATCH_BYTES: usize = 8 << 20;

/// What a backup wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The store's revision the keys were read at.
    pub revision: u64,
    /// The backend the hub serves from.
    pub backend: String,
    /// Keys written.
    pub objects: u64,
    /// Identity files written.
    pub files: u64,
    /// The file's length.
    pub bytes: u64,
}

/// Where a restore puts the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// sled, in `DATA_DIR/db` (as `ocm-hub serve` opens it).
    Sled,
    /// etcd at these endpoints, under the hub's prefix.
    Etcd(Vec<String>),
}

/// What a restore made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// The backup's revision.
    pub backup_revision: u64,
    /// The restored store's revision (its compaction point).
    pub revision: u64,
    /// Keys restored.
    pub objects: u64,
    /// Identity files restored.
    pub files: u64,
}

fn usage(what: impl std::fmt::Display) -> CliError {
    CliError::Usage(what.to_string())
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CliError + '_ {
    move |e| usage(format!("{}: {e}", path.display()))
}

/// The frame at `at` of `reader` and its bytes as read; `None` at a clean end between frames.
/// What is wrong is said without naming where the bytes come from.
async fn next_frame(
    reader: &mut (impl futures::AsyncRead + Unpin),
    at: u64,
) -> Result<Option<(Frame, Bytes)>, String> {
    let mut head = [0u8; 5];
    let mut got = 0;
    while got < head.len() {
        let n = reader.read(&mut head[got..]).await.map_err(|e| e.to_string())?;
        if n == 0 {
            if got == 0 {
                return Ok(None);
            }
            return Err(format!("it ends inside the frame at byte {at}"));
        }
        got += n;
    }
    let len = Frame::payload_len(&head, at).map_err(|e| e.to_string())?;
    let mut raw = vec![0u8; 5 + len];
    raw[..5].copy_from_slice(&head);
    reader.read_exact(&mut raw[5..]).await.map_err(|e| format!("the frame at byte {at}: {e}"))?;
    let raw = Bytes::from(raw);
    let frame = Frame::decode(head[0], raw.slice(5..), at).map_err(|e| e.to_string())?;
    Ok(Some((frame, raw)))
}

fn hub_stream(what: impl std::fmt::Display) -> CliError {
    CliError::HubState(format!("the hub's backup stream: {what}"))
}

/// `ocm-hub backup --to FILE`: streams the running hub's store (found through
/// `data_dir/admin.kubeconfig`) into FILE, with the identity under `data_dir/pki`.
pub async fn backup(data_dir: &Path, to: &Path) -> Result<Written, CliError> {
    if to.is_dir() {
        return Err(usage(format!(
            "{} is a directory; --to names the file to write",
            to.display()
        )));
    }
    let identity = identity::read(data_dir)?
        .into_iter()
        .map(|f| Frame::File { name: f.name, mode: f.mode, contents: f.contents })
        .collect();
    let client = client(data_dir).await?;
    let name = to.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let partial = to.with_file_name(format!(".{name}.{}.partial", std::process::id()));
    let file = create_private(&partial).map_err(io(&partial))?;
    let written = write_backup(file, &client, identity, to).await.and_then(|written| {
        std::fs::rename(&partial, to).map_err(io(to))?;
        sync_dir(to);
        Ok(written)
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    written
}

/// Writes the header's room, the hub's stream of keys, the identity files and the end into
/// `file`, then the header; syncs it.
async fn write_backup(
    mut file: std::fs::File,
    client: &kube::Client,
    identity: Vec<Frame>,
    to: &Path,
) -> Result<Written, CliError> {
    let request = http::Request::get(PATH).body(Vec::new()).map_err(usage)?;
    let mut stream = client.request_stream(request).await?;
    let mut out = BufWriter::with_capacity(1 << 20, &mut file);
    out.write_all(&[b' '; HEADER_BYTES]).map_err(io(to))?;
    let mut sha = sha2::Sha256::new();
    let mut body = 0u64;
    let mut write = |out: &mut BufWriter<_>, bytes: &[u8]| -> Result<(), CliError> {
        sha.update(bytes);
        body += bytes.len() as u64;
        out.write_all(bytes).map_err(io(to))
    };
    let first = next_frame(&mut stream, 0).await.map_err(hub_stream)?;
    let Some((Frame::Start(start), raw)) = first else {
        return Err(hub_stream("it does not start with its revision"));
    };
    if start.format != FORMAT {
        return Err(hub_stream(format!(
            "it is in format {:?}; this ocm-hub writes {FORMAT:?}: use the hub's own release",
            start.format
        )));
    }
    let mut at = raw.len() as u64;
    let mut objects = 0u64;
    loop {
        let Some((frame, raw)) = next_frame(&mut stream, at).await.map_err(hub_stream)? else {
            return Err(hub_stream("it ended early"));
        };
        at += raw.len() as u64;
        match frame {
            Frame::Key { .. } => {
                objects += 1;
                write(&mut out, &raw)?;
            }
            Frame::End(end) if end.objects == objects && end.revision == start.revision => break,
            Frame::End(end) => {
                return Err(hub_stream(format!(
                    "it ended with {} keys at revision {}, after {objects} keys at revision {}",
                    end.objects, end.revision, start.revision
                )));
            }
            Frame::Failed(reason) => {
                return Err(CliError::HubState(format!("the hub failed the backup: {reason}")));
            }
            _ => return Err(hub_stream(format!("an unexpected frame at byte {at}"))),
        }
    }
    let files = identity.len() as u64;
    for frame in identity {
        write(&mut out, &frame.encode())?;
    }
    let end = End { revision: start.revision, objects, files };
    write(&mut out, &Frame::End(end).encode())?;
    out.flush().map_err(io(to))?;
    drop(out);
    let header = Header {
        format: FORMAT.to_owned(),
        revision: start.revision,
        backend: start.backend.clone(),
        objects,
        files,
        bytes: body,
        sha256: hex(&sha.finalize()),
        created: crate::machinery::object::now_rfc3339(),
    };
    let line = header.encode().map_err(|e| usage(e.to_string()))?;
    file.seek(std::io::SeekFrom::Start(0)).map_err(io(to))?;
    file.write_all(&line).map_err(io(to))?;
    file.sync_all().map_err(io(to))?;
    Ok(Written {
        revision: start.revision,
        backend: start.backend,
        objects,
        files,
        bytes: HEADER_BYTES as u64 + body,
    })
}

/// Checks a backup file whole: its header, its length and its checksum. Every problem is
/// one line naming the file.
pub fn verify(from: &Path) -> Result<Header, CliError> {
    let damaged =
        |what: String| usage(format!("{} is not a usable backup: {what}", from.display()));
    let mut file = std::fs::File::open(from).map_err(io(from))?;
    let length = file.metadata().map_err(io(from))?.len();
    let mut line = vec![0u8; HEADER_BYTES];
    let mut got = 0;
    while got < HEADER_BYTES {
        match file.read(&mut line[got..]).map_err(io(from))? {
            0 => break,
            n => got += n,
        }
    }
    line.truncate(got);
    let header = Header::decode(&line).map_err(|e| damaged(e.to_string()))?;
    let expected = HEADER_BYTES as u64 + header.bytes;
    if length < expected {
        return Err(damaged(format!("it is truncated ({length} of {expected} bytes)")));
    }
    if length > expected {
        return Err(damaged(format!(
            "it has {} bytes more than its header says",
            length - expected
        )));
    }
    let mut sha = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match file.read(&mut buf).map_err(io(from))? {
            0 => break,
            n => sha.update(&buf[..n]),
        }
    }
    if hex(&sha.finalize()) != header.sha256 {
        return Err(damaged("it is damaged (its checksum does not match)".to_owned()));
    }
    Ok(header)
}

/// Whether `dir` is absent or an empty directory (a restore makes a new data dir).
fn check_new_dir(dir: &Path) -> Result<bool, CliError> {
    match std::fs::read_dir(dir).map(|mut entries| entries.next().is_none()) {
        Ok(true) => Ok(false),
        Ok(false) => Err(usage(format!(
            "{} is not empty: restore makes a new data dir and overwrites nothing",
            dir.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(usage(format!("{}: {e}", dir.display()))),
    }
}

/// `ocm-hub restore --from FILE --data-dir DIR`: a new data dir (and store) from a backup. The
/// store starts `bump` revisions past the backup's; see [`DEFAULT_BUMP_REVISION`].
pub async fn restore(
    from: &Path,
    data_dir: &Path,
    target: &Target,
    bump: u64,
) -> Result<Restored, CliError> {
    let created = check_new_dir(data_dir)?;
    let header = verify(from)?;
    create_private_dir(data_dir).map_err(io(data_dir))?;
    let restored = restore_into(from, data_dir, target, bump, &header).await;
    if restored.is_err() {
        // Nothing half made is left to be served: the data dir goes (or is emptied again).
        if created {
            let _ = std::fs::remove_dir_all(data_dir);
        } else if let Ok(entries) = std::fs::read_dir(data_dir) {
            for entry in entries.flatten() {
                let _ = std::fs::remove_dir_all(entry.path())
                    .or_else(|_| std::fs::remove_file(entry.path()));
            }
        }
    }
    restored
}

async fn restore_into(
    from: &Path,
    data_dir: &Path,
    target: &Target,
    bump: u64,
    header: &Header,
) -> Result<Restored, CliError> {
    let engine = match target {
        Target::Sled => Engine::Sled(SledOptions::new(data_dir.join("db"))),
        Target::Etcd(endpoints) => {
            Engine::Etcd(EtcdOptions::new(endpoints.clone(), crate::serve::server::ETCD_PREFIX))
        }
    };
    let after = Revision(header.revision.saturating_add(bump));
    let mut restore = match Storage::restore(engine, after).await {
        Ok(r) => r,
        Err(e @ ocm_storage::Error::NotEmpty { .. }) => return Err(usage(e)),
        Err(e) => return Err(CliError::HubState(format!("the store: {e}"))),
    };
    let stored = |e: ocm_storage::Error| {
        let hint = match target {
            Target::Etcd(_) => format!(
                " (etcd keeps what was written: delete it with etcdctl del --prefix {:?} before \
                 trying again)",
                crate::serve::server::ETCD_PREFIX
            ),
            Target::Sled => String::new(),
        };
        CliError::HubState(format!("restoring: {e}{hint}"))
    };
    let mut file = BufReader::with_capacity(1 << 20, std::fs::File::open(from).map_err(io(from))?);
    file.seek_relative(HEADER_BYTES as i64).map_err(io(from))?;
    let mut reader = futures::io::AllowStdIo::new(file);
    let damaged =
        |what: String| usage(format!("{} is not a usable backup: {what}", from.display()));
    let (mut batch, mut batch_bytes) = (Vec::new(), 0usize);
    let (mut objects, mut identity, mut at) = (0u64, Vec::new(), 0u64);
    let election = crate::controllers::leader::lease_key(&Scheme::new(Profile::Hub));
    let end = loop {
        let Some((frame, raw)) = next_frame(&mut reader, at).await.map_err(damaged)? else {
            return Err(damaged("it ends without its last frame".into()));
        };
        at += raw.len() as u64;
        match frame {
            // The backed-up hub's leader held the election's Lease; no replica of the restored
            // hub does, so it is left out and the first replica leads at once.
            Frame::Key { key, .. } if key == election => objects += 1,
            Frame::Key { key, value, .. } => {
                objects += 1;
                batch_bytes += key.len() + value.len();
                batch.push((key, value));
                if batch.len() >= RESTORE_BATCH_KEYS || batch_bytes >= RESTORE_BATCH_BYTES {
                    restore.put(std::mem::take(&mut batch)).await.map_err(stored)?;
                    batch_bytes = 0;
                }
            }
            Frame::File { name, mode, contents } => {
                identity.push(IdentityFile { name, mode, contents });
            }
            Frame::End(end) => break end,
            _ => return Err(damaged(format!("an unexpected frame at byte {at}"))),
        }
    };
    let expected = End { revision: header.revision, objects: header.objects, files: header.files };
    if end != expected || objects != header.objects || identity.len() as u64 != header.files {
        return Err(damaged("its contents do not match its header".into()));
    }
    restore.put(batch).await.map_err(stored)?;
    let (storage, revision) = restore.finish().await.map_err(stored)?;
    drop(storage);
    identity::write(data_dir, &identity)?;
    Ok(Restored {
        backup_revision: header.revision,
        revision: revision.get(),
        objects,
        files: identity.len() as u64,
    })
}
