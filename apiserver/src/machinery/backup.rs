//! The backup format, shared by the hub's backup stream (`serve/rest/backup.rs`) and the
//! `ocm-hub backup` / `restore` commands (`cli/backup.rs`): frames, and the file's header.
//!
//! A **frame** is a tag byte, a big-endian `u32` length and that many bytes:
//! * `S` (start, JSON [`Start`]): the revision every key was read at and the backend;
//! * `K` (key): `u32` key length, the key, the `u64` revision it was last written at in the
//!   original store (for inspection: a restore writes every key anew), the value;
//! * `F` (file of the hub's identity, under `pki/`): `u16` name length, the name, `u32` mode,
//!   the contents;
//! * `E` (end, JSON [`End`]): the counts, which must match what came before;
//! * `X` (the hub failed while streaming): the reason, as text.
//!
//! The hub streams `S`, the `K` frames in key order, then `E` (or `X`). A **file** is a
//! header line ([`Header`], JSON padded with spaces to [`HEADER_BYTES`]) and then a body of
//! the `K` frames as the hub sent them, the `F` frames, and `E`; the header names the body's
//! length and SHA-256, so a truncated or damaged file is refused before anything is restored.

use bytes::{BufMut as _, Bytes, BytesMut};
use serde::{Deserialize, Serialize};

/// The format this build writes and reads.
pub const FORMAT: &str = "ocm-hub-backup/1";

/// The path of the hub's backup stream: a non-resource URL, so only `system:masters` or a
/// granted `get` on it may read it.
pub const PATH: &str = "/ocm/v1/backup";

/// The media type of the hub's backup stream.
pub const CONTENT_TYPE: &str = "application/vnd.ocm-hub.backup";

/// The length of a file's header line, newline included.
pub const HEADER_BYTES: usize = 1024;

/// The largest frame read: a value at the store's limit, its key and room for the rest
/// (a damaged length must not make a reader allocate gigabytes).
pub const MAX_FRAME_BYTES: usize = ocm_storage::MAX_VALUE_BYTES + 64 * 1024;

/// The hub stream's first frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Start {
    /// [`FORMAT`].
    pub format: String,
    /// The store's revision the keys were read at.
    pub revision: u64,
    /// The backend the hub serves from: `memory`, `sled` or `etcd`.
    pub backend: String,
}

/// The last frame, of the hub's stream and of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct End {
    /// The revision the keys were read at.
    pub revision: u64,
    /// How many `K` frames came before.
    pub objects: u64,
    /// How many `F` frames came before (0 in the hub's stream).
    pub files: u64,
}

/// A file's first line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// [`FORMAT`].
    pub format: String,
    /// The revision the keys were read at.
    pub revision: u64,
    /// The backend the hub served from.
    pub backend: String,
    /// Keys in the file.
    pub objects: u64,
    /// Files of the hub's identity in the file.
    pub files: u64,
    /// The body's length (everything after the header line).
    pub bytes: u64,
    /// The body's SHA-256, in lowercase hex.
    pub sha256: String,
    /// The time of the backup's snapshot (RFC 3339).
    pub created: String,
}

/// What a reader found wrong.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FormatError {
    /// The header line is not one this build reads.
    #[error("its header is unreadable ({0})")]
    Header(String),
    /// A frame is cut short or its bytes contradict its kind.
    #[error("a frame at byte {at} is malformed: {what}")]
    Frame {
        /// Where the frame starts, from the start of the stream or body.
        at: u64,
        /// What is wrong.
        what: String,
    },
}

/// One frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// The hub stream's start.
    Start(Start),
    /// A key, the revision it was last written at, its value.
    Key {
        /// The storage key.
        key: String,
        /// Its mod revision in the original store.
        revision: u64,
        /// Its value.
        value: Bytes,
    },
    /// A file of the hub's identity.
    File {
        /// Its name under `pki/`.
        name: String,
        /// Its permission bits.
        mode: u32,
        /// Its contents.
        contents: Bytes,
    },
    /// The end.
    End(End),
    /// The hub failed while streaming.
    Failed(String),
}

