//! OpenAPI v3 (kube-api.md §3): one document per served group-version, with every path and
//! operation (`x-kubernetes-action`, `x-kubernetes-group-version-kind`, the `fieldValidation`
//! parameter kubectl looks for before it sends `fieldValidation=Strict`) and a schema per kind
//! derived from its Rust type with `schemars` (the `ocm_proto::api` types for OCM kinds, with
//! descriptions from their doc comments; k8s-openapi's for core kinds), converted to the
//! component form kube-openapi publishes (`#/components/schemas/<name>` references, upstream
//! types under their `io.k8s...` names), and the `/openapi/v3` root naming each document by
//! content hash. Built once at start-up. Only the published schema comes from the Rust types:
//! OCM objects are still validated, pruned and defaulted with their CRD's structural schema.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};
use sha2::{Digest as _, Sha512};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta};
use schemars::SchemaGenerator;
use schemars::generate::SchemaSettings;

use crate::machinery::scheme::{ResourceType, Scheme};
use crate::machinery::strategy::OpenApiSchema;

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
const API_VERSION_DOC: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DOC: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

/// One group-version document.
#[derive(Debug)]
pub struct Document {
    /// The JSON body.
    pub body: Vec<u8>,
    /// Upper-case hex SHA-512 of the body (kube-openapi's hash).
    pub hash: String,
}

/// Every OpenAPI v3 document of the server.
#[derive(Debug)]
pub struct OpenApi {
    /// `/openapi/v3`.
    pub root: Vec<u8>,
    /// The root's ETag (quoted).
    pub root_etag: String,
    /// Documents keyed by their path below `/openapi/v3/`: `api/v1`, `apis/<group>/<version>`.
    pub documents: HashMap<String, Document>,
}

fn hash(bytes: &[u8]) -> String {
    crate::machinery::discovery::upper_hex(&Sha512::digest(bytes))
}

impl OpenApi {
    /// Builds the documents of every group-version `scheme` serves.
    pub fn new(scheme: &Scheme) -> OpenApi {
        let mut documents = HashMap::new();
        let mut paths = BTreeMap::new();
        for (group, versions) in scheme.groups() {
            for version in versions {
                let kinds: Vec<&ResourceType> = scheme
                    .types()
                    .iter()
                    .filter(|rt| rt.group == group && rt.versions.contains(&version))
                    .map(|rt| rt.as_ref())
                    .collect();
                let key = if group.is_empty() {
                    format!("api/{version}")
                } else {
                    format!("apis/{group}/{version}")
                };
                let body = serde_json::to_vec(&document(&group, &version, &kinds))
                    .expect("a JSON value serializes");
                let hash = hash(&body);
                paths.insert(
                    key.clone(),
                    json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={hash}")}),
                );
                documents.insert(key, Document { body, hash });
            }
        }
        let root = serde_json::to_vec(&json!({"paths": paths})).expect("a JSON value serializes");
        let root_etag = crate::machinery::discovery::etag(&root);
        OpenApi { root, root_etag, documents }
    }
}

/// The conventional schema-name prefix of a group: `io.k8s.api.core` for core, `io.k8s.api.rbac`
/// for `rbac.authorization.k8s.io`, reversed DNS otherwise.
fn group_prefix(group: &str) -> String {
    if group.is_empty() {
        return "io.k8s.api.core".into();
    }
    if let Some(first) = group.strip_suffix(".k8s.io").map(|g| g.split('.').next().unwrap_or(g)) {
        return format!("io.k8s.api.{first}");
    }
    group.split('.').rev().collect::<Vec<_>>().join(".")
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "version": version, "kind": kind})
}

fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn document(group: &str, version: &str, kinds: &[&ResourceType]) -> Value {
    let mut generator = generator();
    let mut schemas = serde_json::Map::new();
    let mut paths = BTreeMap::new();
    for rt in kinds {
        let name = format!("{}.{version}.{}", group_prefix(group), rt.kind);
        let list_name = format!("{name}List");
        schemas.insert(name.clone(), kind_schema(rt, group, version, &mut generator));
        schemas.insert(
            list_name.clone(),
            json!({
                "type": "object",
                "description": format!("{} is a list of {}.", rt.list_kind, rt.kind),
                "required": ["items"],
                "properties": {
                    "apiVersion": {"type": "string", "description": API_VERSION_DOC},
                    "kind": {"type": "string", "description": KIND_DOC},
                    "metadata": with_description(reference(LIST_META), "Standard list metadata."),
                    "items": {"type": "array", "description": format!("The {} objects.", rt.kind), "items": reference(&name)},
                },
                "x-kubernetes-group-version-kind": [gvk(group, version, &rt.list_kind)],
            }),
        );
        add_paths(&mut paths, rt, group, version, &name, &list_name);
    }
    // What the kinds and lists refer to: ObjectMeta, ListMeta, Time, Condition, ... as
    // k8s-openapi describes them, under their kube-openapi names.
    generator.subschema_for::<ObjectMeta>();
    generator.subschema_for::<ListMeta>();
    for (name, mut schema) in generator.take_definitions(false) {
        normalize(&mut schema);
        add_upstream_extensions(&name, &mut schema);
        schemas.entry(name).or_insert(schema);
    }
    schemas.sort_keys();
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

/// A schema generator whose references point into `components.schemas`, describing what a
/// server accepts (the deserialize contract: fields with defaults are optional); `normalize`
/// does the rest of the conversion to kube-openapi's form.
fn generator() -> SchemaGenerator {
    SchemaSettings::openapi3()
        .with(|s| {
            s.meta_schema = None;
            s.transforms.clear();
            s.inline_subschemas = false;
        })
        .for_deserialize()
        .into_generator()
}

/// Turns JSON Schema as schemars writes it into OpenAPI v3 as kube-openapi publishes it:
/// - a `$ref` with siblings (a field's description) becomes `allOf: [{$ref}]` beside them;
/// - optional values lose their `null` (`type: [T, "null"]`, `anyOf: [T, {type: null}]`): the
///   API omits absent fields rather than sending `null`;
/// - `const` becomes a one-value `enum`; `true` schemas become `{}`; `$schema` and `title` go
///   (a title is folded into the description);
/// - rustdoc links in descriptions (``[`X`]``) become plain code spans.
fn normalize(schema: &mut Value) {
    let Some(obj) = schema.as_object_mut() else {
        if schema.as_bool() == Some(true) {
            *schema = json!({});
        }
        return;
    };
    obj.remove("$schema");
    if let Some(title) = obj.remove("title").and_then(|t| t.as_str().map(str::to_owned)) {
        let description = match obj.get("description").and_then(Value::as_str) {
            Some(d) => format!("{title}\n\n{d}"),
            None => title,
        };
        obj.insert("description".into(), description.into());
    }
    if let Some(Value::Array(types)) = obj.get("type") {
        let types: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        if types.len() == 1 {
            obj.insert("type".into(), types[0].clone());
        } else {
            obj.insert("type".into(), Value::Array(types));
        }
    }
    if let Some(Value::Array(any_of)) = obj.get("anyOf") {
        let not_null: Vec<&Value> =
            any_of.iter().filter(|s| s.get("type") != Some(&json!("null"))).collect();
        if not_null.len() == 1 {
            if let Some(Value::Object(inner)) = not_null.first().map(|v| (*v).clone()) {
                obj.remove("anyOf");
                for (k, v) in inner {
                    obj.entry(k).or_insert(v);
                }
            }
        }
    }
    if let Some(value) = obj.remove("const") {
        obj.insert("enum".into(), json!([value]));
    }
    if let Some(Value::Array(values)) = obj.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if obj.len() > 1 {
        if let Some(target) = obj.remove("$ref") {
            obj.insert("allOf".into(), json!([{"$ref": target}]));
        }
    }
    if let Some(Value::String(d)) = obj.get_mut("description") {
        if d.contains("[`") {
            *d = d.replace("[`", "`").replace("`]", "`");
        }
    }
    for (key, value) in obj.iter_mut() {
        match key.as_str() {
            "properties" | "patternProperties" | "definitions" | "$defs" => {
                if let Some(map) = value.as_object_mut() {
                    map.values_mut().for_each(normalize);
                }
            }
            "items" | "not" => normalize(value),
            // `additionalProperties: true` stays a boolean (OpenAPI v3 allows it).
            "additionalProperties" if value.is_object() => normalize(value),
            "allOf" | "anyOf" | "oneOf" => {
                if let Some(list) = value.as_array_mut() {
                    list.iter_mut().for_each(normalize);
                }
            }
            _ => {}
        }
    }
}

/// The structural extensions kube-openapi publishes on upstream types (from their Go
/// `+listType`/`+structType` markers) that k8s-openapi's schemas leave out: (component,
/// property or `""` for the type itself, extension, value).
const UPSTREAM_EXTENSIONS: &[(&str, &str, &str, &str)] = &[
    (OBJECT_META, "finalizers", "x-kubernetes-list-type", "set"),
    (OBJECT_META, "ownerReferences", "x-kubernetes-list-type", "map"),
    (OBJECT_META, "ownerReferences", "x-kubernetes-list-map-keys", "uid"),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference", "", "x-kubernetes-map-type", "atomic"),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector", "", "x-kubernetes-map-type", "atomic"),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
        "matchExpressions",
        "x-kubernetes-list-type",
        "atomic",
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement",
        "values",
        "x-kubernetes-list-type",
        "atomic",
    ),
    ("io.k8s.api.core.v1.ResourceRequirements", "claims", "x-kubernetes-list-type", "map"),
    ("io.k8s.api.core.v1.ResourceRequirements", "claims", "x-kubernetes-list-map-keys", "name"),
    ("io.k8s.api.rbac.v1.RoleRef", "", "x-kubernetes-map-type", "atomic"),
];

