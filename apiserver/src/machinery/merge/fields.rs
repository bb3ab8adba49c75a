//! Field sets: which fields of an object a manager owns, as structured-merge-diff models them.
//! A set is a trie of path elements (`f:<field>`, `k:<key fields as JSON>` for items of keyed
//! lists, `v:<value as JSON>` for set items, `i:<index>`), serialized as FieldsV1 in
//! `metadata.managedFields`. Built from an object and its [`Shape`]; compared, intersected and
//! used to remove fields.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::shape::{ListKind, Shape};

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Pe {
    /// A field of an object (or a key of a map).
    Field(String),
    /// An item of a keyed list: its key fields as a JSON object with sorted keys.
    Key(String),
    /// An item of a set: its value as JSON.
    Value(String),
    /// An item of an atomic-or-unkeyed list, by position.
    Index(usize),
}

impl Pe {
    fn encode(&self) -> String {
        match self {
            Pe::Field(f) => format!("f:{f}"),
            Pe::Key(k) => format!("k:{k}"),
            Pe::Value(v) => format!("v:{v}"),
            Pe::Index(i) => format!("i:{i}"),
        }
    }

    fn decode(s: &str) -> Option<Pe> {
        let (tag, rest) = s.split_once(':')?;
        Some(match tag {
            "f" => Pe::Field(rest.to_owned()),
            "k" => Pe::Key(canonical(&serde_json::from_str(rest).ok()?)?),
            "v" => Pe::Value(serde_json::from_str::<Value>(rest).ok()?.to_string()),
            "i" => Pe::Index(rest.parse().ok()?),
            _ => return None,
        })
    }
}

/// A keyed item's key fields as canonical JSON (sorted keys); `None` for a non-object.
fn canonical(v: &Value) -> Option<String> {
    let m = v.as_object()?;
    let sorted: BTreeMap<&String, &Value> = m.iter().collect();
    Some(
        Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .to_string(),
    )
}

/// How a path reads in a conflict message: `.spec.taints[key="a",effect="NoSelect"].value`.
pub fn display(path: &[Pe]) -> String {
    let mut out = String::new();
    for pe in path {
        match pe {
            Pe::Field(f) => {
                let _ = write!(out, ".{f}");
            }
            Pe::Key(k) => {
                let fields: Vec<String> = serde_json::from_str::<Map<String, Value>>(k)
                    .map(|m| m.iter().map(|(k, v)| format!("{k}={v}")).collect())
                    .unwrap_or_default();
                let _ = write!(out, "[{}]", fields.join(","));
            }
            Pe::Value(v) => {
                let _ = write!(out, "[={v}]");
            }
            Pe::Index(i) => {
                let _ = write!(out, "[{i}]");
            }
        }
    }
    out
}

/// A set of field paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    /// Whether the path leading here is itself in the set.
    member: bool,
    children: BTreeMap<Pe, FieldSet>,
}

/// FieldsV1 that does not decode.
#[derive(Debug, thiserror::Error)]
#[error("invalid FieldsV1 {0:?}")]
pub struct BadFieldsV1(pub String);

