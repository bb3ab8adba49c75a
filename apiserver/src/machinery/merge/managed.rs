//! Field management (`metadata.managedFields`) and server-side apply, after
//! structured-merge-diff and kube-apiserver's field manager: every write records which fields
//! its manager set (`Update` entries, one per manager, apiVersion and subresource); an apply
//! (`Apply` entries) merges the manager's whole intent into the object, removes what it no
//! longer applies unless someone else owns it, and refuses to change fields another manager
//! owns unless forced, with one conflict per field.

use serde_json::{Map, Value};

use super::fields::{self, Comparison, FieldSet, Pe};
use super::shape::{ListKind, Shape};
use crate::machinery::object;

/// `operation` of a managedFields entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// Server-side apply.
    Apply,
    /// Any other write.
    Update,
}

/// One `metadata.managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// `manager`.
    pub manager: String,
    /// `operation`.
    pub operation: Operation,
    /// `apiVersion` the fields are written in.
    pub api_version: String,
    /// `time` (RFC 3339), when the owned set last changed.
    pub time: Option<String>,
    /// `subresource` (empty for the main resource).
    pub subresource: String,
    /// `fieldsV1`.
    pub set: FieldSet,
}

impl Entry {
    /// Whether two entries belong to the same manager identity (apply entries are one per
    /// manager and subresource; update entries also per apiVersion).
    fn same_identity(&self, other: &Entry) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource == other.subresource
            && (self.operation == Operation::Apply || self.api_version == other.api_version)
    }

    fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("manager".into(), Value::String(self.manager.clone()));
        let op = match self.operation {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        };
        m.insert("operation".into(), Value::String(op.into()));
        m.insert("apiVersion".into(), Value::String(self.api_version.clone()));
        if let Some(t) = &self.time {
            m.insert("time".into(), Value::String(t.clone()));
        }
        m.insert("fieldsType".into(), Value::String("FieldsV1".into()));
        m.insert("fieldsV1".into(), self.set.to_fields_v1());
        if !self.subresource.is_empty() {
            m.insert("subresource".into(), Value::String(self.subresource.clone()));
        }
        Value::Object(m)
    }

    /// How a conflict message names the manager (kube-apiserver's `printManager`).
    fn describe(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == Operation::Update {
            s.push_str(&format!(" using {}", self.api_version));
            if let Some(t) = &self.time {
                s.push_str(&format!(" at {t}"));
            }
        }
        s
    }
}

/// What is wrong with client-supplied managedFields: `(field path, message)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct BadEntry {
    /// The field at fault, e.g. `metadata.managedFields[0].operation`.
    pub field: String,
    /// Why.
    pub message: String,
}

/// What an object's `metadata.managedFields` says.
#[derive(Debug, Clone, PartialEq)]
pub enum Managed {
    /// No managedFields at all (or an empty list).
    Absent,
    /// `[{}]`: the client asks to stop tracking (Kubernetes' documented reset).
    Reset,
    /// The entries.
    Entries(Vec<Entry>),
}

/// Reads `metadata.managedFields` of `obj`.
pub fn decode(obj: &Value) -> Result<Managed, BadEntry> {
    let Some(list) = object::meta(obj).and_then(|m| m.get("managedFields")) else {
        return Ok(Managed::Absent);
    };
    let bad = |i: usize, f: &str, message: String| BadEntry {
        field: format!("metadata.managedFields[{i}]{f}"),
        message,
    };
    let Value::Array(items) = list else {
        if list.is_null() {
            return Ok(Managed::Absent);
        }
        return Err(BadEntry {
            field: "metadata.managedFields".into(),
            message: "must be a list".into(),
        });
    };
    if items.is_empty() {
        return Ok(Managed::Absent);
    }
    if items.len() == 1 && items[0].as_object().is_some_and(Map::is_empty) {
        return Ok(Managed::Reset);
    }
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let s = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let manager = s("manager");
        if manager.len() > 128 {
            return Err(bad(i, ".manager", "must have at most 128 characters".into()));
        }
        let operation = match s("operation").as_str() {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            other => {
                return Err(bad(
                    i,
                    ".operation",
                    format!(
                        "Unsupported value: {other:?}: supported values: \"Apply\", \"Update\""
                    ),
                ));
            }
        };
        if s("fieldsType") != "FieldsV1" {
            return Err(bad(
                i,
                ".fieldsType",
                format!("Unsupported value: {:?}: supported values: \"FieldsV1\"", s("fieldsType")),
            ));
        }
        let set = match item.get("fieldsV1") {
            None | Some(Value::Null) => FieldSet::default(),
            Some(v) => {
                FieldSet::from_fields_v1(v).map_err(|e| bad(i, ".fieldsV1", e.to_string()))?
            }
        };
        let time = item.get("time").and_then(Value::as_str).map(str::to_owned);
        out.push(Entry {
            manager,
            operation,
            api_version: s("apiVersion"),
            time,
            subresource: s("subresource"),
            set,
        });
    }
    Ok(Managed::Entries(out))
}

