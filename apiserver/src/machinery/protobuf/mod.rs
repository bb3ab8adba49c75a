//! Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`): the `k8s\0`
//! envelope, its `runtime.Unknown` wrapper and a table-driven decoder of the built-in kinds the
//! hub serves, producing the JSON `Value` the JSON decoder would have produced for the same
//! object (so the rest of the server never sees protobuf). Responses stay JSON.
//!
//! The field numbers and types come from Kubernetes' `generated.proto` files (apimachinery's
//! `runtime` and `meta/v1`, and `core/v1`, `coordination/v1`, `certificates/v1`, `events/v1`,
//! `rbac/v1` of `k8s.io/api`). Scalars follow Go's JSON encoding of the decoded struct: a
//! non-pointer `omitempty` field is dropped when zero (gogo-protobuf writes it anyway), a pointer
//! or required field is kept as sent; `Time` keeps whole seconds (`metav1.Time` drops `nanos`),
//! `MicroTime` keeps microseconds, a zero (empty) time is left out (Go writes `null`, which reads
//! back as absent), `bytes` become base64 strings, `FieldsV1` its raw JSON.
//!
//! Unknown field numbers are skipped silently, as gogo-protobuf does: kube-apiserver has no strict
//! protobuf decoder (its codec factory falls back to the plain one), so `fieldValidation` only
//! ever reports unknown JSON/YAML fields, and an unknown field number has no name to report.
//!
//! The kinds of `--profile cluster` (Pods, Services, workloads, CRDs) have no table: their
//! protobuf bodies are answered 415 and must be sent as JSON. The kind comes from the body's
//! `runtime.Unknown.typeMeta` (kubectl always sets it); the endpoint then checks it as for JSON.
//!
//! The parts: `wire` reads protobuf's wire format and the `runtime.Unknown` envelope, `tables`
//! holds each decoded message's fields, `decoder` turns a message into JSON by its table.

mod decoder;
mod tables;
#[cfg(test)]
mod tests;
mod wire;

use serde_json::{Map, Value};

use crate::machinery::error::ApiError;
use decoder::decode_into;
use tables::KINDS;
use wire::Unknown;

/// The media type of Kubernetes protobuf bodies.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// What every Kubernetes protobuf body starts with (`protoEncodingPrefix`).
const MAGIC: &[u8] = b"k8s\0";

/// The deepest nesting of messages decoded (the tables nest far less; this bounds recursion
/// whatever a table grows into).
const MAX_DEPTH: usize = 16;

/// A protobuf body the hub cannot decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The body lacks the `k8s\0` prefix.
    #[error("the body does not start with the Kubernetes protobuf prefix \"k8s\\x00\"")]
    Prefix,
    /// Nothing follows the prefix.
    #[error("the protobuf body is empty after its prefix")]
    Empty,
    /// A varint runs past the end of its message or over 10 bytes.
    #[error("{message}: malformed or truncated varint at byte {offset}")]
    Varint {
        /// The message being read.
        message: &'static str,
        /// Offset in that message.
        offset: usize,
    },
    /// A length-delimited or fixed-size value runs past the end of its message.
    #[error("{message}: field {field} runs past the end of the message")]
    Truncated {
        /// The message being read.
        message: &'static str,
        /// The field number.
        field: u32,
    },
    /// Field number 0, or a wire type protobuf does not define (or groups, unused by Kubernetes).
    #[error("{message}: field {field} has unsupported wire type {wire}")]
    BadTag {
        /// The message being read.
        message: &'static str,
        /// The field number.
        field: u32,
        /// The wire type.
        wire: u8,
    },
    /// A known field arrived with another wire type than its .proto declares.
    #[error("{message}.{name} (field {field}) has wire type {got}, expected {expected}")]
    WireType {
        /// The message being read.
        message: &'static str,
        /// The field's JSON name.
        name: &'static str,
        /// The field number.
        field: u32,
        /// The wire type received.
        got: u8,
        /// The wire type declared.
        expected: u8,
    },
    /// A field holds a value it cannot (invalid UTF-8, a time out of range, bad `FieldsV1`).
    #[error("{message}.{name}: {detail}")]
    Value {
        /// The message being read.
        message: &'static str,
        /// The field's JSON name.
        name: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// Messages nest deeper than [`MAX_DEPTH`].
    #[error("the protobuf message nests deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// `runtime.Unknown` names no apiVersion or kind.
    #[error("the protobuf body does not name its apiVersion and kind (runtime.Unknown.typeMeta)")]
    MissingKind,
    /// A kind this decoder has no table for.
    #[error(
        "protobuf bodies of {api_version}, Kind={kind} are not supported; send it as \
         application/json (protobuf is accepted for {accepted})"
    )]
    UnsupportedKind {
        /// The body's apiVersion.
        api_version: String,
        /// The body's kind.
        kind: String,
        /// The kinds accepted as protobuf.
        accepted: String,
    },
}

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        match e {
            Error::UnsupportedKind { .. } => ApiError::unsupported_media_type(e.to_string()),
            _ => ApiError::bad_request(format!(
                "the body of the request is not a valid Kubernetes protobuf message: {e}"
            )),
        }
    }
}

/// Decodes a protobuf body (prefix, `runtime.Unknown`, typed object) into the object's JSON.
pub fn decode(body: &[u8]) -> Result<Value, Error> {
    let rest = body.strip_prefix(MAGIC).ok_or(Error::Prefix)?;
    if rest.is_empty() {
        return Err(Error::Empty);
    }
    let unknown = Unknown::parse(rest)?;
    if unknown.api_version.is_empty() || unknown.kind.is_empty() {
        return Err(Error::MissingKind);
    }
    let Some((_, _, msg)) =
        KINDS.iter().find(|(av, k, _)| *av == unknown.api_version && *k == unknown.kind)
    else {
        return Err(Error::UnsupportedKind {
            api_version: unknown.api_version,
            kind: unknown.kind,
            accepted: accepted_kinds(),
        });
    };
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), Value::String(unknown.api_version));
    obj.insert("kind".into(), Value::String(unknown.kind));
    decode_into(&mut obj, unknown.raw, msg, 0)?;
    Ok(Value::Object(obj))
}

/// `apiVersion/Kind` of every kind decoded, for messages.
fn accepted_kinds() -> String {
    KINDS.iter().map(|(av, k, _)| format!("{av}/{k}")).collect::<Vec<_>>().join(", ")
}