impl FieldSet {
    /// Whether the set has no member.
    pub fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }

    /// Adds a path.
    pub fn insert(&mut self, path: &[Pe]) {
        let mut node = self;
        for pe in path {
            node = node.children.entry(pe.clone()).or_default();
        }
        node.member = true;
    }

    /// Whether `path` is a member.
    #[cfg(test)]
    pub fn contains(&self, path: &[Pe]) -> bool {
        let mut node = self;
        for pe in path {
            match node.children.get(pe) {
                Some(n) => node = n,
                None => return false,
            }
        }
        node.member
    }

    /// The child set below one path element.
    pub fn child(&self, pe: &Pe) -> Option<&FieldSet> {
        self.children.get(pe)
    }

    /// Every member path, depth first.
    pub fn paths(&self) -> Vec<Vec<Pe>> {
        let mut out = Vec::new();
        self.walk(&mut Vec::new(), &mut |p, _| out.push(p.to_vec()));
        out
    }

    /// Calls `f` with every member path and whether it has members below it.
    fn walk(&self, prefix: &mut Vec<Pe>, f: &mut impl FnMut(&[Pe], bool)) {
        if self.member && !prefix.is_empty() {
            f(prefix, !self.children.is_empty());
        }
        for (pe, child) in &self.children {
            prefix.push(pe.clone());
            child.walk(prefix, f);
            prefix.pop();
        }
    }

    /// Members of either set.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.member |= other.member;
        for (pe, child) in &other.children {
            let merged = match out.children.get(pe) {
                Some(mine) => mine.union(child),
                None => child.clone(),
            };
            out.children.insert(pe.clone(), merged);
        }
        out
    }

    /// Members of `self` that are not members of `other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet { member: self.member && !other.member, children: BTreeMap::new() };
        for (pe, child) in &self.children {
            let rest = match other.children.get(pe) {
                Some(theirs) => child.difference(theirs),
                None => child.clone(),
            };
            if !rest.is_empty() {
                out.children.insert(pe.clone(), rest);
            }
        }
        out
    }

    /// Members of both sets.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet { member: self.member && other.member, children: BTreeMap::new() };
        for (pe, child) in &self.children {
            if let Some(theirs) = other.children.get(pe) {
                let both = child.intersection(theirs);
                if !both.is_empty() {
                    out.children.insert(pe.clone(), both);
                }
            }
        }
        out
    }

    /// The set without the whole subtrees at the given top-level fields.
    pub fn without_fields(&self, fields: &[&str]) -> FieldSet {
        let mut out = self.clone();
        out.children.retain(|pe, _| !matches!(pe, Pe::Field(f) if fields.contains(&f.as_str())));
        out
    }

    /// The part of the set at and below a path of field names.
    pub fn restrict_to(&self, path: &[&str]) -> FieldSet {
        let mut node = self;
        for name in path {
            match node.children.get(&Pe::Field((*name).to_owned())) {
                Some(n) => node = n,
                None => return FieldSet::default(),
            }
        }
        let mut out = node.clone();
        for name in path.iter().rev() {
            let mut parent = FieldSet::default();
            parent.children.insert(Pe::Field((*name).to_owned()), out);
            out = parent;
        }
        out
    }

    /// Removes the members at one nested path of field names (and everything below them),
    /// and the nodes left empty above them.
    pub fn remove_subtree(&mut self, path: &[&str]) {
        let Some((first, rest)) = path.split_first() else { return };
        let pe = Pe::Field((*first).to_owned());
        if rest.is_empty() {
            self.children.remove(&pe);
            return;
        }
        if let Some(child) = self.children.get_mut(&pe) {
            child.remove_subtree(rest);
            if child.is_empty() {
                self.children.remove(&pe);
            }
        }
    }

    /// The FieldsV1 JSON of the set.
    pub fn to_fields_v1(&self) -> Value {
        let mut m = Map::new();
        if self.member && !self.children.is_empty() {
            m.insert(".".into(), Value::Object(Map::new()));
        }
        for (pe, child) in &self.children {
            m.insert(pe.encode(), child.to_fields_v1());
        }
        Value::Object(m)
    }

    /// Parses FieldsV1 JSON.
    pub fn from_fields_v1(v: &Value) -> Result<FieldSet, BadFieldsV1> {
        let mut set = parse_node(v)?;
        set.member = false;
        Ok(set)
    }

    /// The fields of `obj` (an object of `shape`), as structured-merge-diff counts them:
    /// scalars, atomic values, items of keyed lists and sets, keys of maps, and empty or null
    /// values are members; objects merged field by field are not members themselves.
    pub fn of(obj: &Value, shape: &Shape) -> FieldSet {
        let mut set = FieldSet::default();
        collect(obj, shape, &mut Vec::new(), &mut set);
        set.member = false;
        set
    }

    /// The paths of `self` that are leaves (members with nothing below them).
    pub fn leaves(&self) -> Vec<Vec<Pe>> {
        let mut out = Vec::new();
        self.walk(&mut Vec::new(), &mut |p, has_children| {
            if !has_children {
                out.push(p.to_vec());
            }
        });
        out
    }
}