/// Writes `entries` as `metadata.managedFields` of `obj` (removing it when empty).
pub fn encode(obj: &mut Value, entries: &[Entry]) {
    let m = object::meta_mut(obj);
    if entries.is_empty() {
        m.remove("managedFields");
    } else {
        m.insert(
            "managedFields".into(),
            Value::Array(entries.iter().map(Entry::to_json).collect()),
        );
    }
}

/// Which part of an object a write manages: the main resource (everything but what
/// subresources own) or one subresource (only what it owns).
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    /// The subresource written, if any (`status`).
    pub subresource: Option<&'a str>,
    /// What the subresource written owns, or, for the main resource, what every subresource
    /// owns (dotted paths: `status`, `spec.finalizers`).
    pub owned_elsewhere: &'a [&'a str],
}

/// Metadata fields the server owns, never tracked.
const SERVER_META: [&str; 10] = [
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "selfLink",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

impl Scope<'_> {
    /// The part of `set` this write may own.
    pub fn filter(&self, set: &FieldSet) -> FieldSet {
        let mut out = set.without_fields(&["apiVersion", "kind"]);
        for f in SERVER_META {
            out.remove_subtree(&["metadata", f]);
        }
        match self.subresource {
            None => {
                for path in self.owned_elsewhere {
                    out.remove_subtree(&path.split('.').collect::<Vec<_>>());
                }
                out
            }
            Some(_) => {
                let mut keep = FieldSet::default();
                for path in self.owned_elsewhere {
                    let names: Vec<&str> = path.split('.').collect();
                    keep = keep.union(&out.restrict_to(&names));
                }
                keep
            }
        }
    }
}

/// The most `Update` entries kept; older ones fold into [`ANCIENT_CHANGES`].
pub const MAX_UPDATE_ENTRIES: usize = 10;
/// The manager older `Update` entries fold into.
pub const ANCIENT_CHANGES: &str = "ancient-changes";

/// Who writes, and how.
#[derive(Debug, Clone)]
pub struct Writer<'a> {
    /// `fieldManager`.
    pub manager: &'a str,
    /// apiVersion of the request.
    pub api_version: &'a str,
    /// What part of the object the write manages.
    pub scope: Scope<'a>,
    /// `time` for entries that change.
    pub now: &'a str,
}

impl Writer<'_> {
    fn entry(&self, operation: Operation, set: FieldSet) -> Entry {
        Entry {
            manager: self.manager.to_owned(),
            operation,
            api_version: self.api_version.to_owned(),
            time: Some(self.now.to_owned()),
            subresource: self.scope.subresource.unwrap_or("").to_owned(),
            set,
        }
    }
}

/// Sets `entry`'s set in `entries` (replacing its identity's entry). `time` moves when the
/// write `touched` the object or the owned set changes; a write that changed nothing keeps it.
fn put(entries: &mut Vec<Entry>, entry: Entry, touched: bool) {
    match entries.iter_mut().find(|e| e.same_identity(&entry)) {
        Some(e) if e.set == entry.set && !touched => {
            e.api_version = entry.api_version;
        }
        Some(e) => *e = entry,
        None => entries.push(entry),
    }
}

