//! Server-side `Table` output (kube-api.md §4), which `kubectl get` asks for: each kind's columns
//! (a CRD's `additionalPrinterColumns`, kube-apiserver's printers for the core kinds, or the
//! default convertor's `Created At`), how cells are computed, and the `meta.k8s.io` Table of a
//! list, of one object or of one watch event; also the metadata-only `PartialObjectMetadata`.

use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::machinery::error::ApiError;
use crate::machinery::object;
use ocm_proto::jsonpath::JsonPath;

/// `ObjectMeta.name`'s description, which kube-apiserver gives the `Name` column.
const NAME_DOC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
/// `ObjectMeta.creationTimestamp`'s description, given to `Age` and `Created At`.
const CREATED_DOC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// How a column's cell is computed from an object.
#[derive(Debug, Clone)]
pub enum Cell {
    /// A CRD printer column: the first match of the path, converted to the column's type.
    Path(JsonPath),
    /// A CRD column whose path does not parse: always empty (kube-apiserver falls back the same way).
    Invalid,
    /// The core printers' `Age`: a human duration since `metadata.creationTimestamp`.
    Age,
    /// Computed by a core printer.
    Computed(fn(&Value) -> Value),
}

/// One column after `Name`.
#[derive(Debug, Clone)]
pub struct Column {
    /// Header.
    pub name: String,
    /// `string`, `integer`, `number`, `boolean` or `date`.
    pub type_: String,
    /// Free-form format.
    pub format: String,
    /// Description.
    pub description: String,
    /// 0 always shown; more only with `-o wide`.
    pub priority: i32,
    /// How the cell is computed.
    pub cell: Cell,
}

impl Column {
    /// A column computed by a core printer.
    pub fn computed(
        name: &str,
        type_: &str,
        priority: i32,
        description: &str,
        f: fn(&Value) -> Value,
    ) -> Column {
        Column {
            name: name.to_owned(),
            type_: type_.to_owned(),
            format: String::new(),
            description: description.to_owned(),
            priority,
            cell: Cell::Computed(f),
        }
    }

    /// The core printers' `Age` column.
    pub fn age() -> Column {
        Column {
            name: "Age".into(),
            type_: "string".into(),
            format: String::new(),
            description: CREATED_DOC.into(),
            priority: 0,
            cell: Cell::Age,
        }
    }

    /// A CRD `additionalPrinterColumns` entry.
    pub fn from_crd(c: &ocm_proto::crd::PrinterColumn) -> Column {
        let cell = match JsonPath::parse(&c.json_path) {
            Ok(path) => Cell::Path(path),
            Err(e) => {
                tracing::warn!(column = %c.name, error = %e, "printer column falls back to empty cells");
                Cell::Invalid
            }
        };
        Column {
            name: c.name.clone(),
            type_: c.type_.clone(),
            format: c.format.clone().unwrap_or_default(),
            description: c.description.clone().unwrap_or_else(|| {
                format!("Custom resource definition column (in JSONPath format): {}", c.json_path)
            }),
            priority: c.priority,
            cell,
        }
    }

    fn value(&self, obj: &Value, now: OffsetDateTime) -> Value {
        self.at(self.stable_value(obj), now)
    }

    /// Whether the cell depends on when it is computed (an age).
    fn timed(&self) -> bool {
        match &self.cell {
            Cell::Age => true,
            Cell::Path(_) => self.type_ == "date",
            Cell::Invalid | Cell::Computed(_) => false,
        }
    }

    /// The cell as it stands at every moment: for a timed cell the timestamp it counts from,
    /// for any other the cell itself.
    fn stable_value(&self, obj: &Value) -> Value {
        match &self.cell {
            Cell::Invalid => Value::Null,
            Cell::Age => obj.pointer("/metadata/creationTimestamp").cloned().unwrap_or(Value::Null),
            Cell::Computed(f) => f(obj),
            Cell::Path(path) => match path.find(obj).first() {
                None => Value::Null,
                Some(v) if self.timed() => (*v).clone(),
                // Only a `date` cell reads the time.
                Some(v) => typed_cell(&self.type_, v, OffsetDateTime::UNIX_EPOCH),
            },
        }
    }

