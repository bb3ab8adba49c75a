//! Discovery documents, built once from the scheme: the legacy `APIVersions`, `APIGroupList`,
//! `APIGroup` and `APIResourceList`, the aggregated `APIGroupDiscoveryList` (apidiscovery.k8s.io
//! v2 and v2beta1), and `/version`.

use std::collections::HashMap;

use base64::Engine as _;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::machinery::scheme::{ResourceType, Scheme};

/// The Kubernetes version the hub reports (k8s-openapi's oldest API level, within kubectl 1.32's
/// skew).
pub const KUBE_MAJOR: &str = "1";
/// See [`KUBE_MAJOR`].
pub const KUBE_MINOR: &str = "33";

const VERBS: [&str; 8] =
    ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];
const SUB_VERBS: [&str; 3] = ["get", "patch", "update"];

/// Every discovery answer, serialized once.
#[derive(Debug)]
pub struct Discovery {
    /// `/api` (legacy).
    pub api: Vec<u8>,
    /// `/apis` (legacy).
    pub apis: Vec<u8>,
    /// `/apis/<group>`.
    pub groups: HashMap<String, Vec<u8>>,
    /// `/api/v1` and `/apis/<group>/<version>`, keyed by `group/version` (`/v1` for core).
    pub resources: HashMap<String, Vec<u8>>,
    /// Aggregated `/api` and `/apis`, v2 then v2beta1, with their ETags.
    pub aggregated: [Aggregated; 2],
    /// `/version`.
    pub version: Vec<u8>,
}

/// The aggregated documents of one apidiscovery version.
#[derive(Debug)]
pub struct Aggregated {
    /// `v2` or `v2beta1`.
    pub version: &'static str,
    /// `/api` body and ETag.
    pub api: (Vec<u8>, String),
    /// `/apis` body and ETag.
    pub apis: (Vec<u8>, String),
}

fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    let digest = Sha256::digest(format!("{group}/{version}/{kind}").as_bytes());
    base64::engine::general_purpose::STANDARD.encode(&digest[..8])
}

/// A quoted ETag of a document (upper-case hex SHA-256).
pub(crate) fn etag(body: &[u8]) -> String {
    format!("\"{}\"", upper_hex(&Sha256::digest(body)))
}

/// Bytes as upper-case hex, as kube-openapi writes its hashes.
pub(crate) fn upper_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

/// The verbs of a kind: all of them, or `create` for the review kinds.
fn verbs(rt: &ResourceType) -> &'static [&'static str] {
    if rt.review.is_some() { &["create"] } else { &VERBS }
}

fn gv(group: &str, version: &str) -> String {
    if group.is_empty() { version.to_owned() } else { format!("{group}/{version}") }
}

fn legacy_resources(rt: &ResourceType, version: &str) -> Vec<Value> {
    let mut main = json!({
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": verbs(rt),
        "storageVersionHash": storage_version_hash(&rt.group, version, &rt.kind),
    });
    if rt.review.is_some() {
        // kube-apiserver gives the review kinds no storage version hash.
        if let Some(m) = main.as_object_mut() {
            m.remove("storageVersionHash");
        }
    }
    if !rt.short_names.is_empty() {
        main["shortNames"] = json!(rt.short_names);
    }
    if !rt.categories.is_empty() {
        main["categories"] = json!(rt.categories);
    }
    let mut out = vec![main];
    for sub in &rt.subresources {
        let mut doc = json!({
            "name": format!("{}/{}", rt.plural, sub.name),
            "singularName": "",
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": SUB_VERBS,
        });
        if let Some(action) = sub.action {
            let (group, version, kind) = action.kind();
            doc["group"] = json!(group);
            doc["version"] = json!(version);
            doc["kind"] = json!(kind);
            doc["verbs"] = json!([action.verb()]);
        }
        out.push(doc);
    }
    out
}