/// Records a non-apply write (create, update, patch) of `new` over `old` (`Value::Null` for a
/// create) by `writer`: the writer owns what it added or changed; others lose it; removed
/// fields leave every set.
pub fn record_update(
    old: &Value,
    new: &Value,
    mut entries: Vec<Entry>,
    writer: &Writer<'_>,
    shape: &Shape,
) -> Vec<Entry> {
    let compare = Comparison::of(old, new, shape);
    let changed = writer.scope.filter(&compare.changed());
    let removed = compare.removed;
    let probe = writer.entry(Operation::Update, FieldSet::default());
    for e in entries.iter_mut() {
        if !e.same_identity(&probe) {
            e.set = e.set.difference(&changed).difference(&removed);
        }
    }
    let own = entries
        .iter()
        .find(|e| e.same_identity(&probe))
        .map(|e| e.set.difference(&removed))
        .unwrap_or_default()
        .union(&changed);
    let touched = !changed.is_empty() || !removed.is_empty();
    put(&mut entries, writer.entry(Operation::Update, own), touched);
    entries.retain(|e| !e.set.is_empty());
    cap_updates(&mut entries, writer.now);
    entries
}

/// Keeps at most [`MAX_UPDATE_ENTRIES`] `Update` entries, folding the oldest into
/// [`ANCIENT_CHANGES`].
fn cap_updates(entries: &mut Vec<Entry>, now: &str) {
    let updates = entries.iter().filter(|e| e.operation == Operation::Update).count();
    if updates <= MAX_UPDATE_ENTRIES {
        return;
    }
    let mut order: Vec<usize> = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.operation == Operation::Update && e.manager != ANCIENT_CHANGES)
        .map(|(i, _)| i)
        .collect();
    order.sort_by(|a, b| entries[*a].time.cmp(&entries[*b].time));
    let has_ancient = entries.iter().any(|e| e.manager == ANCIENT_CHANGES);
    let excess = updates - MAX_UPDATE_ENTRIES + usize::from(!has_ancient);
    let fold: Vec<usize> = order.into_iter().take(excess).collect();
    let mut ancient = entries
        .iter()
        .find(|e| e.manager == ANCIENT_CHANGES)
        .map(|e| e.set.clone())
        .unwrap_or_default();
    let mut api_version = String::new();
    for i in &fold {
        ancient = ancient.union(&entries[*i].set);
        api_version = entries[*i].api_version.clone();
    }
    let mut i = 0;
    entries.retain(|e| {
        let keep = !fold.contains(&i) && e.manager != ANCIENT_CHANGES;
        i += 1;
        keep
    });
    entries.push(Entry {
        manager: ANCIENT_CHANGES.into(),
        operation: Operation::Update,
        api_version,
        time: Some(now.to_owned()),
        subresource: String::new(),
        set: ancient,
    });
}

/// One field another manager owns that an apply would change.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflict {
    /// How the manager is named in messages.
    pub manager: String,
    /// The field, as `.spec.color`.
    pub field: String,
}

/// The message of a 409 for `conflicts` (kube-apiserver's wording).
pub fn conflict_message(conflicts: &[Conflict]) -> String {
    if let [c] = conflicts {
        return format!("Apply failed with 1 conflict: conflict with {}: {}", c.manager, c.field);
    }
    let mut managers: Vec<&str> = conflicts.iter().map(|c| c.manager.as_str()).collect();
    managers.sort_unstable();
    managers.dedup();
    let mut lines = Vec::new();
    for m in managers {
        lines.push(format!("conflicts with {m}:"));
        for c in conflicts.iter().filter(|c| c.manager == m) {
            lines.push(format!("- {}", c.field));
        }
    }
    format!("Apply failed with {} conflicts: {}", conflicts.len(), lines.join("\n"))
}

/// An apply that conflicts.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflicts(pub Vec<Conflict>);

