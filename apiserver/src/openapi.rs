//! OpenAPI v3 (kube-api.md §3): one document per served group-version, with every path and
//! operation (`x-kubernetes-action`, `x-kubernetes-group-version-kind`, the `fieldValidation`
//! parameter kubectl looks for before it sends `fieldValidation=Strict`) and a schema per kind
//! (the OCM CRDs' own schemas; kinds without one are published as objects of any shape), and
//! the `/openapi/v3` root naming each document by content hash. Built once at start-up.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};
use sha2::{Digest as _, Sha512};

use crate::scheme::{ResourceType, Scheme};

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";

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
    crate::discovery::upper_hex(&Sha512::digest(bytes))
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
        let root_etag = crate::discovery::etag(&root);
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
    let mut schemas = meta_schemas();
    let mut paths = BTreeMap::new();
    for rt in kinds {
        let name = format!("{}.{version}.{}", group_prefix(group), rt.kind);
        let list_name = format!("{name}List");
        schemas.insert(name.clone(), kind_schema(rt, group, version));
        schemas.insert(
            list_name.clone(),
            json!({
                "type": "object",
                "description": format!("{} is a list of {}.", rt.list_kind, rt.kind),
                "required": ["items"],
                "properties": {
                    "apiVersion": {"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."},
                    "kind": {"type": "string", "description": "Kind is a string value representing the REST resource this object represents."},
                    "metadata": reference(LIST_META),
                    "items": {"type": "array", "items": reference(&name)},
                },
                "x-kubernetes-group-version-kind": [gvk(group, version, &rt.list_kind)],
            }),
        );
        add_paths(&mut paths, rt, group, version, &name, &list_name);
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

/// A kind's object schema: its own (with `metadata` pointing at ObjectMeta), or any object.
fn kind_schema(rt: &ResourceType, group: &str, version: &str) -> Value {
    let mut schema = match rt.strategy.openapi_schema(version) {
        Some(s) => s.clone(),
        None => json!({
            "type": "object",
            "description": format!("{} (any fields; the hub checks them when it stores the object).", rt.kind),
            "x-kubernetes-preserve-unknown-fields": true,
        }),
    };
    if let Some(obj) = schema.as_object_mut() {
        let props = obj.entry("properties").or_insert_with(|| json!({}));
        if let Some(props) = props.as_object_mut() {
            props.insert("metadata".into(), reference(OBJECT_META));
            props.entry("apiVersion").or_insert_with(|| json!({"type": "string"}));
            props.entry("kind").or_insert_with(|| json!({"type": "string"}));
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
    for sub in &rt.subresources {
        let suffix = format!("{}{}", sub.name[..1].to_uppercase(), &sub.name[1..]);
        paths.insert(format!("{collection}/{{name}}/{}", sub.name), item(&suffix, sub.name));
    }
}

/// ObjectMeta, ListMeta and what they refer to, as apimachinery publishes them (abridged
/// descriptions).
fn meta_schemas() -> serde_json::Map<String, Value> {
    let s = |t: &str, d: &str| json!({"type": t, "description": d});
    let strings = |d: &str| json!({"type": "object", "description": d, "additionalProperties": {"type": "string", "default": ""}});
    let object_meta = json!({
        "type": "object",
        "description": "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
        "properties": {
            "name": s("string", "Name must be unique within a namespace."),
            "generateName": s("string", "GenerateName is an optional prefix, used by the server, to generate a unique name ONLY IF the Name field has not been provided."),
            "namespace": s("string", "Namespace defines the space within which each name must be unique."),
            "uid": s("string", "UID is the unique in time and space value for this object."),
            "resourceVersion": s("string", "An opaque value that represents the internal version of this object."),
            "generation": {"type": "integer", "format": "int64", "description": "A sequence number representing a specific generation of the desired state."},
            "creationTimestamp": {"type": "string", "format": "date-time", "description": "CreationTimestamp is a timestamp representing the server time when this object was created."},
            "deletionTimestamp": {"type": "string", "format": "date-time", "description": "DeletionTimestamp is RFC 3339 date and time at which this resource will be deleted."},
            "deletionGracePeriodSeconds": {"type": "integer", "format": "int64", "description": "Number of seconds allowed for this object to gracefully terminate before it will be removed from the system."},
            "labels": strings("Map of string keys and values that can be used to organize and categorize (scope and select) objects."),
            "annotations": strings("Annotations is an unstructured key value map stored with a resource that may be set by external tools to store and retrieve arbitrary metadata."),
            "finalizers": {"type": "array", "description": "Must be empty before the object is deleted from the registry.", "items": {"type": "string", "default": ""}, "x-kubernetes-list-type": "set"},
            "ownerReferences": {"type": "array", "description": "List of objects depended by this object.", "items": reference("io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference"), "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["uid"], "x-kubernetes-patch-merge-key": "uid", "x-kubernetes-patch-strategy": "merge"},
            "managedFields": {"type": "array", "description": "ManagedFields maps workflow-id and version to the set of fields that are managed by that workflow.", "items": reference("io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry")},
        },
    });
    let owner = json!({
        "type": "object",
        "description": "OwnerReference contains enough information to let you identify an owning object.",
        "required": ["apiVersion", "kind", "name", "uid"],
        "properties": {
            "apiVersion": s("string", "API version of the referent."),
            "kind": s("string", "Kind of the referent."),
            "name": s("string", "Name of the referent."),
            "uid": s("string", "UID of the referent."),
            "controller": s("boolean", "If true, this reference points to the managing controller."),
            "blockOwnerDeletion": s("boolean", "If true, AND if the owner has the \"foregroundDeletion\" finalizer, then the owner cannot be deleted from the key-value store until this reference is removed."),
        },
        "x-kubernetes-map-type": "atomic",
    });
    let managed = json!({
        "type": "object",
        "description": "ManagedFieldsEntry is a workflow-id, a FieldSet and the group version of the resource that the fieldset applies to.",
        "properties": {
            "manager": s("string", "Manager is an identifier of the workflow managing these fields."),
            "operation": s("string", "Operation is the type of operation which lead to this ManagedFieldsEntry being created."),
            "apiVersion": s("string", "APIVersion defines the version of this resource that this field set applies to."),
            "time": {"type": "string", "format": "date-time", "description": "Time is the timestamp of when the ManagedFields entry was added."},
            "fieldsType": s("string", "FieldsType is the discriminator for the different fields format and version."),
            "fieldsV1": {"type": "object", "description": "FieldsV1 holds the first JSON version format as described in the \"FieldsV1\" type."},
            "subresource": s("string", "Subresource is the name of the subresource used to update that object."),
        },
    });
    let list_meta = json!({
        "type": "object",
        "description": "ListMeta describes metadata that synthetic resources must have, including lists and various status objects.",
        "properties": {
            "resourceVersion": s("string", "String that identifies the server's internal version of this object."),
            "continue": s("string", "continue may be set if the user set a limit on the number of items returned."),
            "remainingItemCount": {"type": "integer", "format": "int64", "description": "The number of subsequent items in the list which are not included in this list response."},
        },
    });
    let mut out = serde_json::Map::new();
    out.insert(OBJECT_META.into(), object_meta);
    out.insert(LIST_META.into(), list_meta);
    out.insert("io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference".into(), owner);
    out.insert("io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry".into(), managed);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheme::Profile;

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
}