fn aggregated_resource(rt: &ResourceType, version: &str) -> Value {
    let kind = json!({"group": rt.group, "version": version, "kind": rt.kind});
    let mut r = json!({
        "resource": rt.plural,
        "responseKind": kind,
        "scope": if rt.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": rt.singular,
        "verbs": verbs(rt),
    });
    if !rt.short_names.is_empty() {
        r["shortNames"] = json!(rt.short_names);
    }
    if !rt.categories.is_empty() {
        r["categories"] = json!(rt.categories);
    }
    if !rt.subresources.is_empty() {
        r["subresources"] = Value::Array(
            rt.subresources
                .iter()
                .map(|s| match s.action {
                    Some(action) => {
                        let (group, version, kind) = action.kind();
                        json!({
                            "subresource": s.name,
                            "responseKind": {"group": group, "version": version, "kind": kind},
                            "verbs": [action.verb()],
                        })
                    }
                    None => json!({
                        "subresource": s.name,
                        "responseKind": kind,
                        "verbs": SUB_VERBS,
                    }),
                })
                .collect(),
        );
    }
    r
}

fn to_bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

impl Discovery {
    /// Builds every document of `scheme`; `server` is the address clients reach the hub at.
    pub fn new(scheme: &Scheme, server: &str) -> Discovery {
        let groups = scheme.groups();
        let mut resources = HashMap::new();
        let mut group_docs = HashMap::new();
        let mut legacy_groups = Vec::new();
        let mut agg_core = Vec::new();
        let mut agg_groups = Vec::new();
        for (group, versions) in &groups {
            let mut agg_versions = Vec::new();
            for version in versions {
                let served: Vec<_> = scheme
                    .types()
                    .iter()
                    .filter(|rt| rt.group == *group && rt.versions.contains(version))
                    .collect();
                let list = json!({
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": gv(group, version),
                    "resources": served.iter().flat_map(|rt| legacy_resources(rt, version)).collect::<Vec<_>>(),
                });
                resources.insert(format!("{group}/{version}"), to_bytes(&list));
                agg_versions.push(json!({
                    "version": version,
                    "resources": served.iter().map(|rt| aggregated_resource(rt, version)).collect::<Vec<_>>(),
                    "freshness": "Current",
                }));
            }
            let item = json!({"metadata": {"name": group, "creationTimestamp": null}, "versions": agg_versions});
            if group.is_empty() {
                agg_core.push(item);
                continue;
            }
            agg_groups.push(item);
            let version_list: Vec<Value> = versions
                .iter()
                .map(|v| json!({"groupVersion": gv(group, v), "version": v}))
                .collect();
            let api_group = json!({
                "name": group,
                "versions": version_list,
                "preferredVersion": version_list[0],
            });
            let mut doc = api_group.clone();
            doc["kind"] = json!("APIGroup");
            doc["apiVersion"] = json!("v1");
            group_docs.insert(group.clone(), to_bytes(&doc));
            legacy_groups.push(api_group);
        }
        let api = json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server}],
        });
        let apis = json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": legacy_groups});
        let aggregated = ["v2", "v2beta1"].map(|v| {
            let doc = |items: &Vec<Value>| {
                let body = to_bytes(&json!({
                    "kind": "APIGroupDiscoveryList",
                    "apiVersion": format!("apidiscovery.k8s.io/{v}"),
                    "metadata": {},
                    "items": items,
                }));
                let tag = etag(&body);
                (body, tag)
            };
            Aggregated { version: v, api: doc(&agg_core), apis: doc(&agg_groups) }
        });
        let version = json!({
            "major": KUBE_MAJOR,
            "minor": KUBE_MINOR,
            "gitVersion": format!("v{KUBE_MAJOR}.{KUBE_MINOR}.0+ocm-hub-{}", env!("CARGO_PKG_VERSION")),
            "gitCommit": "",
            "gitTreeState": "clean",
            "buildDate": "1970-01-01T00:00:00Z",
            "goVersion": "",
            "compiler": "rustc",
            "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
        });
        Discovery {
            api: to_bytes(&api),
            apis: to_bytes(&apis),
            groups: group_docs,
            resources,
            aggregated,
            version: to_bytes(&version),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_version_hash_matches_kubernetes() {
        // kube-apiserver advertises this hash for core/v1 ConfigMap.
        assert_eq!(storage_version_hash("", "v1", "ConfigMap"), "qFsyl6wFWjQ=");
    }
}
