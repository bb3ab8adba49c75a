//! Protobuf's wire format as the decoder needs it: a message's fields in order (tag, varint,
//! length-delimited and fixed-size values), and the `runtime.Unknown` envelope that names a
//! body's apiVersion and kind.

use super::Error;

pub(super) const VARINT: u8 = 0;
const FIXED64: u8 = 1;
pub(super) const LEN: u8 = 2;
const FIXED32: u8 = 5;

/// One field's value as it is on the wire.
#[derive(Debug, Clone, Copy)]
pub(super) enum Raw<'a> {
    Varint(u64),
    Fixed64,
    Len(&'a [u8]),
    Fixed32,
}

impl Raw<'_> {
    pub(super) fn wire(&self) -> u8 {
        match self {
            Raw::Varint(_) => VARINT,
            Raw::Fixed64 => FIXED64,
            Raw::Len(_) => LEN,
            Raw::Fixed32 => FIXED32,
        }
    }
}

/// Reads the fields of one message, in order.
pub(super) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    message: &'static str,
}

impl<'a> Reader<'a> {
    pub(super) fn new(buf: &'a [u8], message: &'static str) -> Reader<'a> {
        Reader { buf, pos: 0, message }
    }

    fn varint(&mut self) -> Result<u64, Error> {
        let start = self.pos;
        let mut value = 0u64;
        for shift in 0..10 {
            let Some(&b) = self.buf.get(self.pos) else { break };
            self.pos += 1;
            value |= u64::from(b & 0x7f) << (7 * shift);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(Error::Varint { message: self.message, offset: start })
    }

    fn take(&mut self, n: usize, field: u32) -> Result<&'a [u8], Error> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&end| end <= self.buf.len())
            .ok_or(Error::Truncated { message: self.message, field })?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    /// The next field number and value, or `None` at the end of the message.
    pub(super) fn field(&mut self) -> Result<Option<(u32, Raw<'a>)>, Error> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let tag = self.varint()?;
        let wire = (tag & 7) as u8;
        let field = u32::try_from(tag >> 3).unwrap_or(0);
        if field == 0 || field >= 1 << 29 {
            return Err(Error::BadTag { message: self.message, field, wire });
        }
        let raw = match wire {
            VARINT => Raw::Varint(self.varint()?),
            FIXED64 => {
                self.take(8, field)?;
                Raw::Fixed64
            }
            LEN => {
                let n = self.varint()?;
                let n = usize::try_from(n)
                    .map_err(|_| Error::Truncated { message: self.message, field })?;
                Raw::Len(self.take(n, field)?)
            }
            FIXED32 => {
                self.take(4, field)?;
                Raw::Fixed32
            }
            _ => return Err(Error::BadTag { message: self.message, field, wire }),
        };
        Ok(Some((field, raw)))
    }
}

/// `runtime.Unknown`: typeMeta (1: {apiVersion 1, kind 2}), raw (2), contentEncoding (3) and
/// contentType (4), the last two unused by kube-apiserver's decoder and ignored here too.
pub(super) struct Unknown<'a> {
    pub(super) api_version: String,
    pub(super) kind: String,
    pub(super) raw: &'a [u8],
}

impl<'a> Unknown<'a> {
    pub(super) fn parse(buf: &'a [u8]) -> Result<Unknown<'a>, Error> {
        let mut out = Unknown { api_version: String::new(), kind: String::new(), raw: &[] };
        let mut r = Reader::new(buf, "Unknown");
        while let Some((field, raw)) = r.field()? {
            match (field, raw) {
                (1, Raw::Len(b)) => {
                    let mut t = Reader::new(b, "TypeMeta");
                    while let Some((field, raw)) = t.field()? {
                        match (field, raw) {
                            (1, Raw::Len(s)) => {
                                out.api_version = utf8(s, "TypeMeta", "apiVersion")?
                            }
                            (2, Raw::Len(s)) => out.kind = utf8(s, "TypeMeta", "kind")?,
                            (1 | 2, raw) => {
                                return Err(wire_error("TypeMeta", field, raw, LEN));
                            }
                            _ => {}
                        }
                    }
                }
                (2, Raw::Len(b)) => out.raw = b,
                (1..=4, raw) if raw.wire() != LEN => {
                    return Err(wire_error("Unknown", field, raw, LEN));
                }
                _ => {}
            }
        }
        Ok(out)
    }
}

fn wire_error(message: &'static str, field: u32, raw: Raw<'_>, expected: u8) -> Error {
    let name = match (message, field) {
        ("TypeMeta", 1) => "apiVersion",
        ("TypeMeta", _) => "kind",
        (_, 1) => "typeMeta",
        (_, 2) => "raw",
        (_, 3) => "contentEncoding",
        _ => "contentType",
    };
    Error::WireType { message, name, field, got: raw.wire(), expected }
}

pub(super) fn utf8(b: &[u8], message: &'static str, name: &'static str) -> Result<String, Error> {
    String::from_utf8(b.to_vec()).map_err(|_| Error::Value {
        message,
        name,
        detail: "the string is not valid UTF-8".into(),
    })
}