fn parse_node(v: &Value) -> Result<FieldSet, BadFieldsV1> {
    let m = v.as_object().ok_or_else(|| BadFieldsV1(v.to_string()))?;
    let mut set = FieldSet { member: true, children: BTreeMap::new() };
    for (k, child) in m {
        if k == "." {
            continue;
        }
        let pe = Pe::decode(k).ok_or_else(|| BadFieldsV1(k.clone()))?;
        set.children.insert(pe, parse_node(child)?);
    }
    // A node with children is a member only when it says so with ".".
    if !set.children.is_empty() && !m.contains_key(".") {
        set.member = false;
    }
    Ok(set)
}

/// The path element of item `i` of a list of `kind`.
pub fn item_pe(kind: &ListKind, i: usize, item: &Value) -> Pe {
    match kind {
        ListKind::Set => Pe::Value(item.to_string()),
        ListKind::Map(keys) => {
            let Some(m) = item.as_object() else { return Pe::Index(i) };
            let key: Map<String, Value> =
                keys.iter().filter_map(|k| m.get(k).map(|v| (k.clone(), v.clone()))).collect();
            if key.is_empty() {
                return Pe::Index(i);
            }
            Pe::Key(canonical(&Value::Object(key)).unwrap_or_default())
        }
        ListKind::Atomic => Pe::Index(i),
    }
}

fn collect(v: &Value, shape: &Shape, path: &mut Vec<Pe>, set: &mut FieldSet) {
    match (v, shape) {
        (Value::Object(m), s) if s.is_granular_object() => {
            for (k, child) in m {
                let (child_shape, declared) = shape.field(k);
                path.push(Pe::Field(k.clone()));
                collect(child, &child_shape, path, set);
                let empty = child.is_null() || child.as_object().is_some_and(Map::is_empty);
                if empty || !declared {
                    set.insert(path);
                }
                path.pop();
            }
        }
        (Value::Array(items), Shape::List { kind, item }) if *kind != ListKind::Atomic => {
            for (i, child) in items.iter().enumerate() {
                path.push(item_pe(kind, i, child));
                if matches!(kind, ListKind::Map(_)) {
                    collect(child, item, path, set);
                }
                set.insert(path);
                path.pop();
            }
        }
        _ => {
            if !path.is_empty() {
                set.insert(path);
            }
        }
    }
}

/// The value at `path` in `obj`.
pub fn get<'a>(obj: &'a Value, path: &[Pe]) -> Option<&'a Value> {
    let mut cur = obj;
    for pe in path {
        cur = match (pe, cur) {
            (Pe::Field(f), Value::Object(m)) => m.get(f)?,
            (Pe::Index(i), Value::Array(items)) => items.get(*i)?,
            (Pe::Key(_) | Pe::Value(_), Value::Array(items)) => {
                items.iter().find(|item| matches_pe(pe, item))?
            }
            _ => return None,
        };
    }
    Some(cur)
}

fn matches_pe(pe: &Pe, item: &Value) -> bool {
    match pe {
        Pe::Value(v) => serde_json::from_str::<Value>(v).is_ok_and(|v| v == *item),
        Pe::Key(k) => {
            let Ok(key) = serde_json::from_str::<Map<String, Value>>(k) else { return false };
            item.as_object().is_some_and(|m| key.iter().all(|(k, v)| m.get(k) == Some(v)))
        }
        _ => false,
    }
}

