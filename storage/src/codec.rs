//! The sled backend's byte layouts (its child module `codec`, in a file beside `sled.rs` as
//! `chunked.rs` is): records and history events as stored, with the flags that say a value is
//! stored by content, and their bounds-checked decoding (damage is `Corrupt`, never a panic).

use bytes::Bytes;

use super::chunked::ValueId;
use crate::error::{Error, Result};
use crate::local::Record;
use crate::{EventKind, KeyValue, Revision, WatchEvent};

/// In a record's `create`: the value is stored by content under its `modified` revision.
const RECORD_EXTERNAL: u64 = 1 << 63;
/// In an event's kind: the value is stored by content under the event's revision.
const KIND_EXTERNAL: u8 = 0x80;
/// An event's `prev` flag: 0 none, 1 inline, 2 stored by content under `prev_mod`.
const PREV_EXTERNAL: u8 = 2;

pub(crate) fn read_u64(bytes: &[u8], what: &str) -> Result<u64> {
    let array: [u8; 8] =
        bytes.try_into().map_err(|_| Error::corrupt(what, "expected an 8-byte integer"))?;
    Ok(u64::from_be_bytes(array))
}

/// Encodes a record; `external`: its value is stored by content (and not written here).
pub(super) fn encode_record(record: &Record, external: bool) -> Vec<u8> {
    let value: &[u8] = if external { &[] } else { &record.value };
    let create = if external { record.create | RECORD_EXTERNAL } else { record.create };
    let mut out = Vec::with_capacity(16 + value.len());
    out.extend_from_slice(&create.to_be_bytes());
    out.extend_from_slice(&record.modified.to_be_bytes());
    out.extend_from_slice(value);
    out
}

/// The record, and whether its value is stored by content (its `value` then still to be read).
pub(super) fn decode_record(key: &str, bytes: &[u8]) -> Result<(Record, bool)> {
    if bytes.len() < 16 {
        return Err(Error::corrupt(key, format!("record of {} bytes is too short", bytes.len())));
    }
    let create = read_u64(&bytes[..8], key)?;
    let external = create & RECORD_EXTERNAL != 0;
    let create = create & !RECORD_EXTERNAL;
    let modified = read_u64(&bytes[8..16], key)?;
    if create == 0 || modified < create {
        return Err(Error::corrupt(key, format!("bad revisions {create}/{modified}")));
    }
    if external && bytes.len() != 16 {
        return Err(Error::corrupt(key, "record stored by content also holds a value"));
    }
    Ok((Record { create, modified, value: Bytes::copy_from_slice(&bytes[16..]) }, external))
}

/// `at_ms u64, kind u8 (0 put, 1 delete; | 0x80: value by content), create u64, key_len u32, key,
/// [value_len u32, value], prev u8 (0 none, 1 inline, 2 by content), [prev_create u64, prev_mod
/// u64, [prev_len u32, prev_value]]`. A value stored by content is named by the event's revision,
/// a `prev` by `prev_mod`.
pub(super) fn encode_event(
    event: &WatchEvent,
    at_ms: u64,
    value_external: bool,
    prev_external: bool,
) -> Vec<u8> {
    let value_len = if value_external { 0 } else { event.value.len() };
    let prev_len =
        event.prev.as_ref().map_or(0, |p| if prev_external { 16 } else { 20 + p.value.len() });
    let mut out = Vec::with_capacity(30 + event.key.len() + value_len + prev_len);
    out.extend_from_slice(&at_ms.to_be_bytes());
    let kind = match event.kind {
        EventKind::Put => 0,
        EventKind::Delete => 1,
    };
    out.push(if value_external { kind | KIND_EXTERNAL } else { kind });
    out.extend_from_slice(&event.create_revision.0.to_be_bytes());
    put_bytes(&mut out, event.key.as_bytes());
    if !value_external {
        put_bytes(&mut out, &event.value);
    }
    match &event.prev {
        Some(prev) => {
            out.push(if prev_external { PREV_EXTERNAL } else { 1 });
            out.extend_from_slice(&prev.create_revision.0.to_be_bytes());
            out.extend_from_slice(&prev.mod_revision.0.to_be_bytes());
            if !prev_external {
                put_bytes(&mut out, &prev.value);
            }
        }
        None => out.push(0),
    }
    out
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    // Values are at most 1.5 MiB and keys 1 KiB, so the length always fits.
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// A bounds-checked reader over an encoded event.
struct Reader<'a> {
    bytes: &'a [u8],
    what: String,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.bytes.len() < n {
            return Err(Error::corrupt(&self.what, "event record is truncated"));
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn u64(&mut self) -> Result<u64> {
        read_u64(self.take(8)?, &self.what)
    }

    fn bytes(&mut self) -> Result<&'a [u8]> {
        let len: [u8; 4] = self.take(4)?.try_into().expect("took 4 bytes");
        self.take(u32::from_be_bytes(len) as usize)
    }
}