    /// The cell at `now` from its stable value.
    fn at(&self, stable: Value, now: OffsetDateTime) -> Value {
        match &self.cell {
            Cell::Age => Value::String(age(stable.as_str(), now, human_duration)),
            Cell::Path(_) if self.timed() && !stable.is_null() => {
                typed_cell(&self.type_, &stable, now)
            }
            _ => stable,
        }
    }
}

/// Whether a row of `columns` can be kept and finished later ([`stable_cells`], [`cells_at`]):
/// not when a core printer computes a column, which may read the time itself.
pub fn rows_keep(columns: &[Column]) -> bool {
    !columns.iter().any(|c| matches!(c.cell, Cell::Computed(_)))
}

/// A row's cells as they stand at every moment (the name first; a timed column's timestamp in
/// place of its age), for columns that [`rows_keep`].
pub fn stable_cells(columns: &[Column], obj: &Value) -> Vec<Value> {
    let name = obj.pointer("/metadata/name").cloned().unwrap_or_else(|| json!(""));
    std::iter::once(name).chain(columns.iter().map(|c| c.stable_value(obj))).collect()
}

/// A row's cells at `now` from its [`stable_cells`].
pub fn cells_at(columns: &[Column], stable: Vec<Value>, now: OffsetDateTime) -> Vec<Value> {
    let mut cells = stable.into_iter();
    let name = cells.next().unwrap_or_else(|| json!(""));
    std::iter::once(name).chain(columns.iter().zip(cells).map(|(c, v)| c.at(v, now))).collect()
}

/// The opening of a Table with `columns`' definitions and `metadata`, up to its first row: a
/// list's rows are written after it one by one, then [`TABLE_END`].
pub fn table_head(columns: &[Column], metadata: Value, req: TableRequest) -> Vec<u8> {
    let empty = build(columns, Vec::new(), metadata, req, true);
    let mut head = serde_json::to_vec(&empty).unwrap_or_default();
    // `"rows":[]}`: the rows go before the last two bytes.
    head.truncate(head.len().saturating_sub(2));
    head
}

/// What closes a Table opened by [`table_head`].
pub const TABLE_END: &[u8] = b"]}";

/// A column set built on first use and shared after: columns are asked for on every Table
/// request and every event of a Table watch.
fn shared(cell: &'static OnceLock<Arc<[Column]>>, build: fn() -> Vec<Column>) -> Arc<[Column]> {
    Arc::clone(cell.get_or_init(|| Arc::from(build())))
}

/// The columns of a CRD version: its printer columns, or `Age` when it has none.
pub fn crd_columns(columns: &[ocm_proto::crd::PrinterColumn]) -> Arc<[Column]> {
    if columns.is_empty() {
        static AGE: OnceLock<Arc<[Column]>> = OnceLock::new();
        return shared(&AGE, || {
            vec![Column::from_crd(&ocm_proto::crd::PrinterColumn {
                name: "Age".into(),
                type_: "date".into(),
                format: None,
                description: Some(CREATED_DOC.into()),
                priority: 0,
                json_path: ".metadata.creationTimestamp".into(),
            })]
        });
    }
    columns.iter().map(Column::from_crd).collect()
}

/// kube-apiserver's default convertor (kinds without a printer): `Created At`, RFC 3339.
pub fn default_columns() -> Arc<[Column]> {
    static COLS: OnceLock<Arc<[Column]>> = OnceLock::new();
    shared(&COLS, || {
        vec![Column {
            name: "Created At".into(),
            type_: "date".into(),
            format: String::new(),
            description: CREATED_DOC.into(),
            priority: 0,
            cell: Cell::Computed(|o| {
                o.pointer("/metadata/creationTimestamp").cloned().unwrap_or(Value::Null)
            }),
        }]
    })
}