impl Frame {
    /// Appends the frame's bytes to `out`.
    pub fn encode_into(&self, out: &mut BytesMut) {
        let json = match self {
            Frame::Start(start) => serde_json::to_vec(start).expect("plain structs serialize"),
            Frame::End(end) => serde_json::to_vec(end).expect("plain structs serialize"),
            _ => Vec::new(),
        };
        let (tag, payload_len) = match self {
            Frame::Start(_) => (b'S', json.len()),
            Frame::Key { key, value, .. } => (b'K', 4 + key.len() + 8 + value.len()),
            Frame::File { name, contents, .. } => (b'F', 2 + name.len() + 4 + contents.len()),
            Frame::End(_) => (b'E', json.len()),
            Frame::Failed(reason) => (b'X', reason.len()),
        };
        out.reserve(5 + payload_len);
        out.put_u8(tag);
        // Keys, names and values are far below 4 GiB (the store's and the file system's limits).
        out.put_u32(payload_len as u32);
        match self {
            Frame::Start(_) | Frame::End(_) => out.put_slice(&json),
            Frame::Key { key, revision, value } => {
                out.put_u32(key.len() as u32);
                out.put_slice(key.as_bytes());
                out.put_u64(*revision);
                out.put_slice(value);
            }
            Frame::File { name, mode, contents } => {
                out.put_u16(name.len() as u16);
                out.put_slice(name.as_bytes());
                out.put_u32(*mode);
                out.put_slice(contents);
            }
            Frame::Failed(reason) => out.put_slice(reason.as_bytes()),
        }
    }

    /// The frame's bytes.
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::new();
        self.encode_into(&mut out);
        out.freeze()
    }

    /// The payload length a frame head (5 bytes) announces, checked against
    /// [`MAX_FRAME_BYTES`]; `at` says where the frame starts, for the error.
    pub fn payload_len(head: &[u8; 5], at: u64) -> Result<usize, FormatError> {
        let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        if len > MAX_FRAME_BYTES {
            return Err(FormatError::Frame { at, what: format!("a length of {len} bytes") });
        }
        Ok(len)
    }

    /// Decodes one frame from its tag and payload; `at` says where it starts.
    pub fn decode(tag: u8, payload: Bytes, at: u64) -> Result<Frame, FormatError> {
        let json_err = |e: serde_json::Error| FormatError::Frame { at, what: e.to_string() };
        let mut p = Payload { rest: payload, at };
        match tag {
            b'S' => serde_json::from_slice(&p.rest).map(Frame::Start).map_err(json_err),
            b'E' => serde_json::from_slice(&p.rest).map(Frame::End).map_err(json_err),
            b'K' => {
                let len = u32::from_be_bytes(p.array("a key length")?) as usize;
                let key = p.text(len, "a key")?;
                let revision = u64::from_be_bytes(p.array("a revision")?);
                Ok(Frame::Key { key, revision, value: p.rest })
            }
            b'F' => {
                let len = u16::from_be_bytes(p.array("a name length")?) as usize;
                let name = p.text(len, "a name")?;
                let mode = u32::from_be_bytes(p.array("a mode")?);
                Ok(Frame::File { name, mode, contents: p.rest })
            }
            b'X' => Ok(Frame::Failed(String::from_utf8_lossy(&p.rest).into_owned())),
            other => Err(p.bad(&format!("an unknown tag {other:#04x}"))),
        }
    }
}

/// A frame's payload read from the front.
struct Payload {
    rest: Bytes,
    at: u64,
}

impl Payload {
    fn bad(&self, what: &str) -> FormatError {
        FormatError::Frame { at: self.at, what: what.to_owned() }
    }

    fn take(&mut self, n: usize, what: &str) -> Result<Bytes, FormatError> {
        if self.rest.len() < n {
            return Err(self.bad(&format!("{what} cut short")));
        }
        Ok(self.rest.split_to(n))
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], FormatError> {
        let bytes = self.take(N, what)?;
        let mut out = [0; N];
        out.copy_from_slice(&bytes);
        Ok(out)
    }

    fn text(&mut self, n: usize, what: &str) -> Result<String, FormatError> {
        let bytes = self.take(n, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| self.bad(&format!("{what} not in UTF-8")))
    }
}

