//! Strategic merge patch (`application/strategic-merge-patch+json`): a JSON merge patch whose
//! lists merge by the kind's merge keys (sets by value) instead of being replaced, with the
//! directives kubectl sends: `$patch: replace|delete|merge`, `$retainKeys`,
//! `$deleteFromPrimitiveList/<field>` and `$setElementOrder/<field>`. The merge keys come from
//! the kind's [`Shape`], so OCM kinds (whose lists the CRDs declare as `x-kubernetes-list-type:
//! map`) take strategic patches too, which kube-apiserver refuses for custom resources.

use serde_json::{Map, Value};

use super::shape::{ListKind, Shape};

/// Why a strategic merge patch cannot be applied (answered 400 or 422 by the caller).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SmpError {
    /// The patch is not a JSON object.
    #[error("a strategic merge patch must be a JSON object")]
    NotAnObject,
    /// A `$patch` directive with an unknown value.
    #[error("unknown patch type: {0:?} in map: {1}")]
    UnknownDirective(String, String),
    /// An item of a merged list lacks its merge key.
    #[error("map: {item} does not contain declared merge key: {key}")]
    MissingMergeKey {
        /// The item, as JSON.
        item: String,
        /// The key.
        key: String,
    },
    /// A directive whose value has the wrong type.
    #[error("invalid {directive} directive: {why}")]
    BadDirective {
        /// The directive.
        directive: String,
        /// What is wrong.
        why: &'static str,
    },
}

const PATCH: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";

/// Applies `patch` to `doc` (an object of `shape`).
pub fn apply(doc: &mut Value, patch: &Value, shape: &Shape) -> Result<(), SmpError> {
    let patch = patch.as_object().ok_or(SmpError::NotAnObject)?;
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    let Value::Object(map) = doc else { unreachable!("made an object above") };
    match merge_map(map, patch, shape)? {
        Outcome::Keep => Ok(()),
        Outcome::Delete => Err(SmpError::BadDirective {
            directive: "$patch: delete".into(),
            why: "cannot delete the whole object",
        }),
    }
}

enum Outcome {
    Keep,
    Delete,
}

fn directive(patch: &Map<String, Value>) -> Result<Option<&str>, SmpError> {
    match patch.get(PATCH) {
        None => Ok(None),
        Some(Value::String(s)) if matches!(s.as_str(), "replace" | "delete" | "merge") => {
            Ok(Some(s.as_str()))
        }
        Some(other) => Err(SmpError::UnknownDirective(
            other.as_str().unwrap_or(&other.to_string()).to_owned(),
            Value::Object(patch.clone()).to_string(),
        )),
    }
}