/// Removes the value at `path` from `obj` (a no-op when it is not there).
pub fn remove(obj: &mut Value, path: &[Pe]) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut cur = obj;
    for pe in parents {
        let next = match (pe, cur) {
            (Pe::Field(f), Value::Object(m)) => m.get_mut(f),
            (Pe::Index(i), Value::Array(items)) => items.get_mut(*i),
            (Pe::Key(_) | Pe::Value(_), Value::Array(items)) => {
                items.iter_mut().find(|item| matches_pe(pe, item))
            }
            _ => None,
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    match (last, cur) {
        (Pe::Field(f), Value::Object(m)) => {
            m.remove(f);
        }
        (Pe::Index(i), Value::Array(items)) if *i < items.len() => {
            items.remove(*i);
        }
        (Pe::Key(_) | Pe::Value(_), Value::Array(items)) => {
            items.retain(|item| !matches_pe(last, item));
        }
        _ => {}
    }
}

/// How two versions of an object differ, as field sets.
#[derive(Debug, Default)]
pub struct Comparison {
    /// Members only in the new object.
    pub added: FieldSet,
    /// Members only in the old object.
    pub removed: FieldSet,
    /// Leaf members in both whose values differ.
    pub modified: FieldSet,
}

impl Comparison {
    /// Compares `old` and `new` (objects of `shape`).
    pub fn of(old: &Value, new: &Value, shape: &Shape) -> Comparison {
        let before = FieldSet::of(old, shape);
        let after = FieldSet::of(new, shape);
        let mut modified = FieldSet::default();
        for path in before.intersection(&after).leaves() {
            if get(old, &path) != get(new, &path) {
                modified.insert(&path);
            }
        }
        Comparison {
            added: after.difference(&before),
            removed: before.difference(&after),
            modified,
        }
    }

    /// Members added or modified.
    pub fn changed(&self) -> FieldSet {
        self.added.union(&self.modified)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machinery::merge::shape;
    use serde_json::json;

    #[test]
    fn field_sets_serialize_as_fields_v1() {
        let shape = shape::core("apps", "Deployment");
        let obj = json!({
            "metadata": {"name": "d", "labels": {"app": "x"}, "finalizers": ["f"]},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [
                {"name": "c", "image": "i", "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}}},
        });
        let set = FieldSet::of(&obj, &shape);
        let v1 = set.to_fields_v1();
        assert_eq!(
            v1,
            json!({
                "f:metadata": {"f:finalizers": {"v:\"f\"": {}}, "f:labels": {"f:app": {}}, "f:name": {}},
                "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
                    "k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}, "f:ports": {
                        "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {
                            ".": {}, "f:containerPort": {}, "f:protocol": {}}}}}}}},
            })
        );
        assert_eq!(FieldSet::from_fields_v1(&v1).unwrap(), set);
        assert!(FieldSet::from_fields_v1(&json!({"x:y": {}})).is_err());
    }

    #[test]
    fn deduced_objects_are_members_with_children() {
        let obj = json!({"spec": {"a": {"b": 1}}});
        let set = FieldSet::of(&obj, &Shape::Deduced);
        assert_eq!(set.to_fields_v1(), json!({"f:spec": {".": {}, "f:a": {".": {}, "f:b": {}}}}));
    }

    #[test]
    fn comparisons_and_removal() {
        let shape = shape::core("", "ConfigMap");
        let old = json!({"data": {"a": "1", "b": "2"}, "metadata": {"finalizers": ["x"]}});
        let new = json!({"data": {"a": "9", "c": "3"}, "metadata": {"finalizers": ["x"]}});
        let c = Comparison::of(&old, &new, &shape);
        let f = |s: &str| Pe::Field(s.into());
        assert!(c.modified.contains(&[f("data"), f("a")]));
        assert!(c.added.contains(&[f("data"), f("c")]));
        assert!(c.removed.contains(&[f("data"), f("b")]));
        assert!(!c.modified.contains(&[f("metadata"), f("finalizers"), Pe::Value("\"x\"".into())]));
        let mut obj = new.clone();
        remove(&mut obj, &[f("metadata"), f("finalizers"), Pe::Value("\"x\"".into())]);
        assert_eq!(obj["metadata"]["finalizers"], json!([]));
        let key = Pe::Key(r#"{"type":"Ready"}"#.into());
        assert_eq!(
            display(&[f("status"), f("conditions"), key, f("status")]),
            ".status.conditions[type=\"Ready\"].status"
        );
    }
}