/// A CRD cell of a non-`Name` column: strings print the value (compact JSON for maps and
/// lists), numbers and booleans keep their JSON type (else empty), dates become a short age.
fn typed_cell(type_: &str, v: &Value, now: OffsetDateTime) -> Value {
    match type_ {
        "string" => Value::String(match v {
            Value::String(s) => s.clone(),
            Value::Null => "<no value>".into(),
            Value::Array(_) | Value::Object(_) => v.to_string(),
            other => other.to_string(),
        }),
        "integer" => match v {
            Value::Number(n) => n
                .as_i64()
                .or_else(|| n.as_f64().map(|f| f.trunc() as i64))
                .map_or(Value::Null, Value::from),
            _ => Value::Null,
        },
        "number" => match v {
            Value::Number(n) => n.as_f64().map_or(Value::Null, Value::from),
            _ => Value::Null,
        },
        "boolean" => match v {
            Value::Bool(_) => v.clone(),
            _ => Value::Null,
        },
        "date" => match v {
            Value::String(s) => Value::String(age(Some(s), now, short_human_duration)),
            _ => Value::Null,
        },
        _ => Value::Null,
    }
}

/// The age of an RFC 3339 timestamp at `now` as `f` writes it: `<unknown>` when unset or empty,
/// `<invalid>` when it does not parse.
fn age(timestamp: Option<&str>, now: OffsetDateTime, f: fn(time::Duration) -> String) -> String {
    match timestamp.filter(|s| !s.is_empty()) {
        None => "<unknown>".into(),
        Some(s) => match OffsetDateTime::parse(s, &Rfc3339) {
            Ok(t) => f(now - t),
            Err(_) => "<invalid>".into(),
        },
    }
}

/// The human age of a timestamp field (core printers), `<unknown>` when unset.
pub fn age_of_field(obj: &Value, pointer: &str) -> Value {
    let ts = obj.pointer(pointer).and_then(Value::as_str);
    Value::String(age(ts, crate::machinery::clock::now(), human_duration))
}

/// apimachinery's `ShortHumanDuration` (CRD `date` cells): `5s`, `3m`, `7h`, `2d`, `1y`.
pub fn short_human_duration(d: time::Duration) -> String {
    let seconds = d.whole_seconds();
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    let (minutes, hours) = (seconds / 60, seconds / 3600);
    if seconds < 60 {
        format!("{seconds}s")
    } else if minutes < 60 {
        format!("{minutes}m")
    } else if hours < 24 {
        format!("{hours}h")
    } else if hours < 24 * 365 {
        format!("{}d", hours / 24)
    } else {
        format!("{}y", hours / 24 / 365)
    }
}

/// apimachinery's `HumanDuration` (core printers' `Age`): `119s`, `3m20s`, `5h7m`, `2d3h`, `3y100d`.
pub fn human_duration(d: time::Duration) -> String {
    let seconds = d.whole_seconds();
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 { format!("{minutes}m") } else { format!("{minutes}m{s}s") };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 { format!("{hours}h") } else { format!("{hours}h{m}m") };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 192 {
        let h = hours % 24;
        return if h == 0 { format!("{}d", hours / 24) } else { format!("{}d{h}h", hours / 24) };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        let y = hours / 24 / 365;
        return if dy == 0 { format!("{y}y") } else { format!("{y}y{dy}d") };
    }
    format!("{}y", hours / 24 / 365)
}

/// What each row carries (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Include {
    /// `PartialObjectMetadata` (the default).
    Metadata,
    /// The whole object.
    Object,
    /// Nothing (`null`).
    None,
}