fn add_upstream_extensions(name: &str, schema: &mut Value) {
    for (component, property, key, value) in UPSTREAM_EXTENSIONS {
        if *component != name {
            continue;
        }
        let target = if property.is_empty() {
            Some(&mut *schema)
        } else {
            schema.get_mut("properties").and_then(|p| p.get_mut(*property))
        };
        if let Some(Value::Object(target)) = target {
            let value = if key.ends_with("map-keys") { json!([value]) } else { json!(value) };
            target.insert((*key).to_owned(), value);
        }
    }
}

fn with_description(mut schema: Value, description: &str) -> Value {
    schema["description"] = description.into();
    normalize(&mut schema);
    schema
}

/// A kind's object schema: derived from its Rust type, its CRD's, or any object; with
/// `apiVersion`, `kind`, `metadata` (ObjectMeta) and the kind's GVK.
fn kind_schema(
    rt: &ResourceType,
    group: &str,
    version: &str,
    generator: &mut SchemaGenerator,
) -> Value {
    let mut schema = match rt.strategy.openapi_schema(version) {
        Some(OpenApiSchema::Derived(f)) => f(generator).to_value(),
        Some(OpenApiSchema::Crd(s)) => {
            let mut s = s.clone();
            if let Some(props) = s.get_mut("properties").and_then(Value::as_object_mut) {
                props.insert(
                    "metadata".into(),
                    with_description(reference(OBJECT_META), "Standard object's metadata."),
                );
            }
            s
        }
        None => json!({
            "type": "object",
            "description": format!("{} (any fields; the hub checks them when it stores the object).", rt.kind),
            "x-kubernetes-preserve-unknown-fields": true,
        }),
    };
    normalize(&mut schema);
    if let Some(obj) = schema.as_object_mut() {
        let props = obj.entry("properties").or_insert_with(|| json!({}));
        if let Some(props) = props.as_object_mut() {
            props.entry("metadata").or_insert_with(|| {
                with_description(reference(OBJECT_META), "Standard object's metadata.")
            });
            // The descriptions every Kubernetes kind publishes for these two.
            for (name, description) in [("apiVersion", API_VERSION_DOC), ("kind", KIND_DOC)] {
                let field = props.entry(name).or_insert_with(|| json!({"type": "string"}));
                field["description"] = description.into();
            }
        }
        obj.insert(
            "x-kubernetes-group-version-kind".into(),
            json!([gvk(group, version, &rt.kind)]),
        );
    }
    schema
}

fn param(name: &str, location: &str, description: &str) -> Value {
    json!({
        "name": name,
        "in": location,
        "description": description,
        "schema": {"type": "string", "uniqueItems": true},
    })
}