/// The start of an encoded event: its kind and whether its value is stored by content, its
/// create revision and key, with the reader left at the value.
fn event_head<'a>(
    revision: u64,
    bytes: &'a [u8],
) -> Result<(EventKind, bool, Revision, &'a str, Reader<'a>)> {
    let what = format!("history@{revision}");
    let mut r = Reader { bytes, what: what.clone() };
    let _at_ms = r.u64()?;
    let kind = r.u8()?;
    let external = kind & KIND_EXTERNAL != 0;
    let kind = match kind & !KIND_EXTERNAL {
        0 => EventKind::Put,
        1 => EventKind::Delete,
        other => return Err(Error::corrupt(what, format!("unknown event kind {other}"))),
    };
    let create_revision = Revision(r.u64()?);
    let key =
        std::str::from_utf8(r.bytes()?).map_err(|_| Error::corrupt(&what, "key is not UTF-8"))?;
    Ok((kind, external, create_revision, key, r))
}

/// The revision and key of the event's `prev` if that value is stored by content.
pub(super) fn external_prev(revision: u64, bytes: &[u8]) -> Result<Option<ValueId>> {
    let (_, external, _, key, mut r) = event_head(revision, bytes)?;
    if !external {
        r.bytes()?;
    }
    match r.u8()? {
        PREV_EXTERNAL => {
            r.u64()?;
            Ok(Some((r.u64()?, key.to_owned())))
        }
        _ => Ok(None),
    }
}

/// Decodes an event, reading values stored by content with `load` (by the revision and key
/// naming them).
pub(super) fn decode_event(
    revision: u64,
    bytes: &[u8],
    load: impl Fn(u64, &str) -> Result<Bytes>,
) -> Result<WatchEvent> {
    let (kind, external, create_revision, key, mut r) = event_head(revision, bytes)?;
    let what = format!("history@{revision}");
    let key = key.to_owned();
    let value = if external { load(revision, &key)? } else { Bytes::copy_from_slice(r.bytes()?) };
    let prev = match r.u8()? {
        0 => None,
        flag @ (1 | PREV_EXTERNAL) => {
            let create_revision = Revision(r.u64()?);
            let mod_revision = Revision(r.u64()?);
            let value = if flag == PREV_EXTERNAL {
                load(mod_revision.0, &key)?
            } else {
                Bytes::copy_from_slice(r.bytes()?)
            };
            Some(KeyValue { key: key.clone(), create_revision, mod_revision, value })
        }
        other => return Err(Error::corrupt(what, format!("bad prev flag {other}"))),
    };
    if !r.bytes.is_empty() {
        return Err(Error::corrupt(what, "trailing bytes after the event"));
    }
    Ok(WatchEvent { kind, revision: Revision(revision), key, value, create_revision, prev })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_encoding_round_trips() {
        let event = WatchEvent {
            kind: EventKind::Put,
            revision: Revision(7),
            key: "/a/b".into(),
            value: Bytes::from_static(b"new"),
            create_revision: Revision(3),
            prev: Some(KeyValue {
                key: "/a/b".into(),
                value: Bytes::from_static(b"old"),
                create_revision: Revision(3),
                mod_revision: Revision(5),
            }),
        };
        let inline = |_, _: &str| -> Result<Bytes> { panic!("nothing is stored by content") };
        assert_eq!(
            decode_event(7, &encode_event(&event, 99, false, false), inline).unwrap(),
            event
        );
        let encoded = encode_event(&event, 99, false, false);
        for cut in 0..encoded.len() {
            assert!(matches!(decode_event(7, &encoded[..cut], inline), Err(Error::Corrupt { .. })));
        }
        // Both values by content: named by the event's and the prev's revisions, and the key.
        let by_content = |r, key: &str| {
            assert_eq!(key, "/a/b");
            Ok(Bytes::from_static(if r == 7 { b"new" } else { b"old" }))
        };
        let encoded = encode_event(&event, 99, true, true);
        assert_eq!(decode_event(7, &encoded, by_content).unwrap(), event);
        assert_eq!(external_prev(7, &encoded).unwrap(), Some((5, "/a/b".to_owned())));
        assert_eq!(external_prev(7, &encode_event(&event, 99, false, false)).unwrap(), None);
        for cut in 0..encoded.len() {
            assert!(matches!(
                decode_event(7, &encoded[..cut], by_content),
                Err(Error::Corrupt { .. })
            ));
        }
    }
}