fn merge_map(
    doc: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    shape: &Shape,
) -> Result<Outcome, SmpError> {
    match directive(patch)? {
        Some("delete") => return Ok(Outcome::Delete),
        Some("replace") => {
            *doc = Map::new();
            for (k, v) in patch {
                if !k.starts_with('$') {
                    doc.insert(k.clone(), strip(v));
                }
            }
            return Ok(Outcome::Keep);
        }
        _ => {}
    }
    let mut orders: Vec<(&str, &Vec<Value>)> = Vec::new();
    for (key, value) in patch {
        if key == PATCH || key == RETAIN_KEYS {
            continue;
        }
        if let Some(field) = key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            let Value::Array(gone) = value else {
                return Err(SmpError::BadDirective {
                    directive: key.clone(),
                    why: "must be a list",
                });
            };
            if let Some(Value::Array(items)) = doc.get_mut(field) {
                items.retain(|v| !gone.contains(v));
            }
            continue;
        }
        if let Some(field) = key.strip_prefix(SET_ELEMENT_ORDER) {
            let Value::Array(order) = value else {
                return Err(SmpError::BadDirective {
                    directive: key.clone(),
                    why: "must be a list",
                });
            };
            orders.push((field, order));
            continue;
        }
        if value.is_null() {
            doc.remove(key);
            continue;
        }
        let (child, _) = shape.field(key);
        match (doc.get_mut(key), value) {
            (Some(Value::Object(d)), Value::Object(p)) if child.is_granular_object() => {
                if let Outcome::Delete = merge_map(d, p, &child)? {
                    doc.remove(key);
                }
            }
            (_, Value::Object(p)) if child.is_granular_object() => {
                let mut fresh = Map::new();
                if let Outcome::Keep = merge_map(&mut fresh, p, &child)? {
                    doc.insert(key.clone(), Value::Object(fresh));
                }
            }
            (Some(Value::Array(d)), Value::Array(p)) => match child.list() {
                Some((ListKind::Map(keys), item)) => merge_list_map(d, p, keys, item)?,
                Some((ListKind::Set, _)) => merge_set(d, p),
                _ => *d = p.iter().map(strip).collect(),
            },
            (_, Value::Array(p)) => {
                let mut fresh = Vec::new();
                match child.list() {
                    Some((ListKind::Map(keys), item)) => {
                        merge_list_map(&mut fresh, p, keys, item)?;
                    }
                    Some((ListKind::Set, _)) => merge_set(&mut fresh, p),
                    _ => fresh = p.iter().map(strip).collect(),
                }
                doc.insert(key.clone(), Value::Array(fresh));
            }
            _ => {
                doc.insert(key.clone(), strip(value));
            }
        }
    }
    for (field, order) in orders {
        if let Some(Value::Array(items)) = doc.get_mut(field) {
            let keys = shape.field(field).0.list().map(|(kind, _)| kind.clone());
            reorder(items, order, keys.as_ref());
        }
    }
    if let Some(retain) = patch.get(RETAIN_KEYS) {
        let Value::Array(keep) = retain else {
            return Err(SmpError::BadDirective {
                directive: RETAIN_KEYS.into(),
                why: "must be a list of field names",
            });
        };
        doc.retain(|k, _| keep.iter().any(|name| name.as_str() == Some(k.as_str())));
    }
    Ok(Outcome::Keep)
}

/// Whether `item` is the list element `patch_item` names: every merge key the patch item sets
/// (at least the first) is equal.
fn same_item(item: &Value, patch_item: &Map<String, Value>, keys: &[String]) -> bool {
    let Some(item) = item.as_object() else { return false };
    keys.iter().all(|k| match patch_item.get(k) {
        Some(v) => item.get(k) == Some(v),
        None => true,
    })
}

fn merge_list_map(
    doc: &mut Vec<Value>,
    patch: &[Value],
    keys: &[String],
    item_shape: &Shape,
) -> Result<(), SmpError> {
    let replace = patch.iter().any(|p| {
        p.get(PATCH).and_then(Value::as_str) == Some("replace")
            && p.as_object().is_some_and(|m| m.len() == 1)
    });
    if replace {
        *doc = patch
            .iter()
            .filter(|p| !(p.get(PATCH).is_some() && p.as_object().is_some_and(|m| m.len() == 1)))
            .map(strip)
            .collect();
        return Ok(());
    }
    let first = keys.first().map(String::as_str).unwrap_or_default();
    for p in patch {
        let Some(pm) = p.as_object() else {
            // A scalar in a keyed list: kept as is (only a malformed patch does this).
            doc.push(p.clone());
            continue;
        };
        if !pm.contains_key(first) {
            return Err(SmpError::MissingMergeKey { item: p.to_string(), key: first.to_owned() });
        }
        let found = doc.iter().position(|item| same_item(item, pm, keys));
        match (directive(pm)?, found) {
            (Some("delete"), Some(_)) => doc.retain(|item| !same_item(item, pm, keys)),
            (Some("delete"), None) => {}
            (_, Some(i)) => {
                if let Value::Object(item) = &mut doc[i] {
                    if let Outcome::Delete = merge_map(item, pm, item_shape)? {
                        doc.remove(i);
                    }
                }
            }
            (_, None) => {
                let mut fresh = Map::new();
                merge_map(&mut fresh, pm, item_shape)?;
                doc.push(Value::Object(fresh));
            }
        }
    }
    Ok(())
}

fn merge_set(doc: &mut Vec<Value>, patch: &[Value]) {
    for v in patch {
        if !doc.contains(v) {
            doc.push(strip(v));
        }
    }
}