/// Server-side apply of `config` (the manager's whole intent) onto `live` (`Value::Null` when
/// the object does not exist yet). Returns the merged object and the new entries; conflicts
/// unless `force`. Conflicts on paths `allowed` accepts are taken over as if forced (kubectl's
/// client-side to server-side upgrade); the others are reported.
pub fn apply(
    live: &Value,
    config: &Value,
    mut entries: Vec<Entry>,
    writer: &Writer<'_>,
    shape: &Shape,
    force: bool,
    allowed: &dyn Fn(&[Pe]) -> bool,
) -> Result<(Value, Vec<Entry>), Conflicts> {
    let mut merged = live.clone();
    if !merged.is_object() {
        merged = Value::Object(Map::new());
    }
    merge(&mut merged, config, shape);
    let applied = writer.scope.filter(&FieldSet::of(config, shape));
    let me = writer.entry(Operation::Apply, applied.clone());
    let last = entries.iter().find(|e| e.same_identity(&me)).map(|e| e.set.clone());
    let others: FieldSet = entries
        .iter()
        .filter(|e| !e.same_identity(&me))
        .fold(FieldSet::default(), |acc, e| acc.union(&e.set));
    if let Some(last) = last {
        // What the manager applied before and no longer does goes, unless someone else owns
        // it (or something below it).
        let mut dropped = last.difference(&applied).paths();
        dropped.sort_by_key(|p| std::cmp::Reverse(p.len()));
        for path in dropped {
            if !owns_at_or_below(&others, &path) {
                fields::remove(&mut merged, &path);
            }
        }
    }
    let compare = Comparison::of(live, &merged, shape);
    let changed = writer.scope.filter(&compare.changed());
    let mut conflicts = Vec::new();
    for e in entries.iter().filter(|e| !e.same_identity(&me)) {
        for path in e.set.intersection(&changed).paths() {
            conflicts.push((e.describe(), path));
        }
    }
    // Conflicts `allowed` accepts are taken over; any other one refuses the apply, and only
    // those are reported.
    if !force {
        let refused: Vec<Conflict> = conflicts
            .iter()
            .filter(|(_, p)| !allowed(p))
            .map(|(manager, path)| Conflict {
                manager: manager.clone(),
                field: fields::display(path),
            })
            .collect();
        if !refused.is_empty() {
            return Err(Conflicts(refused));
        }
    }
    for e in entries.iter_mut() {
        if !e.same_identity(&me) {
            e.set = e.set.difference(&changed).difference(&compare.removed);
        }
    }
    let touched = !changed.is_empty() || !compare.removed.is_empty();
    put(&mut entries, me, touched);
    entries.retain(|e| !e.set.is_empty());
    Ok((merged, entries))
}

fn owns_at_or_below(set: &FieldSet, path: &[Pe]) -> bool {
    let mut node = set;
    for pe in path {
        match node.child(pe) {
            Some(n) => node = n,
            None => return false,
        }
    }
    !node.is_empty()
}

