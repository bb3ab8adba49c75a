//! Defaulting and pruning by a structural schema, as apiextensions-apiserver does them.

use serde_json::Value;

use super::validate::FieldPath;
use super::*;

impl Schema {
    /// Fills `default`s the way apiextensions does: for every object that exists, each absent
    /// property with a default gets a copy of it, and so does a property that is `null` but
    /// not nullable; a non-nullable `null` without a default is removed (kube's
    /// `PruneNonNullableNullsWithoutDefaults`). Defaulting runs top-down, so a default is
    /// itself defaulted, and reaches into array items and map values. A nullable `null` stays.
    pub fn apply_defaults(&self, obj: &mut Value) {
        default_node(self, obj);
    }
}

pub(super) fn is_non_nullable_null(v: &Value, s: &Schema) -> bool {
    v.is_null() && !s.nullable
}

pub(super) fn default_node(s: &Schema, v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|key, value| {
                let schema = match (s.properties.get(key), &s.additional_properties) {
                    (Some(prop), _) => prop,
                    (None, Some(AdditionalProperties::Schema(values))) => values,
                    _ => return true,
                };
                !(is_non_nullable_null(value, schema) && schema.default.is_none())
            });
            for (name, prop) in &s.properties {
                let Some(default) = &prop.default else { continue };
                match map.get_mut(name) {
                    None => {
                        map.insert(name.clone(), default.clone());
                    }
                    Some(value) if is_non_nullable_null(value, prop) => *value = default.clone(),
                    Some(_) => {}
                }
            }
            for (key, value) in map.iter_mut() {
                if let Some(prop) = s.properties.get(key) {
                    default_node(prop, value);
                } else if let Some(AdditionalProperties::Schema(values)) = &s.additional_properties
                {
                    if is_non_nullable_null(value, values) {
                        if let Some(default) = &values.default {
                            *value = default.clone();
                        }
                    }
                    default_node(values, value);
                }
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = s.items.as_deref() else { return };
            for item in items {
                if is_non_nullable_null(item, item_schema) {
                    if let Some(default) = &item_schema.default {
                        *item = default.clone();
                    }
                }
                default_node(item_schema, item);
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// Pruning
// ---------------------------------------------------------------------------------------------

impl Schema {
    /// Drops every field the schema does not declare, as kube's structural pruning does, and
    /// returns the dropped fields' paths as kube reports them for `fieldValidation`
    /// (`spec.colour`, `spec.taints[0].colour`; map entries are dotted, `spec.selector.app.x`,
    /// since kube's pruner joins every key with a dot). Kept: subtrees under
    /// `x-kubernetes-preserve-unknown-fields` (their declared properties are still pruned),
    /// values of `additionalProperties`, and `apiVersion`/`kind` (strings) and `metadata`
    /// (an object) at the root and at embedded-resource nodes.
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        let mut pruned = Vec::new();
        let mut path = FieldPath(String::new());
        prune_node(Some(self), obj, true, &mut path, &mut pruned);
        pruned
    }
}

pub(super) fn is_kept_meta_field(key: &str, value: &Value) -> bool {
    match key {
        "apiVersion" | "kind" => value.is_string(),
        "metadata" => value.is_object(),
        _ => false,
    }
}

pub(super) fn prune_node(
    s: Option<&Schema>,
    v: &mut Value,
    resource_root: bool,
    path: &mut FieldPath,
    pruned: &mut Vec<String>,
) {
    if let Some(s) = s.filter(|s| s.preserve_unknown_fields) {
        skip_prune(s, v, path, pruned);
        return;
    }
    match v {
        Value::Object(map) => {
            let Some(s) = s else {
                for key in map.keys() {
                    pruned.push(path.child(key));
                }
                map.clear();
                return;
            };
            let meta_fields = resource_root || s.embedded_resource;
            map.retain(|key, value| {
                if meta_fields && is_kept_meta_field(key, value) {
                    return true;
                }
                let child = match (s.properties.get(key), &s.additional_properties) {
                    (Some(prop), _) => Some(prop),
                    (None, Some(AdditionalProperties::Schema(values))) => Some(&**values),
                    (None, Some(AdditionalProperties::Allowed(true))) => None,
                    (None, Some(AdditionalProperties::Allowed(false)) | None) => {
                        pruned.push(path.child(key));
                        return false;
                    }
                };
                let mark = path.field(key);
                prune_node(child, value, child.is_some_and(|c| c.embedded_resource), path, pruned);
                path.reset(mark);
                true
            });
        }
        Value::Array(items) => {
            let item_schema = s.and_then(|s| s.items.as_deref());
            let embedded = item_schema.is_some_and(|c| c.embedded_resource);
            for (i, item) in items.iter_mut().enumerate() {
                let mark = path.index(i);
                prune_node(item_schema, item, embedded, path, pruned);
                path.reset(mark);
            }
        }
        _ => {}
    }
}

/// Inside `x-kubernetes-preserve-unknown-fields`: unknown keys stay, declared ones are pruned
/// by their own schemas (kube's `skipPrune`).
pub(super) fn skip_prune(
    s: &Schema,
    v: &mut Value,
    path: &mut FieldPath,
    pruned: &mut Vec<String>,
) {
    match v {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                if s.embedded_resource && matches!(key.as_str(), "apiVersion" | "kind" | "metadata")
                {
                    continue;
                }
                let child = match (s.properties.get(key), &s.additional_properties) {
                    (Some(prop), _) => Some(prop),
                    (None, Some(AdditionalProperties::Schema(values))) => Some(&**values),
                    (None, Some(AdditionalProperties::Allowed(true))) => None,
                    (None, Some(AdditionalProperties::Allowed(false)) | None) => continue,
                };
                let mark = path.field(key);
                prune_node(child, value, child.is_some_and(|c| c.embedded_resource), path, pruned);
                path.reset(mark);
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = s.items.as_deref() else { return };
            for (i, item) in items.iter_mut().enumerate() {
                let mark = path.index(i);
                skip_prune(item_schema, item, path, pruned);
                path.reset(mark);
            }
        }
        _ => {}
    }
}