impl Include {
    /// Parses `includeObject`.
    pub fn parse(v: Option<&str>) -> Result<Include, ApiError> {
        match v.unwrap_or("") {
            "" | "Metadata" => Ok(Include::Metadata),
            "Object" => Ok(Include::Object),
            "None" => Ok(Include::None),
            other => Err(ApiError::bad_request(format!(
                "Unable to convert to Table as requested: includeObject: Invalid value: \
                 {other:?}: must be 'Metadata', 'Object', 'None', or empty"
            ))),
        }
    }
}

/// A Table request: the `meta.k8s.io` version asked for and what rows carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableRequest {
    /// `v1` or `v1beta1`.
    pub version: &'static str,
    /// `includeObject`.
    pub include: Include,
}

/// Builds a Table of `objects` (already at the request's version) with `metadata` (the list's
/// resourceVersion and continue, or the object's resourceVersion). `headers` false leaves
/// `columnDefinitions` null, as later events of a watch do.
pub fn build(
    columns: &[Column],
    objects: Vec<Value>,
    metadata: Value,
    req: TableRequest,
    headers: bool,
) -> Value {
    let now = crate::machinery::clock::now();
    let definitions = if headers {
        let mut defs = vec![json!({
            "name": "Name", "type": "string", "format": "name",
            "description": NAME_DOC, "priority": 0,
        })];
        defs.extend(columns.iter().map(|c| {
            json!({
                "name": c.name, "type": c.type_, "format": c.format,
                "description": c.description, "priority": c.priority,
            })
        }));
        Value::Array(defs)
    } else {
        Value::Null
    };
    let rows: Vec<Value> = objects
        .into_iter()
        .map(|obj| {
            let name = obj.pointer("/metadata/name").cloned().unwrap_or_else(|| json!(""));
            let mut cells = vec![name];
            cells.extend(columns.iter().map(|c| c.value(&obj, now)));
            let object = match req.include {
                Include::Object => obj,
                Include::None => Value::Null,
                Include::Metadata => partial_metadata(&obj, req.version),
            };
            object::json_object([("cells", Value::Array(cells)), ("object", object)])
        })
        .collect();
    object::json_object([
        ("kind", Value::from("Table")),
        ("apiVersion", Value::from(format!("meta.k8s.io/{}", req.version))),
        ("metadata", metadata),
        ("columnDefinitions", definitions),
        ("rows", Value::Array(rows)),
    ])
}

// ---------------------------------------------------------------------------------------------
// Core printers (kube-apiserver pkg/printers/internalversion): the server always sends the
// wide columns; kubectl hides priority > 0 without `-o wide`.

fn len_of(obj: &Value, pointer: &str) -> usize {
    match obj.pointer(pointer) {
        Some(Value::Object(m)) => m.len(),
        Some(Value::Array(a)) => a.len(),
        _ => 0,
    }
}

fn str_at(obj: &Value, pointer: &str) -> String {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("").to_owned()
}

/// ConfigMap: `Data` (entries of data and binaryData), `Age`.
pub fn config_map_columns() -> Arc<[Column]> {
    static COLS: OnceLock<Arc<[Column]>> = OnceLock::new();
    shared(&COLS, || {
        vec![
            Column::computed("Data", "string", 0, "Data contains the configuration data.", |o| {
                json!(len_of(o, "/data") + len_of(o, "/binaryData"))
            }),
            Column::age(),
        ]
    })
}

/// Secret: `Type`, `Data`, `Age`.
pub fn secret_columns() -> Arc<[Column]> {
    static COLS: OnceLock<Arc<[Column]>> = OnceLock::new();
    shared(&COLS, || {
        vec![
            Column::computed(
                "Type",
                "string",
                0,
                "Used to facilitate programmatic handling of secret data.",
                |o| json!(str_at(o, "/type")),
            ),
            Column::computed("Data", "string", 0, "Data contains the secret data.", |o| {
                json!(len_of(o, "/data") + len_of(o, "/stringData"))
            }),
            Column::age(),
        ]
    })
}