/// Merges an applied configuration into an object: objects field by field, keyed lists item by
/// item, sets by value; everything else is replaced.
pub fn merge(doc: &mut Value, config: &Value, shape: &Shape) {
    match (doc, config) {
        (Value::Object(d), Value::Object(c)) if shape.is_granular_object() => {
            for (k, v) in c {
                let (child, _) = shape.field(k);
                match d.get_mut(k) {
                    Some(existing) if !v.is_null() => merge(existing, v, &child),
                    _ => {
                        d.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (Value::Array(d), Value::Array(c)) => match shape.list() {
            Some((ListKind::Map(keys), item)) => {
                let kind = ListKind::Map(keys.clone());
                for (i, v) in c.iter().enumerate() {
                    let pe = fields::item_pe(&kind, i, v);
                    let found = d.iter().enumerate().position(|(j, e)| {
                        !matches!(pe, Pe::Index(_)) && fields::item_pe(&kind, j, e) == pe
                    });
                    match found {
                        Some(j) => merge(&mut d[j], v, item),
                        None => d.push(v.clone()),
                    }
                }
            }
            Some((ListKind::Set, _)) => {
                for v in c {
                    if !d.contains(v) {
                        d.push(v.clone());
                    }
                }
            }
            _ => *d = c.clone(),
        },
        (doc, config) => *doc = config.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machinery::merge::shape;
    use serde_json::json;

    fn data_a() -> Vec<Pe> {
        vec![Pe::Field("data".into()), Pe::Field("a".into())]
    }

    const SCOPE: Scope<'static> = Scope { subresource: None, owned_elsewhere: &["status"] };

    fn writer(manager: &str) -> Writer<'_> {
        Writer { manager, api_version: "v1", scope: SCOPE, now: "2026-01-01T00:00:00Z" }
    }

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data})
    }

    #[test]
    fn apply_conflicts_with_updates_and_force_takes_over() {
        let shape = shape::core("", "ConfigMap");
        let none = |_: &[Pe]| false;
        let (obj, entries) = apply(
            &Value::Null,
            &cm(json!({"a": "1", "b": "2"})),
            vec![],
            &writer("kubectl"),
            &shape,
            false,
            &none,
        )
        .unwrap();
        assert_eq!(obj["data"], json!({"a": "1", "b": "2"}));
        assert_eq!(entries[0].set.to_fields_v1(), json!({"f:data": {"f:a": {}, "f:b": {}}}));
        // Another manager changes `a`.
        let mut patched = obj.clone();
        patched["data"]["a"] = json!("9");
        let entries = record_update(&obj, &patched, entries, &writer("kubectl-patch"), &shape);
        assert_eq!(entries.len(), 2);
        // Re-applying the old value conflicts on `a` only.
        let err = apply(
            &patched,
            &cm(json!({"a": "1", "b": "2"})),
            entries.clone(),
            &writer("kubectl"),
            &shape,
            false,
            &none,
        )
        .unwrap_err();
        assert_eq!(err.0.len(), 1);
        assert_eq!(err.0[0].field, ".data.a");
        assert_eq!(
            conflict_message(&err.0),
            "Apply failed with 1 conflict: conflict with \"kubectl-patch\" using v1 at \
             2026-01-01T00:00:00Z: .data.a"
        );
        // Applying the same value as the other manager shares ownership.
        let (_, shared) = apply(
            &patched,
            &cm(json!({"a": "9", "b": "2"})),
            entries.clone(),
            &writer("kubectl"),
            &shape,
            false,
            &none,
        )
        .unwrap();
        let owners_of_a: Vec<&str> = shared
            .iter()
            .filter(|e| e.set.contains(&data_a()))
            .map(|e| e.manager.as_str())
            .collect();
        assert_eq!(owners_of_a, ["kubectl", "kubectl-patch"], "equal values share ownership");
        // Force moves `a` to the applier; the other manager's entry empties and goes.
        let (obj, forced) = apply(
            &patched,
            &cm(json!({"a": "1", "b": "2"})),
            entries,
            &writer("kubectl"),
            &shape,
            true,
            &none,
        )
        .unwrap();
        assert_eq!(obj["data"]["a"], json!("1"));
        assert_eq!(forced.len(), 1);
        assert_eq!(forced[0].manager, "kubectl");
        assert!(forced[0].set.contains(&data_a()));
        // Dropping `b` from the applied config removes it.
        let (obj, _) =
            apply(&obj, &cm(json!({"a": "1"})), forced, &writer("kubectl"), &shape, false, &none)
                .unwrap();
        assert_eq!(obj["data"], json!({"a": "1"}));
    }

    #[test]
    fn fields_owned_by_others_survive_when_the_applier_drops_them() {
        let shape = shape::core("", "ConfigMap");
        let none = |_: &[Pe]| false;
        let (obj, entries) = apply(
            &Value::Null,
            &cm(json!({"a": "1"})),
            vec![],
            &writer("one"),
            &shape,
            false,
            &none,
        )
        .unwrap();
        let (obj, entries) =
            apply(&obj, &cm(json!({"a": "1"})), entries, &writer("two"), &shape, false, &none)
                .unwrap();
        let bare = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        let (obj, entries) =
            apply(&obj, &bare, entries, &writer("one"), &shape, false, &none).unwrap();
        assert_eq!(obj["data"], json!({"a": "1"}));
        let owners: Vec<&str> = entries
            .iter()
            .filter(|e| e.set.contains(&data_a()))
            .map(|e| e.manager.as_str())
            .collect();
        assert_eq!(owners, ["two"]);
    }

    #[test]
    fn allowed_conflicts_are_taken_over_and_the_rest_reported() {
        let shape = shape::core("", "ConfigMap");
        let none = |_: &[Pe]| false;
        let (obj, entries) = apply(
            &Value::Null,
            &cm(json!({"a": "1", "b": "1"})),
            vec![],
            &writer("other"),
            &shape,
            false,
            &none,
        )
        .unwrap();
        // `a` may be taken over (kubectl's upgrade rule), `b` may not: only `b` is reported.
        let only_a = |p: &[Pe]| p == data_a().as_slice();
        let err = apply(
            &obj,
            &cm(json!({"a": "2", "b": "2"})),
            entries.clone(),
            &writer("kubectl"),
            &shape,
            false,
            &only_a,
        )
        .unwrap_err();
        let fields: Vec<&str> = err.0.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, [".data.b"]);
        let (obj, after) = apply(
            &obj,
            &cm(json!({"a": "2"})),
            entries,
            &writer("kubectl"),
            &shape,
            false,
            &only_a,
        )
        .unwrap();
        assert_eq!(obj["data"], json!({"a": "2", "b": "1"}));
        let kubectl = after.iter().find(|e| e.manager == "kubectl").unwrap();
        assert!(kubectl.set.contains(&data_a()));
    }

    #[test]
    fn time_moves_when_a_manager_changes_what_it_owns() {
        let shape = shape::core("", "ConfigMap");
        let early = Writer { now: "2026-01-01T00:00:00Z", ..writer("m") };
        let late = Writer { now: "2026-01-02T00:00:00Z", ..writer("m") };
        let v1 = cm(json!({"a": "1"}));
        let entries = record_update(&Value::Null, &v1, vec![], &early, &shape);
        // Same set, nothing changed: the time stays.
        let same = record_update(&v1, &v1, entries.clone(), &late, &shape);
        assert_eq!(same[0].time.as_deref(), Some("2026-01-01T00:00:00Z"));
        // Same set, a value changed: the time moves.
        let v2 = cm(json!({"a": "2"}));
        let moved = record_update(&v1, &v2, entries, &late, &shape);
        assert_eq!(moved[0].time.as_deref(), Some("2026-01-02T00:00:00Z"));
    }

    #[test]
    fn managed_fields_round_trip_and_validation() {
        let shape = shape::core("", "ConfigMap");
        let obj = cm(json!({"a": "1"}));
        let entries = record_update(&Value::Null, &obj, vec![], &writer("kubectl-create"), &shape);
        let mut stored = obj.clone();
        encode(&mut stored, &entries);
        assert_eq!(
            stored["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:data": {"f:a": {}}})
        );
        assert_eq!(decode(&stored), Ok(Managed::Entries(entries)));
        let mut bad = obj.clone();
        bad["metadata"]["managedFields"] =
            json!([{"manager": "x", "operation": "Patch", "fieldsType": "FieldsV1"}]);
        assert_eq!(decode(&bad).unwrap_err().field, "metadata.managedFields[0].operation");
        bad["metadata"]["managedFields"] = json!([{}]);
        assert_eq!(decode(&bad), Ok(Managed::Reset));
    }

    #[test]
    fn update_entries_are_capped() {
        let shape = shape::core("", "ConfigMap");
        let mut obj = cm(json!({}));
        let mut entries = Vec::new();
        for i in 0..12 {
            let mut next = obj.clone();
            next["data"][format!("k{i}")] = json!("v");
            let name = format!("m{i}");
            let w = Writer { now: &format!("2026-01-01T00:00:{i:02}Z"), ..writer(&name) };
            entries = record_update(&obj, &next, entries, &w, &shape);
            obj = next;
        }
        assert_eq!(entries.len(), MAX_UPDATE_ENTRIES);
        assert!(entries.iter().any(|e| e.manager == ANCIENT_CHANGES));
        assert!(entries.iter().any(|e| e.manager == "m11"));
    }
}