impl Header {
    /// The header line: its JSON padded with spaces to [`HEADER_BYTES`], ending in a newline.
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        let mut line = serde_json::to_vec(self).map_err(|e| FormatError::Header(e.to_string()))?;
        if line.len() >= HEADER_BYTES {
            return Err(FormatError::Header(format!("{} bytes of header", line.len())));
        }
        line.resize(HEADER_BYTES - 1, b' ');
        line.push(b'\n');
        Ok(line)
    }

    /// Reads a header line (the first [`HEADER_BYTES`] of a file).
    pub fn decode(line: &[u8]) -> Result<Header, FormatError> {
        let bad = |what: &str| FormatError::Header(what.to_owned());
        if line.len() != HEADER_BYTES || line[HEADER_BYTES - 1] != b'\n' {
            return Err(bad("not an ocm-hub backup"));
        }
        let header: Header = serde_json::from_slice(&line[..HEADER_BYTES - 1])
            .map_err(|_| bad("not an ocm-hub backup, or a damaged one"))?;
        if header.format != FORMAT {
            return Err(FormatError::Header(format!(
                "format {:?}; this build reads {FORMAT:?}",
                header.format
            )));
        }
        Ok(header)
    }
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(frame: Frame) {
        let bytes = frame.encode();
        let head: [u8; 5] = bytes[..5].try_into().unwrap();
        let len = Frame::payload_len(&head, 0).unwrap();
        assert_eq!(len, bytes.len() - 5);
        assert_eq!(Frame::decode(head[0], bytes.slice(5..), 0).unwrap(), frame);
    }

    #[test]
    fn frames_round_trip() {
        round_trip(Frame::Start(Start {
            format: FORMAT.into(),
            revision: 7,
            backend: "sled".into(),
        }));
        round_trip(Frame::Key {
            key: "/registry/configmaps/default/a".into(),
            revision: 42,
            value: Bytes::from_static(b"{\"kind\":\"ConfigMap\"}"),
        });
        round_trip(Frame::Key { key: "/k".into(), revision: 1, value: Bytes::new() });
        round_trip(Frame::File {
            name: "ca.key".into(),
            mode: 0o600,
            contents: Bytes::from_static(b"k"),
        });
        round_trip(Frame::End(End { revision: 7, objects: 2, files: 1 }));
        round_trip(Frame::Failed("compacted".into()));
    }

    #[test]
    fn damaged_frames_are_errors_not_panics() {
        let key = Frame::Key { key: "/k/abc".into(), revision: 1, value: Bytes::from_static(b"v") };
        let bytes = key.encode();
        for cut in 0..bytes.len() - 5 {
            // Any payload cut short, or a key length past its end, is an error.
            let _ = Frame::decode(b'K', bytes.slice(5..5 + cut), 9);
        }
        let mut lying = BytesMut::from(&bytes[5..]);
        lying[..4].copy_from_slice(&1000u32.to_be_bytes());
        assert!(Frame::decode(b'K', lying.freeze(), 9).is_err());
        assert!(Frame::decode(b'Q', Bytes::new(), 9).is_err());
        assert!(Frame::payload_len(&[b'K', 0xff, 0xff, 0xff, 0xff], 0).is_err());
    }

    #[test]
    fn headers_are_one_fixed_line() {
        let header = Header {
            format: FORMAT.into(),
            revision: 10,
            backend: "etcd".into(),
            objects: 3,
            files: 2,
            bytes: 100,
            sha256: hex(&[0xab; 32]),
            created: "2026-01-01T00:00:00Z".into(),
        };
        let line = header.encode().unwrap();
        assert_eq!(line.len(), HEADER_BYTES);
        assert_eq!(Header::decode(&line).unwrap(), header);
        let mut other = line.clone();
        other[2] = b'X';
        assert!(Header::decode(&other).is_err());
        assert!(Header::decode(&line[..100]).is_err());
        let newer = Header { format: "ocm-hub-backup/2".into(), ..header };
        let err = Header::decode(&newer.encode().unwrap()).unwrap_err();
        assert!(err.to_string().contains("ocm-hub-backup/2"), "{err}");
    }
}