/// Namespace: `Status` (phase), `Age`.
pub fn namespace_columns() -> Arc<[Column]> {
    static COLS: OnceLock<Arc<[Column]>> = OnceLock::new();
    shared(&COLS, || {
        vec![
            Column::computed("Status", "string", 0, "The status of the namespace", |o| {
                json!(str_at(o, "/status/phase"))
            }),
            Column::age(),
        ]
    })
}

/// ServiceAccount: `Secrets` (count), `Age`.
pub fn service_account_columns() -> Arc<[Column]> {
    static COLS: OnceLock<Arc<[Column]>> = OnceLock::new();
    shared(&COLS, || {
        vec![
            Column::computed(
                "Secrets",
                "string",
                0,
                "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
                |o| json!(len_of(o, "/secrets")),
            ),
            Column::age(),
        ]
    })
}

/// Lease: `Holder`, `Age`.
pub fn lease_columns() -> Arc<[Column]> {
    static COLS: OnceLock<Arc<[Column]>> = OnceLock::new();
    shared(&COLS, || {
        vec![
            Column::computed(
                "Holder",
                "string",
                0,
                "holderIdentity contains the identity of the holder of a current lease.",
                |o| json!(str_at(o, "/spec/holderIdentity")),
            ),
            Column::age(),
        ]
    })
}

/// ControllerRevision: `Controller` (`<kind>.<group>/<name>` of its controller owner), `Revision`,
/// `Age`, as kubectl prints them.
pub fn controller_revision_columns() -> Arc<[Column]> {
    static COLS: OnceLock<Arc<[Column]>> = OnceLock::new();
    shared(&COLS, || {
        vec![
            Column::computed(
                "Controller",
                "string",
                0,
                "The controller that owns the revision.",
                |o| {
                    let owners = o.pointer("/metadata/ownerReferences").and_then(Value::as_array);
                    let controller = owners
                        .into_iter()
                        .flatten()
                        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true));
                    json!(controller.map_or_else(
                        || "<none>".to_owned(),
                        |r| {
                            let api =
                                r.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
                            let group = api.rsplit_once('/').map_or("", |(g, _)| g);
                            let kind = r.get("kind").and_then(Value::as_str).unwrap_or_default();
                            let name = r.get("name").and_then(Value::as_str).unwrap_or_default();
                            let kind = if group.is_empty() {
                                kind.to_lowercase()
                            } else {
                                format!("{}.{group}", kind.to_lowercase())
                            };
                            format!("{kind}/{name}")
                        }
                    ))
                },
            ),
            Column::computed("Revision", "integer", 0, "The revision's number.", |o| {
                json!(o.get("revision").and_then(Value::as_i64).unwrap_or(0))
            }),
            Column::age(),
        ]
    })
}

/// CertificateSigningRequest: `Age`, `SignerName`, `Requestor`, `RequestedDuration`, `Condition`.
pub fn csr_columns() -> Arc<[Column]> {
    static COLS: OnceLock<Arc<[Column]>> = OnceLock::new();
    shared(&COLS, || {
        vec![
            Column::age(),
            Column::computed("SignerName", "string", 0, "The signer the request is for.", |o| {
                let s = str_at(o, "/spec/signerName");
                json!(if s.is_empty() { "<none>".to_owned() } else { s })
            }),
            Column::computed("Requestor", "string", 0, "The user who created the request.", |o| {
                json!(str_at(o, "/spec/username"))
            }),
            Column::computed(
                "RequestedDuration",
                "string",
                0,
                "The requested duration of validity of the issued certificate.",
                |o| match o.pointer("/spec/expirationSeconds").and_then(Value::as_i64) {
                    Some(s) => json!(human_duration(time::Duration::seconds(s))),
                    None => json!("<none>"),
                },
            ),
            Column::computed("Condition", "string", 0, "The request's conditions.", csr_condition),
        ]
    })
}

