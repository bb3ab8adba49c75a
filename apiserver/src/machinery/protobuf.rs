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

use base64::Engine as _;
use serde_json::{Map, Value};

use crate::machinery::error::ApiError;

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

// ---------------------------------------------------------------------------------------------
// The wire format.

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

/// One field's value as it is on the wire.
#[derive(Debug, Clone, Copy)]
enum Raw<'a> {
    Varint(u64),
    Fixed64,
    Len(&'a [u8]),
    Fixed32,
}

impl Raw<'_> {
    fn wire(&self) -> u8 {
        match self {
            Raw::Varint(_) => VARINT,
            Raw::Fixed64 => FIXED64,
            Raw::Len(_) => LEN,
            Raw::Fixed32 => FIXED32,
        }
    }
}

/// Reads the fields of one message, in order.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    message: &'static str,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8], message: &'static str) -> Reader<'a> {
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
    fn field(&mut self) -> Result<Option<(u32, Raw<'a>)>, Error> {
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
struct Unknown<'a> {
    api_version: String,
    kind: String,
    raw: &'a [u8],
}

impl<'a> Unknown<'a> {
    fn parse(buf: &'a [u8]) -> Result<Unknown<'a>, Error> {
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

fn utf8(b: &[u8], message: &'static str, name: &'static str) -> Result<String, Error> {
    String::from_utf8(b.to_vec()).map_err(|_| Error::Value {
        message,
        name,
        detail: "the string is not valid UTF-8".into(),
    })
}

// ---------------------------------------------------------------------------------------------
// The tables.

/// How a field's value is read and written to JSON.
#[derive(Clone, Copy)]
enum Ty {
    /// `string`.
    Str,
    /// `bytes`, written as base64.
    Bytes,
    /// `bool`.
    Bool,
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `metav1.Time`: RFC 3339 in whole seconds; an empty message is Go's zero time (left out).
    Time,
    /// `metav1.MicroTime`: RFC 3339 with microseconds.
    MicroTime,
    /// `metav1.FieldsV1`: its `Raw` (1) is JSON and is written as such.
    FieldsV1,
    /// A message with its own table.
    Msg(&'static Msg),
    /// A message `{repeated string items = 1}` written as a bare list (`ExtraValue`).
    StrList,
}

/// How often a field occurs and what Go's JSON does with its zero value.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Card {
    /// A non-pointer `omitempty` scalar: dropped when zero.
    Opt,
    /// A pointer or required field (or any message): written as sent.
    Keep,
    /// `repeated`: a JSON list.
    Rep,
    /// `map<string, Ty>`: repeated entries `{key 1, value 2}`, a JSON object.
    Map,
}

/// One field of a message.
struct F {
    num: u32,
    name: &'static str,
    ty: Ty,
    card: Card,
}

/// One message type.
struct Msg {
    name: &'static str,
    fields: &'static [F],
}

const fn f(num: u32, name: &'static str, ty: Ty, card: Card) -> F {
    F { num, name, ty, card }
}

/// A message field (kept whenever sent, as Go writes non-pointer structs even when empty).
const fn m(num: u32, name: &'static str, msg: &'static Msg) -> F {
    F { num, name, ty: Ty::Msg(msg), card: Card::Keep }
}

use Card::{Keep, Map as MapOf, Opt, Rep};
use Ty::{Bool, Bytes, FieldsV1, Int32, Int64, MicroTime, Str, StrList, Time};

/// The kinds decoded: apiVersion, kind and table.
static KINDS: &[(&str, &str, &Msg)] = &[
    ("v1", "Namespace", &NAMESPACE),
    ("v1", "ConfigMap", &CONFIG_MAP),
    ("v1", "Secret", &SECRET),
    ("v1", "ServiceAccount", &SERVICE_ACCOUNT),
    ("v1", "Event", &CORE_EVENT),
    ("events.k8s.io/v1", "Event", &EVENTS_EVENT),
    ("coordination.k8s.io/v1", "Lease", &LEASE),
    ("certificates.k8s.io/v1", "CertificateSigningRequest", &CSR),
    ("rbac.authorization.k8s.io/v1", "Role", &ROLE),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", &CLUSTER_ROLE),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", &ROLE_BINDING),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", &ROLE_BINDING),
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview", &SELF_SUBJECT_ACCESS_REVIEW),
    ("authorization.k8s.io/v1", "SubjectAccessReview", &SUBJECT_ACCESS_REVIEW),
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview", &SELF_SUBJECT_RULES_REVIEW),
    ("authentication.k8s.io/v1", "SelfSubjectReview", &SELF_SUBJECT_REVIEW),
    ("authentication.k8s.io/v1", "TokenReview", &TOKEN_REVIEW),
    ("authentication.k8s.io/v1", "TokenRequest", &TOKEN_REQUEST),
];

// meta/v1

static OBJECT_META: Msg = Msg {
    name: "ObjectMeta",
    fields: &[
        f(1, "name", Str, Opt),
        f(2, "generateName", Str, Opt),
        f(3, "namespace", Str, Opt),
        f(4, "selfLink", Str, Opt),
        f(5, "uid", Str, Opt),
        f(6, "resourceVersion", Str, Opt),
        f(7, "generation", Int64, Opt),
        f(8, "creationTimestamp", Time, Keep),
        f(9, "deletionTimestamp", Time, Keep),
        f(10, "deletionGracePeriodSeconds", Int64, Keep),
        f(11, "labels", Str, MapOf),
        f(12, "annotations", Str, MapOf),
        f(13, "ownerReferences", Ty::Msg(&OWNER_REFERENCE), Rep),
        f(14, "finalizers", Str, Rep),
        f(17, "managedFields", Ty::Msg(&MANAGED_FIELDS_ENTRY), Rep),
    ],
};

static OWNER_REFERENCE: Msg = Msg {
    name: "OwnerReference",
    fields: &[
        f(5, "apiVersion", Str, Keep),
        f(1, "kind", Str, Keep),
        f(3, "name", Str, Keep),
        f(4, "uid", Str, Keep),
        f(6, "controller", Bool, Keep),
        f(7, "blockOwnerDeletion", Bool, Keep),
    ],
};

static MANAGED_FIELDS_ENTRY: Msg = Msg {
    name: "ManagedFieldsEntry",
    fields: &[
        f(1, "manager", Str, Opt),
        f(2, "operation", Str, Opt),
        f(3, "apiVersion", Str, Opt),
        f(4, "time", Time, Keep),
        f(6, "fieldsType", Str, Opt),
        f(7, "fieldsV1", FieldsV1, Keep),
        f(8, "subresource", Str, Opt),
    ],
};

static LABEL_SELECTOR: Msg = Msg {
    name: "LabelSelector",
    fields: &[
        f(1, "matchLabels", Str, MapOf),
        f(2, "matchExpressions", Ty::Msg(&LABEL_SELECTOR_REQUIREMENT), Rep),
    ],
};

static LABEL_SELECTOR_REQUIREMENT: Msg = Msg {
    name: "LabelSelectorRequirement",
    fields: &[f(1, "key", Str, Keep), f(2, "operator", Str, Keep), f(3, "values", Str, Rep)],
};

// core/v1

static OBJECT_REFERENCE: Msg = Msg {
    name: "ObjectReference",
    fields: &[
        f(1, "kind", Str, Opt),
        f(2, "namespace", Str, Opt),
        f(3, "name", Str, Opt),
        f(4, "uid", Str, Opt),
        f(5, "apiVersion", Str, Opt),
        f(6, "resourceVersion", Str, Opt),
        f(7, "fieldPath", Str, Opt),
    ],
};

static LOCAL_OBJECT_REFERENCE: Msg =
    Msg { name: "LocalObjectReference", fields: &[f(1, "name", Str, Opt)] };

static NAMESPACE: Msg = Msg {
    name: "Namespace",
    fields: &[
        m(1, "metadata", &OBJECT_META),
        m(2, "spec", &NAMESPACE_SPEC),
        m(3, "status", &NAMESPACE_STATUS),
    ],
};

static NAMESPACE_SPEC: Msg = Msg { name: "NamespaceSpec", fields: &[f(1, "finalizers", Str, Rep)] };

static NAMESPACE_STATUS: Msg = Msg {
    name: "NamespaceStatus",
    fields: &[f(1, "phase", Str, Opt), f(2, "conditions", Ty::Msg(&NAMESPACE_CONDITION), Rep)],
};

static NAMESPACE_CONDITION: Msg = Msg {
    name: "NamespaceCondition",
    fields: &[
        f(1, "type", Str, Keep),
        f(2, "status", Str, Keep),
        f(4, "lastTransitionTime", Time, Keep),
        f(5, "reason", Str, Opt),
        f(6, "message", Str, Opt),
    ],
};

static CONFIG_MAP: Msg = Msg {
    name: "ConfigMap",
    fields: &[
        m(1, "metadata", &OBJECT_META),
        f(4, "immutable", Bool, Keep),
        f(2, "data", Str, MapOf),
        f(3, "binaryData", Bytes, MapOf),
    ],
};

static SECRET: Msg = Msg {
    name: "Secret",
    fields: &[
        m(1, "metadata", &OBJECT_META),
        f(5, "immutable", Bool, Keep),
        f(2, "data", Bytes, MapOf),
        f(4, "stringData", Str, MapOf),
        f(3, "type", Str, Opt),
    ],
};

static SERVICE_ACCOUNT: Msg = Msg {
    name: "ServiceAccount",
    fields: &[
        m(1, "metadata", &OBJECT_META),
        f(2, "secrets", Ty::Msg(&OBJECT_REFERENCE), Rep),
        f(3, "imagePullSecrets", Ty::Msg(&LOCAL_OBJECT_REFERENCE), Rep),
        f(4, "automountServiceAccountToken", Bool, Keep),
    ],
};

static CORE_EVENT: Msg = Msg {
    name: "Event",
    fields: &[
        m(1, "metadata", &OBJECT_META),
        m(2, "involvedObject", &OBJECT_REFERENCE),
        f(3, "reason", Str, Opt),
        f(4, "message", Str, Opt),
        m(5, "source", &EVENT_SOURCE),
        f(6, "firstTimestamp", Time, Keep),
        f(7, "lastTimestamp", Time, Keep),
        f(8, "count", Int32, Opt),
        f(9, "type", Str, Opt),
        f(10, "eventTime", MicroTime, Keep),
        m(11, "series", &CORE_EVENT_SERIES),
        f(12, "action", Str, Opt),
        m(13, "related", &OBJECT_REFERENCE),
        f(14, "reportingComponent", Str, Keep),
        f(15, "reportingInstance", Str, Keep),
    ],
};

static EVENT_SOURCE: Msg =
    Msg { name: "EventSource", fields: &[f(1, "component", Str, Opt), f(2, "host", Str, Opt)] };

static CORE_EVENT_SERIES: Msg = Msg {
    name: "EventSeries",
    fields: &[f(1, "count", Int32, Opt), f(2, "lastObservedTime", MicroTime, Keep)],
};

// events/v1

static EVENTS_EVENT: Msg = Msg {
    name: "Event",
    fields: &[
        m(1, "metadata", &OBJECT_META),
        f(2, "eventTime", MicroTime, Keep),
        m(3, "series", &EVENTS_EVENT_SERIES),
        f(4, "reportingController", Str, Opt),
        f(5, "reportingInstance", Str, Opt),
        f(6, "action", Str, Opt),
        f(7, "reason", Str, Opt),
        m(8, "regarding", &OBJECT_REFERENCE),
        m(9, "related", &OBJECT_REFERENCE),
        f(10, "note", Str, Opt),
        f(11, "type", Str, Opt),
        m(12, "deprecatedSource", &EVENT_SOURCE),
        f(13, "deprecatedFirstTimestamp", Time, Keep),
        f(14, "deprecatedLastTimestamp", Time, Keep),
        f(15, "deprecatedCount", Int32, Opt),
    ],
};

static EVENTS_EVENT_SERIES: Msg = Msg {
    name: "EventSeries",
    fields: &[f(1, "count", Int32, Keep), f(2, "lastObservedTime", MicroTime, Keep)],
};

// coordination/v1

static LEASE: Msg =
    Msg { name: "Lease", fields: &[m(1, "metadata", &OBJECT_META), m(2, "spec", &LEASE_SPEC)] };

static LEASE_SPEC: Msg = Msg {
    name: "LeaseSpec",
    fields: &[
        f(1, "holderIdentity", Str, Keep),
        f(2, "leaseDurationSeconds", Int32, Keep),
        f(3, "acquireTime", MicroTime, Keep),
        f(4, "renewTime", MicroTime, Keep),
        f(5, "leaseTransitions", Int32, Keep),
        f(6, "strategy", Str, Keep),
        f(7, "preferredHolder", Str, Keep),
    ],
};

// certificates/v1

static CSR: Msg = Msg {
    name: "CertificateSigningRequest",
    fields: &[m(1, "metadata", &OBJECT_META), m(2, "spec", &CSR_SPEC), m(3, "status", &CSR_STATUS)],
};

static CSR_SPEC: Msg = Msg {
    name: "CertificateSigningRequestSpec",
    fields: &[
        f(1, "request", Bytes, Keep),
        f(7, "signerName", Str, Keep),
        f(8, "expirationSeconds", Int32, Keep),
        f(5, "usages", Str, Rep),
        f(2, "username", Str, Opt),
        f(3, "uid", Str, Opt),
        f(4, "groups", Str, Rep),
        f(6, "extra", StrList, MapOf),
    ],
};

static CSR_STATUS: Msg = Msg {
    name: "CertificateSigningRequestStatus",
    fields: &[f(1, "conditions", Ty::Msg(&CSR_CONDITION), Rep), f(2, "certificate", Bytes, Opt)],
};

static CSR_CONDITION: Msg = Msg {
    name: "CertificateSigningRequestCondition",
    fields: &[
        f(1, "type", Str, Keep),
        f(6, "status", Str, Keep),
        f(2, "reason", Str, Opt),
        f(3, "message", Str, Opt),
        f(4, "lastUpdateTime", Time, Keep),
        f(5, "lastTransitionTime", Time, Keep),
    ],
};

// rbac/v1

static ROLE: Msg = Msg {
    name: "Role",
    fields: &[m(1, "metadata", &OBJECT_META), f(2, "rules", Ty::Msg(&POLICY_RULE), Rep)],
};

static CLUSTER_ROLE: Msg = Msg {
    name: "ClusterRole",
    fields: &[
        m(1, "metadata", &OBJECT_META),
        f(2, "rules", Ty::Msg(&POLICY_RULE), Rep),
        m(3, "aggregationRule", &AGGREGATION_RULE),
    ],
};

static AGGREGATION_RULE: Msg = Msg {
    name: "AggregationRule",
    fields: &[f(1, "clusterRoleSelectors", Ty::Msg(&LABEL_SELECTOR), Rep)],
};

static POLICY_RULE: Msg = Msg {
    name: "PolicyRule",
    fields: &[
        f(1, "verbs", Str, Rep),
        f(2, "apiGroups", Str, Rep),
        f(3, "resources", Str, Rep),
        f(4, "resourceNames", Str, Rep),
        f(5, "nonResourceURLs", Str, Rep),
    ],
};

/// RoleBinding and ClusterRoleBinding share their fields.
static ROLE_BINDING: Msg = Msg {
    name: "RoleBinding",
    fields: &[
        m(1, "metadata", &OBJECT_META),
        f(2, "subjects", Ty::Msg(&SUBJECT), Rep),
        m(3, "roleRef", &ROLE_REF),
    ],
};

static SUBJECT: Msg = Msg {
    name: "Subject",
    fields: &[
        f(1, "kind", Str, Keep),
        f(2, "apiGroup", Str, Opt),
        f(3, "name", Str, Keep),
        f(4, "namespace", Str, Opt),
    ],
};

// authorization/v1 and authentication/v1 (k8s.io/api generated.proto): the review kinds
// `kubectl auth can-i` and `kubectl auth whoami` send. Only the request halves are decoded;
// a status sent by a client is ignored by the server anyway.

static SELF_SUBJECT_ACCESS_REVIEW: Msg = Msg {
    name: "SelfSubjectAccessReview",
    fields: &[m(1, "metadata", &OBJECT_META), m(2, "spec", &SELF_SUBJECT_ACCESS_REVIEW_SPEC)],
};

static SELF_SUBJECT_ACCESS_REVIEW_SPEC: Msg = Msg {
    name: "SelfSubjectAccessReviewSpec",
    fields: &[
        m(1, "resourceAttributes", &RESOURCE_ATTRIBUTES),
        m(2, "nonResourceAttributes", &NON_RESOURCE_ATTRIBUTES),
    ],
};

static SUBJECT_ACCESS_REVIEW: Msg = Msg {
    name: "SubjectAccessReview",
    fields: &[m(1, "metadata", &OBJECT_META), m(2, "spec", &SUBJECT_ACCESS_REVIEW_SPEC)],
};

static SUBJECT_ACCESS_REVIEW_SPEC: Msg = Msg {
    name: "SubjectAccessReviewSpec",
    fields: &[
        m(1, "resourceAttributes", &RESOURCE_ATTRIBUTES),
        m(2, "nonResourceAttributes", &NON_RESOURCE_ATTRIBUTES),
        f(3, "user", Str, Opt),
        f(4, "groups", Str, Rep),
        f(5, "extra", StrList, MapOf),
        f(6, "uid", Str, Opt),
    ],
};

static RESOURCE_ATTRIBUTES: Msg = Msg {
    name: "ResourceAttributes",
    fields: &[
        f(1, "namespace", Str, Opt),
        f(2, "verb", Str, Opt),
        f(3, "group", Str, Opt),
        f(4, "version", Str, Opt),
        f(5, "resource", Str, Opt),
        f(6, "subresource", Str, Opt),
        f(7, "name", Str, Opt),
    ],
};

static NON_RESOURCE_ATTRIBUTES: Msg = Msg {
    name: "NonResourceAttributes",
    fields: &[f(1, "path", Str, Opt), f(2, "verb", Str, Opt)],
};

static SELF_SUBJECT_RULES_REVIEW: Msg = Msg {
    name: "SelfSubjectRulesReview",
    fields: &[m(1, "metadata", &OBJECT_META), m(2, "spec", &SELF_SUBJECT_RULES_REVIEW_SPEC)],
};

static SELF_SUBJECT_RULES_REVIEW_SPEC: Msg =
    Msg { name: "SelfSubjectRulesReviewSpec", fields: &[f(1, "namespace", Str, Opt)] };

static SELF_SUBJECT_REVIEW: Msg =
    Msg { name: "SelfSubjectReview", fields: &[m(1, "metadata", &OBJECT_META)] };

static TOKEN_REVIEW: Msg = Msg {
    name: "TokenReview",
    fields: &[m(1, "metadata", &OBJECT_META), m(2, "spec", &TOKEN_REVIEW_SPEC)],
};

static TOKEN_REVIEW_SPEC: Msg = Msg {
    name: "TokenReviewSpec",
    fields: &[f(1, "token", Str, Opt), f(2, "audiences", Str, Rep)],
};

static TOKEN_REQUEST: Msg = Msg {
    name: "TokenRequest",
    fields: &[m(1, "metadata", &OBJECT_META), m(2, "spec", &TOKEN_REQUEST_SPEC)],
};

static TOKEN_REQUEST_SPEC: Msg = Msg {
    name: "TokenRequestSpec",
    fields: &[
        f(1, "audiences", Str, Rep),
        m(3, "boundObjectRef", &BOUND_OBJECT_REFERENCE),
        f(4, "expirationSeconds", Int64, Opt),
    ],
};

static BOUND_OBJECT_REFERENCE: Msg = Msg {
    name: "BoundObjectReference",
    fields: &[
        f(1, "kind", Str, Opt),
        f(2, "apiVersion", Str, Opt),
        f(3, "name", Str, Opt),
        f(4, "uid", Str, Opt),
    ],
};

static ROLE_REF: Msg = Msg {
    name: "RoleRef",
    fields: &[f(1, "apiGroup", Str, Keep), f(2, "kind", Str, Keep), f(3, "name", Str, Keep)],
};

// ---------------------------------------------------------------------------------------------
// The decoder.

/// Decodes the fields of `buf` (a `msg`) into `obj`. A message field that occurs twice is merged
/// and repeated fields append, as protobuf defines.
fn decode_into(
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    // A hand encoder, per the .proto field numbers.

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    /// A length-delimited field.
    fn len(num: u32, body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        varint((u64::from(num) << 3) | 2, &mut out);
        varint(body.len() as u64, &mut out);
        out.extend_from_slice(body);
        out
    }

    fn s(num: u32, text: &str) -> Vec<u8> {
        len(num, text.as_bytes())
    }

    /// A varint field.
    fn int(num: u32, v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        varint(u64::from(num) << 3, &mut out);
        varint(v, &mut out);
        out
    }

    fn cat(parts: &[Vec<u8>]) -> Vec<u8> {
        parts.concat()
    }

    fn entry(num: u32, key: &str, value: &[u8]) -> Vec<u8> {
        len(num, &cat(&[s(1, key), len(2, value)]))
    }

    /// The whole body: prefix, then `runtime.Unknown{typeMeta, raw}`.
    fn body(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend(len(1, &cat(&[s(1, api_version), s(2, kind)])));
        out.extend(len(2, raw));
        out.extend(s(3, ""));
        out.extend(s(4, ""));
        out
    }

    /// ObjectMeta as gogo-protobuf writes it for a new object: every non-pointer field, empty.
    fn meta(name: &str, namespace: &str, extra: &[Vec<u8>]) -> Vec<u8> {
        let mut m = cat(&[
            s(1, name),
            s(2, ""),
            s(3, namespace),
            s(4, ""),
            s(5, ""),
            s(6, ""),
            int(7, 0),
            len(8, &[]),
        ]);
        for e in extra {
            m.extend_from_slice(e);
        }
        len(1, &m)
    }

    #[test]
    fn namespace_as_kubectl_sends_it() {
        let raw = cat(&[meta("ns1", "", &[]), len(2, &[]), len(3, &s(1, ""))]);
        let v = decode(&body("v1", "Namespace", &raw)).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": "ns1"},
                   "spec": {}, "status": {}})
        );
    }

    #[test]
    fn config_map_data_binary_data_labels_and_immutable() {
        let raw = cat(&[
            meta("cm", "default", &[entry(11, "app", b"web"), entry(12, "note", b"")]),
            entry(2, "k", b"v"),
            entry(2, "empty", b""),
            entry(3, "bin", &[0, 0xff, 0x10]),
            int(4, 1),
        ]);
        let v = decode(&body("v1", "ConfigMap", &raw)).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "cm", "namespace": "default",
                                "labels": {"app": "web"}, "annotations": {"note": ""}},
                   "data": {"k": "v", "empty": ""},
                   "binaryData": {"bin": "AP8Q"},
                   "immutable": true})
        );
    }

    #[test]
    fn secret_data_is_base64_and_a_false_pointer_is_kept() {
        let raw = cat(&[
            meta("s", "default", &[]),
            entry(2, "password", b"hunter2"),
            entry(4, "plain", b"text"),
            s(3, "Opaque"),
            int(5, 0),
        ]);
        let v = decode(&body("v1", "Secret", &raw)).unwrap();
        assert_eq!(v["data"], json!({"password": "aHVudGVyMg=="}));
        assert_eq!(v["stringData"], json!({"plain": "text"}));
        assert_eq!(v["type"], "Opaque");
        assert_eq!(v["immutable"], false);
    }

    #[test]
    fn service_account_references() {
        let raw = cat(&[
            meta("sa1", "default", &[]),
            len(2, &cat(&[s(3, "tok"), s(2, ""), s(1, "")])),
            len(3, &s(1, "pull")),
            int(4, 0),
        ]);
        let v = decode(&body("v1", "ServiceAccount", &raw)).unwrap();
        assert_eq!(v["secrets"], json!([{"name": "tok"}]));
        assert_eq!(v["imagePullSecrets"], json!([{"name": "pull"}]));
        assert_eq!(v["automountServiceAccountToken"], false);
    }

    #[test]
    fn rbac_role_binding_and_cluster_role() {
        let subject = cat(&[s(1, "User"), s(2, "rbac.authorization.k8s.io"), s(3, "u"), s(4, "")]);
        let sa = cat(&[s(1, "ServiceAccount"), s(2, ""), s(3, "sa1"), s(4, "ns1")]);
        let role_ref = cat(&[s(1, "rbac.authorization.k8s.io"), s(2, "ClusterRole"), s(3, "view")]);
        let raw = cat(&[meta("x", "", &[]), len(2, &subject), len(2, &sa), len(3, &role_ref)]);
        let v = decode(&body("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", &raw)).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "x"},
                   "subjects": [
                       {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "u"},
                       {"kind": "ServiceAccount", "name": "sa1", "namespace": "ns1"}],
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                               "name": "view"}})
        );

        let rule = cat(&[s(1, "get"), s(1, "list"), s(2, ""), s(3, "configmaps"), s(4, "a")]);
        let selector = len(1, &cat(&[entry(1, "agg", b"true")]));
        let raw = cat(&[meta("r", "", &[]), len(2, &rule), len(3, &selector)]);
        let v = decode(&body("rbac.authorization.k8s.io/v1", "ClusterRole", &raw)).unwrap();
        assert_eq!(
            v["rules"],
            json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"],
                    "resourceNames": ["a"]}])
        );
        assert_eq!(
            v["aggregationRule"],
            json!({"clusterRoleSelectors": [{"matchLabels": {"agg": "true"}}]})
        );
    }

    #[test]
    fn times_micro_times_owner_references_and_managed_fields() {
        // 2024-01-02T03:04:05Z plus 123456789ns.
        let ts = cat(&[int(1, 1_704_164_645), int(2, 123_456_789)]);
        let owner =
            cat(&[s(1, "Namespace"), s(3, "ns1"), s(4, "u-1"), s(5, "v1"), int(6, 1), int(7, 0)]);
        let mf = cat(&[
            s(1, "kubectl"),
            s(2, "Update"),
            s(3, "coordination.k8s.io/v1"),
            len(4, &int(1, 1_704_164_645)),
            s(6, "FieldsV1"),
            len(7, &s(1, r#"{"f:spec":{}}"#)),
            s(8, ""),
        ]);
        let extra = [len(9, &ts), int(10, 30), len(13, &owner), s(14, "f1"), len(17, &mf)];
        let spec = cat(&[s(1, "holder"), int(2, 15), len(3, &ts), len(4, &int(1, 0)), int(5, 0)]);
        let raw = cat(&[meta("l", "default", &extra), len(2, &spec)]);
        let v = decode(&body("coordination.k8s.io/v1", "Lease", &raw)).unwrap();
        assert_eq!(v["metadata"]["deletionTimestamp"], "2024-01-02T03:04:05Z");
        assert_eq!(v["metadata"]["deletionGracePeriodSeconds"], 30);
        assert_eq!(
            v["metadata"]["ownerReferences"],
            json!([{"kind": "Namespace", "name": "ns1", "uid": "u-1", "apiVersion": "v1",
                    "controller": true, "blockOwnerDeletion": false}])
        );
        assert_eq!(v["metadata"]["finalizers"], json!(["f1"]));
        assert_eq!(
            v["metadata"]["managedFields"],
            json!([{"manager": "kubectl", "operation": "Update",
                    "apiVersion": "coordination.k8s.io/v1", "time": "2024-01-02T03:04:05Z",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}])
        );
        assert_eq!(
            v["spec"],
            json!({"holderIdentity": "holder", "leaseDurationSeconds": 15,
                   "acquireTime": "2024-01-02T03:04:05.123456Z",
                   "renewTime": "1970-01-01T00:00:00.000000Z", "leaseTransitions": 0})
        );
    }

    #[test]
    fn csr_request_bytes_usages_and_extra() {
        let spec = cat(&[
            len(1, b"PEM"),
            s(7, "kubernetes.io/kube-apiserver-client"),
            int(8, 600),
            s(5, "client auth"),
            s(2, ""),
            s(3, ""),
            entry(6, "scopes", &cat(&[s(1, "a"), s(1, "b")])),
        ]);
        let cond = cat(&[s(1, "Approved"), s(6, "True"), s(2, "ok"), s(3, ""), len(4, &[])]);
        let status = cat(&[len(1, &cond), len(2, &[])]);
        let raw = cat(&[meta("c", "", &[]), len(2, &spec), len(3, &status)]);
        let v = decode(&body("certificates.k8s.io/v1", "CertificateSigningRequest", &raw)).unwrap();
        assert_eq!(
            v["spec"],
            json!({"request": "UEVN", "signerName": "kubernetes.io/kube-apiserver-client",
                   "expirationSeconds": 600, "usages": ["client auth"],
                   "extra": {"scopes": ["a", "b"]}})
        );
        assert_eq!(
            v["status"],
            json!({"conditions": [{"type": "Approved", "status": "True", "reason": "ok"}]})
        );
    }

    #[test]
    fn events_of_both_groups() {
        let source = cat(&[s(1, "kubelet"), s(2, "")]);
        let raw = cat(&[
            meta("e", "default", &[]),
            len(2, &cat(&[s(1, "Pod"), s(3, "p")])),
            s(3, "Started"),
            len(5, &source),
            len(6, &[]),
            int(8, 2),
            len(10, &[]),
            s(14, ""),
            s(15, ""),
        ]);
        let v = decode(&body("v1", "Event", &raw)).unwrap();
        assert_eq!(v["involvedObject"], json!({"kind": "Pod", "name": "p"}));
        assert_eq!(v["source"], json!({"component": "kubelet"}));
        assert_eq!(v["count"], 2);
        assert!(v.get("firstTimestamp").is_none() && v.get("eventTime").is_none());
        assert_eq!(v["reportingComponent"], "");

        let raw = cat(&[
            meta("e", "default", &[]),
            len(2, &int(1, 1)),
            s(4, "ctl"),
            len(8, &s(3, "p")),
            s(10, "hello"),
            int(15, 0),
        ]);
        let v = decode(&body("events.k8s.io/v1", "Event", &raw)).unwrap();
        assert_eq!(v["eventTime"], "1970-01-01T00:00:01.000000Z");
        assert_eq!(v["reportingController"], "ctl");
        assert_eq!(v["regarding"], json!({"name": "p"}));
        assert_eq!(v["note"], "hello");
        assert!(v.get("deprecatedCount").is_none());
    }

    #[test]
    fn unknown_fields_of_every_wire_type_are_skipped() {
        let mut unknown = int(99, 7);
        unknown.extend(s(98, "x"));
        varint((97 << 3) | 1, &mut unknown);
        unknown.extend([0; 8]);
        varint((96 << 3) | 5, &mut unknown);
        unknown.extend([0; 4]);
        let raw = cat(&[meta("cm", "default", &[unknown.clone()]), unknown.clone()]);
        let mut b = body("v1", "ConfigMap", &raw);
        b.extend(&unknown); // in runtime.Unknown too
        let v = decode(&b).unwrap();
        assert_eq!(
            v["metadata"],
            json!({"name": "cm", "namespace": "default",
            })
        );
    }

    #[test]
    fn a_message_sent_twice_is_merged_and_a_later_zero_clears() {
        let raw = cat(&[
            len(1, &cat(&[s(1, "a"), entry(11, "x", b"1")])),
            len(1, &cat(&[s(3, "default"), entry(11, "y", b"2")])),
            s(3, "Opaque"),
            s(3, ""),
        ]);
        let v = decode(&body("v1", "Secret", &raw)).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "a", "labels": {"x": "1", "y": "2"},
                                "namespace": "default"}})
        );
    }

    #[test]
    fn malformed_bodies_are_bad_requests() {
        let ns = cat(&[meta("ns1", "", &[])]);
        let cases: Vec<(Vec<u8>, Error)> = vec![
            (b"{}".to_vec(), Error::Prefix),
            (MAGIC.to_vec(), Error::Empty),
            // A tag whose varint never ends.
            ([MAGIC, &[0x8a]].concat(), Error::Varint { message: "Unknown", offset: 0 }),
            // raw claims 100 bytes and has 1.
            ([MAGIC, &[0x12, 100, 0]].concat(), Error::Truncated { message: "Unknown", field: 2 }),
            // An 11-byte varint.
            (
                [MAGIC, &[0x10], &[0xff; 11]].concat(),
                Error::Varint { message: "Unknown", offset: 1 },
            ),
            // Field number 0; a group.
            ([MAGIC, &[0x02, 0]].concat(), Error::BadTag { message: "Unknown", field: 0, wire: 2 }),
            ([MAGIC, &[0x0b]].concat(), Error::BadTag { message: "Unknown", field: 1, wire: 3 }),
            // metadata.name as a varint.
            (
                body("v1", "Namespace", &len(1, &int(1, 5))),
                Error::WireType {
                    message: "ObjectMeta",
                    name: "name",
                    field: 1,
                    got: VARINT,
                    expected: LEN,
                },
            ),
            // labels as a varint.
            (
                body("v1", "Namespace", &len(1, &int(11, 5))),
                Error::WireType {
                    message: "ObjectMeta",
                    name: "labels",
                    field: 11,
                    got: VARINT,
                    expected: LEN,
                },
            ),
            (
                body("v1", "Namespace", &len(1, &[0x0a, 1, 0xff])),
                Error::Value {
                    message: "ObjectMeta",
                    name: "name",
                    detail: "the string is not valid UTF-8".into(),
                },
            ),
            (
                body("v1", "Namespace", &len(1, &len(8, &int(1, u64::MAX >> 1)))),
                Error::Value {
                    message: "ObjectMeta",
                    name: "creationTimestamp",
                    detail: "the time 9223372036854775807s 0ns is out of range".into(),
                },
            ),
            ([MAGIC, &len(2, &ns)].concat(), Error::MissingKind),
        ];
        for (bytes, want) in cases {
            let got = decode(&bytes).unwrap_err();
            assert_eq!(got, want, "{bytes:?}");
            let api = ApiError::from(got);
            assert_eq!((api.code, api.reason), (400, "BadRequest"), "{api:?}");
            assert!(api.message.contains("not a valid Kubernetes protobuf message"), "{api:?}");
        }
    }

    #[test]
    fn an_unsupported_kind_is_415_listing_the_accepted_ones() {
        let err = decode(&body("v1", "Pod", &meta("p", "default", &[]))).unwrap_err();
        assert!(matches!(&err, Error::UnsupportedKind { kind, .. } if kind == "Pod"));
        let api = ApiError::from(err);
        assert_eq!((api.code, api.reason), (415, "UnsupportedMediaType"));
        assert!(api.message.starts_with("protobuf bodies of v1, Kind=Pod are not supported"));
        assert!(api.message.contains("v1/ConfigMap"), "{}", api.message);
        assert!(api.message.contains("rbac.authorization.k8s.io/v1/ClusterRoleBinding"));
    }

    #[test]
    fn every_table_is_consistent() {
        fn check(msg: &'static Msg, seen: &mut Vec<&'static str>) {
            if seen.contains(&msg.name) {
                return;
            }
            seen.push(msg.name);
            for (i, a) in msg.fields.iter().enumerate() {
                assert!(a.num > 0, "{}.{}", msg.name, a.name);
                for b in &msg.fields[i + 1..] {
                    assert!(a.num != b.num && a.name != b.name, "{}.{}", msg.name, a.name);
                }
                if let Ty::Msg(inner) = a.ty {
                    check(inner, seen);
                }
            }
        }
        let mut seen = Vec::new();
        for (_, _, msg) in KINDS {
            check(msg, &mut seen);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Random bytes, with or without the prefix: an error or an object, never a panic.
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode(&bytes);
            let _ = decode(&[MAGIC, &bytes].concat());
        }

        /// Random typed messages of every kind: the decoder walks the tables on hostile input.
        #[test]
        fn random_objects_never_panic(
            kind in 0..KINDS.len(),
            raw in proptest::collection::vec(any::<u8>(), 0..512),
        ) {
            let (av, k, _) = KINDS[kind];
            if let Ok(v) = decode(&body(av, k, &raw)) {
                prop_assert_eq!(&v["kind"], k);
            }
        }

        /// Random well-formed metadata: whatever strings and labels, it decodes as sent.
        #[test]
        fn well_formed_metadata_round_trips(
            name in "[a-z0-9.-]{1,20}",
            labels in proptest::collection::btree_map("[a-z]{1,8}", ".{0,8}", 0..4),
        ) {
            let entries: Vec<Vec<u8>> =
                labels.iter().map(|(k, v)| entry(11, k, v.as_bytes())).collect();
            let v = decode(&body("v1", "ConfigMap", &meta(&name, "default", &entries))).unwrap();
            prop_assert_eq!(&v["metadata"]["name"], &Value::String(name));
            if !labels.is_empty() {
                prop_assert_eq!(&v["metadata"]["labels"], &json!(labels));
            }
        }
    }
}
