//! The table-driven decoder: a message's fields into the JSON object Go's JSON encoding of the
//! decoded struct would write (omitempty zeros dropped, times as RFC 3339, bytes as base64).

use base64::Engine as _;
use serde_json::{Map, Value};

use super::tables::Card::{Keep, Map as MapOf, Opt, Rep};
use super::tables::{F, Msg, Ty};
use super::wire::{LEN, Raw, Reader, VARINT, utf8};
use super::{Error, MAX_DEPTH};

/// Decodes the fields of `buf` (a `msg`) into `obj`. A message field that occurs twice is merged
/// and repeated fields append, as protobuf defines.
pub(super) fn decode_into(
    obj: &mut Map<String, Value>,
    buf: &[u8],
    msg: &'static Msg,
    depth: usize,
) -> Result<(), Error> {
    if depth > MAX_DEPTH {
        return Err(Error::TooDeep);
    }
    let mut r = Reader::new(buf, msg.name);
    while let Some((num, raw)) = r.field()? {
        let Some(field) = msg.fields.iter().find(|f| f.num == num) else {
            continue; // unknown: skipped, as gogo-protobuf does
        };
        match (field.card, field.ty, raw) {
            (MapOf, _, Raw::Len(entry)) => {
                let (key, value) = map_entry(entry, msg, field)?;
                let map = obj.entry(field.name).or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(map) = map {
                    map.insert(key, value);
                }
            }
            (Rep, _, _) => {
                let value = match (field.ty, raw) {
                    (Ty::Msg(inner), Raw::Len(b)) => {
                        let mut o = Map::new();
                        decode_into(&mut o, b, inner, depth + 1)?;
                        Value::Object(o)
                    }
                    _ => scalar(raw, msg, field)?,
                };
                let list = obj.entry(field.name).or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(list) = list {
                    list.push(value);
                }
            }
            (Keep | Opt, Ty::Msg(inner), Raw::Len(b)) => {
                let slot = obj.entry(field.name).or_insert_with(|| Value::Object(Map::new()));
                if !slot.is_object() {
                    *slot = Value::Object(Map::new());
                }
                if let Value::Object(o) = slot {
                    decode_into(o, b, inner, depth + 1)?;
                }
            }
            (Keep | Opt, _, _) => {
                let value = scalar(raw, msg, field)?;
                // A zero time is `null` in Go's JSON, which decodes as if absent: left out.
                if value.is_null() || (field.card == Opt && is_zero(&value)) {
                    obj.remove(field.name);
                } else {
                    obj.insert(field.name.to_owned(), value);
                }
            }
            (MapOf, _, raw) => {
                return Err(Error::WireType {
                    message: msg.name,
                    name: field.name,
                    field: num,
                    got: raw.wire(),
                    expected: LEN,
                });
            }
        }
    }
    Ok(())
}

fn wire_of(ty: Ty) -> u8 {
    match ty {
        Ty::Bool | Ty::Int32 | Ty::Int64 => VARINT,
        _ => LEN,
    }
}

/// A map entry `{key 1, value 2}`; a missing key or value is the empty one, as in gogo-protobuf.
fn map_entry(buf: &[u8], msg: &'static Msg, field: &F) -> Result<(String, Value), Error> {
    let mut r = Reader::new(buf, msg.name);
    let mut key = String::new();
    let mut value = None;
    while let Some((num, raw)) = r.field()? {
        match (num, raw) {
            (1, Raw::Len(b)) => key = utf8(b, msg.name, field.name)?,
            (2, Raw::Len(_)) => value = Some(scalar(raw, msg, field)?),
            (1 | 2, raw) => {
                return Err(Error::WireType {
                    message: msg.name,
                    name: field.name,
                    field: field.num,
                    got: raw.wire(),
                    expected: LEN,
                });
            }
            _ => {}
        }
    }
    let value = match value {
        Some(v) => v,
        None => scalar(Raw::Len(&[]), msg, field)?,
    };
    Ok((key, value))
}

/// A non-message value of `field` (or a value of a map).
fn scalar(raw: Raw<'_>, msg: &'static Msg, field: &F) -> Result<Value, Error> {
    let bad = |detail: String| Error::Value { message: msg.name, name: field.name, detail };
    Ok(match (field.ty, raw) {
        (Ty::Str, Raw::Len(b)) => Value::String(utf8(b, msg.name, field.name)?),
        (Ty::Bytes, Raw::Len(b)) => {
            Value::String(base64::engine::general_purpose::STANDARD.encode(b))
        }
        (Ty::Bool, Raw::Varint(v)) => Value::Bool(v != 0),
        // Go's int32(v): the low 32 bits (negative values arrive sign-extended to 64).
        (Ty::Int32, Raw::Varint(v)) => Value::from(v as u32 as i32),
        (Ty::Int64, Raw::Varint(v)) => Value::from(v as i64),
        (Ty::Time, Raw::Len(b)) => timestamp(b, false).map_err(bad)?,
        (Ty::MicroTime, Raw::Len(b)) => timestamp(b, true).map_err(bad)?,
        (Ty::FieldsV1, Raw::Len(b)) => {
            let mut r = Reader::new(b, "FieldsV1");
            let mut json: &[u8] = &[];
            while let Some((num, raw)) = r.field()? {
                if let (1, Raw::Len(b)) = (num, raw) {
                    json = b;
                }
            }
            if json.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(json)
                    .map_err(|e| bad(format!("FieldsV1.Raw is not JSON: {e}")))?
            }
        }
        (Ty::StrList, Raw::Len(b)) => {
            let mut r = Reader::new(b, "ExtraValue");
            let mut items = Vec::new();
            while let Some((num, raw)) = r.field()? {
                if let (1, Raw::Len(s)) = (num, raw) {
                    items.push(Value::String(utf8(s, "ExtraValue", "items")?));
                }
            }
            Value::Array(items)
        }
        _ => {
            return Err(Error::WireType {
                message: msg.name,
                name: field.name,
                field: field.num,
                got: raw.wire(),
                expected: wire_of(field.ty),
            });
        }
    })
}

/// `Time`/`MicroTime` (`{seconds int64 = 1, nanos int32 = 2}`) as Go's JSON writes them.
fn timestamp(buf: &[u8], micro: bool) -> Result<Value, String> {
    if buf.is_empty() {
        return Ok(Value::Null); // Go's zero time
    }
    let mut r = Reader::new(buf, "Timestamp");
    let (mut seconds, mut nanos) = (0i64, 0i32);
    while let Some((num, raw)) = r.field().map_err(|e| e.to_string())? {
        match (num, raw) {
            (1, Raw::Varint(v)) => seconds = v as i64,
            (2, Raw::Varint(v)) => nanos = v as u32 as i32,
            (1 | 2, _) => return Err(format!("Timestamp field {num} is not a varint")),
            _ => {}
        }
    }
    if !micro {
        nanos = 0; // metav1.Time keeps whole seconds
    }
    let total = i128::from(seconds) * 1_000_000_000 + i128::from(nanos);
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(total)
        .map_err(|_| format!("the time {seconds}s {nanos}ns is out of range"))?;
    if !(1..=9999).contains(&t.year()) {
        return Err(format!("the time {seconds}s {nanos}ns is out of range"));
    }
    let s = if micro {
        crate::machinery::object::rfc3339_micros(t)
    } else {
        crate::machinery::object::rfc3339(t)
    };
    Ok(Value::String(s))
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_i64() == Some(0),
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}