/// `Denied`, else `Approved`, else `Pending`; then `,Failed` and `,Issued` (condition types only).
fn csr_condition(o: &Value) -> Value {
    let types: Vec<&str> = o
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|cs| cs.iter().filter_map(|c| c.get("type").and_then(Value::as_str)).collect())
        .unwrap_or_default();
    let mut out = if types.contains(&"Denied") {
        "Denied".to_owned()
    } else if types.contains(&"Approved") {
        "Approved".to_owned()
    } else {
        "Pending".to_owned()
    };
    if types.contains(&"Failed") {
        out.push_str(",Failed");
    }
    if o.pointer("/status/certificate").and_then(Value::as_str).is_some_and(|c| !c.is_empty()) {
        out.push_str(",Issued");
    }
    Value::String(out)
}

/// RoleBinding and ClusterRoleBinding: `Role` (`Kind/name`), `Age`, wide `Users`, `Groups`,
/// `ServiceAccounts`.
pub fn binding_columns() -> Arc<[Column]> {
    static COLS: OnceLock<Arc<[Column]>> = OnceLock::new();
    shared(&COLS, || {
        vec![
            Column::computed(
                "Role",
                "string",
                0,
                "roleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.",
                |o| json!(format!("{}/{}", str_at(o, "/roleRef/kind"), str_at(o, "/roleRef/name"))),
            ),
            Column::age(),
            Column::computed("Users", "string", 1, "Users in the binding", |o| {
                json!(subjects(o, "User", false))
            }),
            Column::computed("Groups", "string", 1, "Groups in the binding", |o| {
                json!(subjects(o, "Group", false))
            }),
            Column::computed(
                "ServiceAccounts",
                "string",
                1,
                "ServiceAccounts in the binding",
                |o| json!(subjects(o, "ServiceAccount", true)),
            ),
        ]
    })
}

