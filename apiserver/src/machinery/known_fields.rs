//! The fields a core kind knows, read from its k8s-openapi type's JSON schema: what
//! kube-apiserver's decoder drops (and `fieldValidation` reports) as unknown fields of a
//! built-in kind. Paths are reported as kube's strict decoder prints them
//! (`spec.foo`, `subjects[0].colour`, `metadata.labels` entries never, they are a map).

use schemars::SchemaGenerator;
use serde_json::{Map, Value};

use ocm_proto::api::SchemaFn;

/// One kind's schema with every definition it refers to, resolved once.
pub struct KnownFields {
    root: Value,
    definitions: Map<String, Value>,
}

impl KnownFields {
    /// The known fields of the type `schema` describes.
    pub fn of(schema: SchemaFn) -> KnownFields {
        let mut generator = SchemaGenerator::default();
        let root = schema(&mut generator).to_value();
        let definitions = generator.take_definitions(false);
        KnownFields { root, definitions }
    }

    /// Drops every field the schema does not declare and returns their paths. An object schema
    /// without `properties` or `additionalProperties` (RawExtension, FieldsV1, JSON) is free
    /// form: nothing under it is unknown.
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        let mut unknown = Vec::new();
        self.prune_node(&self.root, obj, "", &mut unknown);
        unknown
    }

    /// A schema with its `$ref` (or a one-entry `allOf` of one) followed to the definition.
    fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
        let mut current = schema;
        for _ in 0..8 {
            let target = current.get("$ref").and_then(Value::as_str).or_else(|| {
                match current.get("allOf").and_then(Value::as_array).map(Vec::as_slice) {
                    Some([only]) => only.get("$ref").and_then(Value::as_str),
                    _ => None,
                }
            });
            let Some(name) = target.and_then(|r| r.rsplit('/').next()) else { return current };
            match self.definitions.get(name) {
                Some(def) => current = def,
                None => return current,
            }
        }
        current
    }

    fn prune_node(&self, schema: &Value, value: &mut Value, path: &str, unknown: &mut Vec<String>) {
        let schema = self.resolve(schema);
        match value {
            Value::Object(map) => self.prune_object(schema, map, path, unknown),
            Value::Array(items) => {
                let Some(item_schema) = schema.get("items") else { return };
                for (i, item) in items.iter_mut().enumerate() {
                    self.prune_node(item_schema, item, &format!("{path}[{i}]"), unknown);
                }
            }
            _ => {}
        }
    }

    fn prune_object(
        &self,
        schema: &Value,
        map: &mut Map<String, Value>,
        path: &str,
        unknown: &mut Vec<String>,
    ) {
        let properties = schema.get("properties").and_then(Value::as_object);
        let values = schema.get("additionalProperties").filter(|a| a.is_object());
        if properties.is_none() && values.is_none() {
            return;
        }
        let child =
            |key: &str| if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") };
        map.retain(|key, value| {
            match properties.and_then(|p| p.get(key)).or(values) {
                Some(s) => self.prune_node(s, value, &child(key), unknown),
                None => {
                    unknown.push(child(key));
                    return false;
                }
            }
            true
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::{apps, core, rbac};
    use schemars::JsonSchema;
    use serde_json::json;

    fn prune<T: JsonSchema>(mut obj: Value) -> (Vec<String>, Value) {
        let unknown = KnownFields::of(T::json_schema).prune(&mut obj);
        (unknown, obj)
    }

    #[test]
    fn unknown_fields_are_dropped_and_named_by_path() {
        let (unknown, obj) = prune::<core::v1::ConfigMap>(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "colour": "red", "labels": {"x": "y"},
                         "managedFields": [{"manager": "m", "fieldsV1": {"f:data": {}}, "zz": 1}]},
            "data": {"k": "v"}, "spec": {"foo": 1},
        }));
        assert_eq!(unknown, ["metadata.colour", "metadata.managedFields[0].zz", "spec"]);
        assert_eq!(obj["metadata"]["labels"]["x"], "y");
        assert_eq!(obj["metadata"]["managedFields"][0]["fieldsV1"]["f:data"], json!({}));
        assert!(obj.get("spec").is_none());
    }

    #[test]
    fn known_fields_of_nested_types_are_kept() {
        let (unknown, _) = prune::<rbac::v1::RoleBinding>(json!({
            "metadata": {"name": "b", "creationTimestamp": null},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
            "subjects": [{"kind": "User", "name": "u", "colour": "x"}],
        }));
        assert_eq!(unknown, ["subjects[0].colour"]);
        let (unknown, _) = prune::<apps::v1::Deployment>(json!({
            "metadata": {"name": "d"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}},
                     "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [
                        {"name": "c", "image": "i", "ports": [{"containerPort": 80}],
                         "resources": {"limits": {"cpu": "1"}}, "unknownNested": 1}]}}},
            "status": {"replicas": 1},
        }));
        assert_eq!(unknown, ["spec.template.spec.containers[0].unknownNested"]);
    }
}