fn write_params(patch: bool) -> Vec<Value> {
    let mut out = vec![
        param(
            "dryRun",
            "query",
            "When present, indicates that modifications should not be persisted. Valid values are: - All: all dry run stages will be processed",
        ),
        param(
            "fieldManager",
            "query",
            "fieldManager is a name associated with the actor or entity that is making these changes.",
        ),
        param(
            "fieldValidation",
            "query",
            "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields. Valid values are: Ignore, Warn, Strict.",
        ),
    ];
    if patch {
        out.push(json!({
            "name": "force", "in": "query",
            "description": "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people.",
            "schema": {"type": "boolean", "uniqueItems": true},
        }));
    }
    out
}

fn ok_response(schema: &str) -> Value {
    json!({"200": {"description": "OK", "content": {"application/json": {"schema": reference(schema)}}}})
}

fn operation(action: &str, id: String, kind: Value, schema: &str) -> Value {
    json!({
        "operationId": id,
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": kind,
        "responses": ok_response(schema),
    })
}

fn add_paths(
    paths: &mut BTreeMap<String, Value>,
    rt: &ResourceType,
    group: &str,
    version: &str,
    schema: &str,
    list_schema: &str,
) {
    let base = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    let kind = gvk(group, version, &rt.kind);
    let id = |verb: &str, suffix: &str| format!("{verb}{}{}", rt.kind, suffix);
    let name_param = param("name", "path", &format!("name of the {}", rt.kind));
    let ns_param =
        param("namespace", "path", "object name and auth scope, such as for teams and projects");
    let (collection, mut scope_params) = if rt.namespaced {
        (format!("{base}/namespaces/{{namespace}}/{}", rt.plural), vec![ns_param])
    } else {
        (format!("{base}/{}", rt.plural), Vec::new())
    };
    let body = |schema: &str| json!({"content": {"application/json": {"schema": reference(schema)}}, "required": true});
    let mut create = operation("post", id("create", ""), kind.clone(), schema);
    create["parameters"] = json!(write_params(false));
    create["requestBody"] = body(schema);
    paths.insert(
        collection.clone(),
        json!({
            "parameters": scope_params.clone(),
            "get": operation("list", id("list", ""), kind.clone(), list_schema),
            "post": create,
            "delete": operation("deletecollection", id("deleteCollection", ""), kind.clone(), schema),
        }),
    );
    if rt.namespaced {
        paths.insert(
            format!("{base}/{}", rt.plural),
            json!({"get": operation("list", id("list", "ForAllNamespaces"), kind.clone(), list_schema)}),
        );
    }
    scope_params.push(name_param);
    let item = |suffix: &str, sub: &str| {
        let mut put = operation("put", id("replace", suffix), kind.clone(), schema);
        put["parameters"] = json!(write_params(false));
        put["requestBody"] = body(schema);
        let mut patch = operation("patch", id("patch", suffix), kind.clone(), schema);
        patch["parameters"] = json!(write_params(true));
        // No strategic merge patch: listing it would switch client-side apply to it.
        patch["requestBody"] = json!({"content": {
            "application/json-patch+json": {"schema": {"type": "object"}},
            "application/merge-patch+json": {"schema": {"type": "object"}},
            "application/apply-patch+yaml": {"schema": {"type": "object"}},
        }, "required": true});
        let mut ops = json!({
            "parameters": scope_params.clone(),
            "get": operation("get", id("read", suffix), kind.clone(), schema),
            "put": put,
            "patch": patch,
        });
        if sub.is_empty() {
            ops["delete"] = operation("delete", id("delete", suffix), kind.clone(), schema);
        }
        ops
    };
    paths.insert(format!("{collection}/{{name}}"), item("", ""));
    // Action subresources (serviceaccounts/token) take and answer another kind; they are not
    // published yet (kubectl create token does not read OpenAPI).
    for sub in rt.subresources.iter().filter(|s| s.action.is_none()) {
        let suffix = format!("{}{}", sub.name[..1].to_uppercase(), &sub.name[1..]);
        paths.insert(format!("{collection}/{{name}}/{}", sub.name), item(&suffix, sub.name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machinery::scheme::Profile;

    #[test]
    fn every_patch_operation_declares_field_validation() {
        let api = OpenApi::new(&Scheme::new(Profile::Hub));
        let doc: Value = serde_json::from_slice(
            &api.documents["apis/cluster.open-cluster-management.io/v1"].body,
        )
        .unwrap();
        let item =
            &doc["paths"]["/apis/cluster.open-cluster-management.io/v1/managedclusters/{name}"];
        let patch = &item["patch"];
        assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "ManagedCluster");
        let names: Vec<&str> = patch["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert!(names.contains(&"fieldValidation"), "{names:?}");
        assert!(
            patch["requestBody"]["content"].get("application/strategic-merge-patch+json").is_none()
        );
        let schema =
            &doc["components"]["schemas"]["io.open-cluster-management.cluster.v1.ManagedCluster"];
        assert_eq!(schema["x-kubernetes-group-version-kind"][0]["kind"], "ManagedCluster");
        assert!(schema["properties"]["spec"]["properties"]["hubAcceptsClient"].is_object());
        let root: Value = serde_json::from_slice(&api.root).unwrap();
        let url = root["paths"]["api/v1"]["serverRelativeURL"].as_str().unwrap();
        assert!(url.starts_with("/openapi/v3/api/v1?hash=") && url.len() > 40, "{url}");
        assert_eq!(group_prefix("rbac.authorization.k8s.io"), "io.k8s.api.rbac");
    }

    fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::Object(map) => {
                if let Some(Value::String(r)) = map.get("$ref") {
                    out.push(r);
                }
                let t = map.get("type");
                // (An object under `type` is a property named `type`.)
                assert!(!t.is_some_and(Value::is_array) && t != Some(&json!("null")), "{v}");
                assert!(!map.get("$schema").is_some_and(Value::is_string), "{v}");
                assert!(!map.get("anyOf").is_some_and(Value::is_array), "{v}");
                assert!(!map.get("title").is_some_and(Value::is_string), "{v}");
                map.values().for_each(|v| refs(v, out));
            }
            Value::Array(list) => list.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }

    /// Every document is self-contained and in kube-openapi's form: each `$ref` names a
    /// component of the same document and stands alone; no `null` types or `$schema`.
    #[test]
    fn documents_are_self_contained_component_schemas() {
        for profile in [Profile::Hub, Profile::Cluster] {
            let api = OpenApi::new(&Scheme::new(profile));
            for (key, document) in &api.documents {
                let doc: Value = serde_json::from_slice(&document.body).unwrap();
                let schemas = doc["components"]["schemas"].as_object().unwrap();
                let mut found = Vec::new();
                refs(&doc["paths"], &mut found);
                refs(&doc["components"], &mut found);
                assert!(!found.is_empty(), "{key}");
                for r in found {
                    let name = r.strip_prefix("#/components/schemas/").unwrap();
                    assert!(schemas.contains_key(name), "{key}: dangling {r}");
                }
            }
        }
        let api = OpenApi::new(&Scheme::new(Profile::Hub));
        let doc: Value = serde_json::from_slice(&api.documents["api/v1"].body).unwrap();
        let cm = &doc["components"]["schemas"]["io.k8s.api.core.v1.ConfigMap"];
        assert_eq!(cm["x-kubernetes-group-version-kind"][0]["kind"], "ConfigMap");
        assert!(cm["properties"]["data"]["description"].as_str().unwrap().starts_with("Data"));
        assert_eq!(
            cm["properties"]["metadata"]["allOf"][0]["$ref"],
            format!("#/components/schemas/{OBJECT_META}")
        );
        let meta = &doc["components"]["schemas"][OBJECT_META];
        assert_eq!(meta["properties"]["ownerReferences"]["x-kubernetes-list-map-keys"][0], "uid");
        // A field the CRD defaults is published with its default (serde's).
        let doc: Value = serde_json::from_slice(
            &api.documents["apis/cluster.open-cluster-management.io/v1beta2"].body,
        )
        .unwrap();
        let set = &doc["components"]["schemas"]["io.open-cluster-management.cluster.v1beta2.ManagedClusterSet"];
        let selector = &set["properties"]["spec"]["properties"]["clusterSelector"];
        assert_eq!(
            selector["properties"]["selectorType"]["default"], "ExclusiveClusterSetLabel",
            "{selector}"
        );
        assert!(
            set["properties"]["apiVersion"]["description"].as_str().unwrap().contains("APIVersion")
        );
    }
}