fn subjects(o: &Value, kind: &str, with_namespace: bool) -> String {
    let list = o.get("subjects").and_then(Value::as_array);
    list.into_iter()
        .flatten()
        .filter(|s| s.get("kind").and_then(Value::as_str) == Some(kind))
        .map(|s| {
            let name = str_at(s, "/name");
            if with_namespace { format!("{}/{name}", str_at(s, "/namespace")) } else { name }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Event (core/v1 and events.k8s.io/v1 share it): `Last Seen`, `Type`, `Reason`, `Object`,
/// wide `Subobject`, `Source`, then `Message`, wide `First Seen`, `Count`, `Name`.
pub fn event_columns() -> Arc<[Column]> {
    static COLS: OnceLock<Arc<[Column]>> = OnceLock::new();
    shared(&COLS, || {
        vec![
            Column::computed(
                "Last Seen",
                "string",
                0,
                "The time at which the most recent occurrence of this event was recorded.",
                last_seen,
            ),
            Column::computed("Type", "string", 0, "Type of this event (Normal, Warning).", |o| {
                json!(str_at(o, "/type"))
            }),
            Column::computed(
                "Reason",
                "string",
                0,
                "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
                |o| json!(str_at(o, "/reason")),
            ),
            Column::computed("Object", "string", 0, "The object that this event is about.", |o| {
                let kind = str_at(o, "/involvedObject/kind").to_lowercase();
                let name = str_at(o, "/involvedObject/name");
                json!(if name.is_empty() { kind } else { format!("{kind}/{name}") })
            }),
            Column::computed(
                "Subobject",
                "string",
                1,
                "The field of the object the event is about.",
                |o| json!(str_at(o, "/involvedObject/fieldPath")),
            ),
            Column::computed("Source", "string", 1, "The component reporting this event.", |o| {
                let first = |a: &str, b: &str| {
                    let x = str_at(o, a);
                    if x.is_empty() { str_at(o, b) } else { x }
                };
                let component = first("/source/component", "/reportingComponent");
                let host = first("/source/host", "/reportingInstance");
                json!(if host.is_empty() { component } else { format!("{component}, {host}") })
            }),
            Column::computed(
                "Message",
                "string",
                0,
                "A human-readable description of the status of this operation.",
                |o| json!(str_at(o, "/message").trim()),
            ),
            Column::computed(
                "First Seen",
                "string",
                1,
                "The time at which the event was first recorded.",
                first_seen,
            ),
            Column::computed(
                "Count",
                "string",
                1,
                "The number of times this event has occurred.",
                |o| {
                    if let Some(n) = o.pointer("/series/count").and_then(Value::as_i64) {
                        return json!(n);
                    }
                    match o.get("count").and_then(Value::as_i64) {
                        Some(n) if n != 0 => json!(n),
                        _ => json!(1),
                    }
                },
            ),
            Column {
                format: "name".into(),
                ..Column::computed("Name", "string", 1, NAME_DOC, |o| {
                    json!(str_at(o, "/metadata/name"))
                })
            },
        ]
    })
}

fn first_seen(o: &Value) -> Value {
    match age_of_field(o, "/firstTimestamp") {
        Value::String(s) if s == "<unknown>" => age_of_field(o, "/eventTime"),
        v => v,
    }
}

fn last_seen(o: &Value) -> Value {
    if o.get("series").is_some_and(Value::is_object) {
        return age_of_field(o, "/series/lastObservedTime");
    }
    match age_of_field(o, "/lastTimestamp") {
        Value::String(s) if s == "<unknown>" => first_seen(o),
        v => v,
    }
}

/// An object's `PartialObjectMetadata` at `meta.k8s.io/<version>` (its whole `metadata`).
pub fn partial_metadata(obj: &Value, version: &str) -> Value {
    object::json_object([
        ("kind", Value::from("PartialObjectMetadata")),
        ("apiVersion", Value::from(format!("meta.k8s.io/{version}"))),
        ("metadata", obj.get("metadata").cloned().unwrap_or_else(|| json!({}))),
    ])
}

/// `metadata` of a one-object Table: the object's resourceVersion.
pub fn object_metadata(obj: &Value) -> Value {
    let mut m = Map::new();
    if let Some(rv) = obj.pointer("/metadata/resourceVersion") {
        m.insert("resourceVersion".into(), rv.clone());
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_rows_finish_as_built_rows() {
        let crd = |name: &str, type_: &str, path: &str| {
            Column::from_crd(&ocm_proto::crd::PrinterColumn {
                name: name.into(),
                type_: type_.into(),
                json_path: path.into(),
                format: None,
                description: None,
                priority: 0,
            })
        };
        let columns = vec![
            crd("Accepted", "boolean", ".spec.hubAcceptsClient"),
            crd("Available", "string", r#".status.conditions[?(@.type=="Available")].status"#),
            crd("Count", "integer", ".status.count"),
            crd("Since", "date", ".status.since"),
            crd("Missing", "date", ".status.missing"),
            Column::age(),
        ];
        let obj = json!({"metadata": {"name": "c1", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"hubAcceptsClient": true},
            "status": {"count": 3, "since": "2026-01-02T00:00:00Z",
                       "conditions": [{"type": "Available", "status": "True"}]}});
        let req = TableRequest { version: "v1", include: Include::None };
        let built = build(&columns, vec![obj.clone()], json!({}), req, true);
        assert!(rows_keep(&columns));
        let kept = cells_at(&columns, stable_cells(&columns, &obj), crate::machinery::clock::now());
        assert_eq!(Value::Array(kept), built["rows"][0]["cells"]);
        let mut head = table_head(&columns, json!({}), req);
        head.extend_from_slice(TABLE_END);
        let empty: Value = serde_json::from_slice(&head).unwrap();
        assert_eq!(empty["rows"], json!([]));
        assert_eq!(empty["columnDefinitions"], built["columnDefinitions"]);
        assert!(!rows_keep(&config_map_columns()));
    }

    #[test]
    fn human_durations_match_apimachinery() {
        let d = time::Duration::seconds;
        let cases = [
            (-5, "<invalid>"),
            (0, "0s"),
            (119, "119s"),
            (200, "3m20s"),
            (180, "3m"),
            (600, "10m"),
            (179 * 60, "179m"),
            (5 * 3600 + 7 * 60, "5h7m"),
            (30 * 3600, "30h"),
            (51 * 3600, "2d3h"),
            (10 * 86400, "10d"),
            (3 * 365 * 86400 + 100 * 86400, "3y100d"),
            (9 * 365 * 86400, "9y"),
        ];
        for (s, want) in cases {
            assert_eq!(human_duration(d(s)), want, "{s}s");
        }
        let short =
            [(59, "59s"), (61, "1m"), (7 * 3600, "7h"), (30 * 3600, "1d"), (400 * 86400, "1y")];
        for (s, want) in short {
            assert_eq!(short_human_duration(d(s)), want, "{s}s");
        }
    }

    #[test]
    fn crd_cells_follow_the_column_type() {
        let now = crate::machinery::clock::now();
        assert_eq!(typed_cell("string", &json!({"a": 1}), now), json!("{\"a\":1}"));
        assert_eq!(typed_cell("string", &json!(true), now), json!("true"));
        assert_eq!(typed_cell("integer", &json!(1.9), now), json!(1));
        assert_eq!(typed_cell("integer", &json!("5"), now), Value::Null);
        assert_eq!(typed_cell("boolean", &json!("true"), now), Value::Null);
        assert_eq!(typed_cell("date", &json!("yesterday"), now), json!("<invalid>"));
        let t = (now - time::Duration::hours(50)).format(&Rfc3339).unwrap();
        assert_eq!(typed_cell("date", &json!(t), now), json!("2d"));
    }

    #[test]
    fn tables_carry_rows_objects_and_headers() {
        let cols = config_map_columns();
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "resourceVersion": "7"}, "data": {"x": "1", "y": "2"},
            "binaryData": {"z": ""}});
        let req = TableRequest { version: "v1", include: Include::Metadata };
        let t = build(&cols, vec![cm.clone()], object_metadata(&cm), req, true);
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["metadata"]["resourceVersion"], "7");
        assert_eq!(t["columnDefinitions"][0]["format"], "name");
        assert_eq!(t["columnDefinitions"][1]["name"], "Data");
        assert_eq!(t["rows"][0]["cells"][0], "a");
        assert_eq!(t["rows"][0]["cells"][1], 3);
        assert_eq!(t["rows"][0]["cells"][2], "<unknown>");
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        let none = TableRequest { version: "v1beta1", include: Include::None };
        let t = build(&cols, vec![cm], json!({}), none, false);
        assert!(t["columnDefinitions"].is_null() && t["rows"][0]["object"].is_null());
        assert_eq!(t["apiVersion"], "meta.k8s.io/v1beta1");
    }

    #[test]
    fn csr_condition_and_binding_subjects() {
        let csr = json!({"status": {"conditions": [{"type": "Approved"}], "certificate": "Zm9v"}});
        assert_eq!(csr_condition(&csr), json!("Approved,Issued"));
        assert_eq!(csr_condition(&json!({})), json!("Pending"));
        let rb = json!({"roleRef": {"kind": "ClusterRole", "name": "admin"}, "subjects": [
            {"kind": "User", "name": "u1"}, {"kind": "User", "name": "u2"},
            {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]});
        let cols = binding_columns();
        let now = crate::machinery::clock::now();
        let cells: Vec<Value> = cols.iter().map(|c| c.value(&rb, now)).collect();
        assert_eq!(cells[0], "ClusterRole/admin");
        assert_eq!(cells[2], "u1, u2");
        assert_eq!(cells[3], "");
        assert_eq!(cells[4], "ns/sa");
        assert!(Include::parse(Some("Foo")).is_err());
    }
}