/// Orders `items` as `order` lists them (by merge key, or by value for sets); items it does not
/// name keep their relative order after those it names.
fn reorder(items: &mut [Value], order: &[Value], kind: Option<&ListKind>) {
    let rank = |item: &Value| -> usize {
        order
            .iter()
            .position(|o| match (kind, o.as_object()) {
                (Some(ListKind::Map(keys)), Some(om)) => same_item(item, om, keys),
                _ => o == item,
            })
            .unwrap_or(usize::MAX)
    };
    items.sort_by_key(|item| rank(item));
}

/// A patch value without its directives (what is stored when it adds something new).
fn strip(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(strip).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machinery::merge::shape;
    use serde_json::json;

    fn deployment() -> Shape {
        shape::core("apps", "Deployment")
    }

    #[test]
    fn keyed_lists_merge_by_their_key() {
        let mut doc = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}}}});
        let patch = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "b", "image": "b:2"}, {"name": "c", "image": "c:1"}]}}}});
        apply(&mut doc, &patch, &deployment()).unwrap();
        assert_eq!(
            doc["spec"]["template"]["spec"]["containers"],
            json!([{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:2"},
                   {"name": "c", "image": "c:1"}])
        );
    }

    #[test]
    fn directives_delete_replace_and_order() {
        let mut doc = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "a:1", "args": ["x"]}, {"name": "b", "image": "b:1"}]}}}});
        let patch = json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
            "containers": [{"name": "a", "$patch": "replace", "image": "a:2"}]}}}});
        apply(&mut doc, &patch, &deployment()).unwrap();
        assert_eq!(
            doc["spec"]["template"]["spec"]["containers"],
            json!([{"name": "b", "image": "b:1"}, {"name": "a", "image": "a:2"}])
        );
        let patch = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "b", "$patch": "delete"}]}}}});
        apply(&mut doc, &patch, &deployment()).unwrap();
        assert_eq!(
            doc["spec"]["template"]["spec"]["containers"],
            json!([{"name": "a", "image": "a:2"}])
        );
        let patch = json!({"spec": {"template": {"spec": {"containers": [
            {"$patch": "replace"}, {"name": "z", "image": "z"}]}}}});
        apply(&mut doc, &patch, &deployment()).unwrap();
        assert_eq!(
            doc["spec"]["template"]["spec"]["containers"],
            json!([{"name": "z", "image": "z"}])
        );
    }

    #[test]
    fn sets_union_and_delete_from_primitive_list() {
        let meta = shape::core("", "ConfigMap");
        let mut doc = json!({"metadata": {"finalizers": ["a", "b"], "labels": {"x": "1"}}});
        let patch = json!({"metadata": {"finalizers": ["c", "a"],
                                        "$deleteFromPrimitiveList/finalizers": ["b"],
                                        "labels": {"x": null, "y": "2"}}});
        apply(&mut doc, &patch, &meta).unwrap();
        assert_eq!(doc["metadata"], json!({"finalizers": ["a", "c"], "labels": {"y": "2"}}));
    }

    #[test]
    fn retain_keys_and_atomic_lists() {
        let cm = shape::core("", "ConfigMap");
        let mut doc = json!({"data": {"a": "1", "b": "2"}, "other": [1, 2]});
        let patch = json!({"data": {"$retainKeys": ["b", "c"], "c": "3"}, "other": [3]});
        apply(&mut doc, &patch, &cm).unwrap();
        assert_eq!(doc, json!({"data": {"b": "2", "c": "3"}, "other": [3]}));
    }

    #[test]
    fn bad_patches_are_errors() {
        let d = deployment();
        let mut doc = json!({});
        assert_eq!(apply(&mut doc, &json!([1]), &d), Err(SmpError::NotAnObject));
        let missing_key = json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}});
        assert!(matches!(apply(&mut doc, &missing_key, &d), Err(SmpError::MissingMergeKey { .. })));
        let bad = json!({"spec": {"$patch": "explode"}});
        assert!(matches!(apply(&mut doc, &bad, &d), Err(SmpError::UnknownDirective(..))));
    }
}
