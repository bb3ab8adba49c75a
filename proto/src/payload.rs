//! OCM's CloudEvents payloads for ManifestWorks (ocm-wave2.md §6.1–§6.2; sdk-go
//! `clients/work/payload/manifestbundle.go` and `clients/statushash`): the `ManifestBundle` a
//! source sends, the `ManifestBundleStatus` an agent answers with, and the status hash both
//! sides compare in a status resync. The field names and shapes are OCM's Go types', so an OCM
//! agent or source reads what ours write and the other way round.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value, json};

use crate::api::meta::{Condition, null_as_default};
use crate::api::work::v1::{
    DeleteOption, FeedbackValue, ManifestCondition, ManifestConfigOption, ManifestResourceStatus,
    ManifestWorkExecutor, ManifestWorkStatus,
};

/// `ManifestBundle`: a work's spec as a source sends it. `manifests` is always written;
/// `executer` is spelt as OCM spells it.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestBundle {
    /// The manifests, verbatim.
    #[serde(default, deserialize_with = "null_as_default")]
    pub manifests: Vec<Value>,
    /// How the manifests are deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_option: Option<DeleteOption>,
    /// Per-manifest options.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub manifest_configs: Vec<ManifestConfigOption>,
    /// Who applies the manifests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executer: Option<ManifestWorkExecutor>,
}

/// `ManifestBundleStatus`: a work's status as an agent reports it. `resourceStatus` is the
/// list of manifest conditions (the work's `status.resourceStatus.manifests`), not the object
/// around it; `conditions` is always written.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestBundleStatus {
    /// The spec the status is of; OCM's agent never sets it and a source with a cache ignores
    /// it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest_bundle: Option<ManifestBundle>,
    /// The work-level conditions.
    #[serde(default, deserialize_with = "null_as_default")]
    pub conditions: Vec<Condition>,
    /// One entry per manifest. The object shape `{"manifests": [...]}` that agents of release
    /// 0.x sent is read too (see [`legacy_or_list`]).
    #[serde(default, deserialize_with = "legacy_or_list", skip_serializing_if = "Vec::is_empty")]
    pub resource_status: Vec<ManifestCondition>,
}

impl ManifestBundleStatus {
    /// The payload reporting `status`.
    pub fn of(status: &ManifestWorkStatus) -> ManifestBundleStatus {
        ManifestBundleStatus {
            manifest_bundle: None,
            conditions: status.conditions.clone(),
            resource_status: status
                .resource_status
                .as_ref()
                .map(|r| r.manifests.clone())
                .unwrap_or_default(),
        }
    }

    /// The work status this payload reports.
    pub fn into_work_status(self) -> ManifestWorkStatus {
        ManifestWorkStatus {
            conditions: self.conditions,
            resource_status: (!self.resource_status.is_empty())
                .then_some(ManifestResourceStatus { manifests: self.resource_status }),
        }
    }
}

/// `resourceStatus` as OCM writes it (a list, or null), or in the object shape
/// `{"manifests": [...]}` of agents from before the hub spoke OCM's shape. The README says how
/// long the object shape stays accepted.
fn legacy_or_list<'de, D>(deserializer: D) -> Result<Vec<ManifestCondition>, D::Error>
where
    D: Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Shape {
        List(Vec<ManifestCondition>),
        Legacy(ManifestResourceStatus),
    }
    Ok(match Option::<Shape>::deserialize(deserializer)? {
        None => Vec::new(),
        Some(Shape::List(list)) => list,
        Some(Shape::Legacy(object)) => object.manifests,
    })
}

/// OCM's status hash of a work status (`statushash.StatusHash`): the lowercase hex SHA-256 of
/// Go's JSON of the status after apimachinery's unstructured conversion, so an OCM agent and
/// ours hash the same status alike. See [`go_status`] for the shape hashed.
pub fn status_hash(status: &ManifestWorkStatus) -> String {
    crate::gojson::go_json_sha256(&go_status(status))
}

/// A work status as apimachinery's unstructured converter leaves Go's `ManifestWorkStatus`:
/// `omitempty` drops empty lists, strings and zero numbers but never a struct, so
/// `resourceStatus` and each manifest's `statusFeedback` are present even when empty, every
/// `resourceMeta` field is present, a condition's `reason` and `message` always, its
/// `observedGeneration` only when set. A manifest's conditions are always a list, `[]` when
/// empty, as OCM's agent makes them (a non-nil slice).
pub fn go_status(status: &ManifestWorkStatus) -> Value {
    let mut out = Map::new();
    if !status.conditions.is_empty() {
        out.insert("conditions".into(), go_conditions(&status.conditions));
    }
    let manifests = status.resource_status.as_ref().map(|r| r.manifests.as_slice()).unwrap_or(&[]);
    let mut resource_status = Map::new();
    if !manifests.is_empty() {
        resource_status
            .insert("manifests".into(), manifests.iter().map(go_manifest_condition).collect());
    }
    out.insert("resourceStatus".into(), Value::Object(resource_status));
    Value::Object(out)
}

fn go_manifest_condition(m: &ManifestCondition) -> Value {
    let meta = &m.resource_meta;
    let text = |s: &Option<String>| Value::String(s.clone().unwrap_or_default());
    let values: &[FeedbackValue] = m.status_feedback.as_ref().map_or(&[], |f| &f.values);
    let mut feedback = Map::new();
    if !values.is_empty() {
        feedback.insert("values".into(), serde_json::to_value(values).unwrap_or(Value::Null));
    }
    json!({
        "resourceMeta": {
            "ordinal": meta.ordinal,
            "group": text(&meta.group),
            "version": text(&meta.version),
            "kind": text(&meta.kind),
            "resource": text(&meta.resource),
            "name": text(&meta.name),
            "namespace": text(&meta.namespace),
        },
        "statusFeedback": feedback,
        "conditions": go_conditions(&m.conditions),
    })
}

/// metav1.Conditions as the converter writes them: `observedGeneration` omitted when 0.
fn go_conditions(conditions: &[Condition]) -> Value {
    Value::Array(
        conditions
            .iter()
            .map(|c| {
                let mut v = serde_json::to_value(c).unwrap_or(Value::Null);
                if let Some(m) = v.as_object_mut() {
                    if m.get("observedGeneration").and_then(Value::as_i64) == Some(0) {
                        m.remove("observedGeneration");
                    }
                }
                v
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gojson::go_json;

    fn status(v: Value) -> ManifestWorkStatus {
        serde_json::from_value(v).unwrap()
    }

    /// A status with one manifest, two feedback values and work-level conditions, in the work's
    /// own (REST) shape.
    fn sample() -> ManifestWorkStatus {
        status(json!({
            "conditions": [
                {"type": "Applied", "status": "True", "observedGeneration": 2,
                 "lastTransitionTime": "2026-11-27T10:00:00Z",
                 "reason": "AppliedManifestWorkComplete", "message": "Apply manifest work complete"},
            ],
            "resourceStatus": {"manifests": [{
                "resourceMeta": {"ordinal": 0, "version": "v1", "kind": "ConfigMap",
                                 "resource": "configmaps", "name": "cm", "namespace": "default"},
                "statusFeedback": {"values": [
                    {"name": "replicas", "fieldValue": {"type": "Integer", "integer": 3}},
                    {"name": "note", "fieldValue": {"type": "String", "string": "a<b"}},
                ]},
                "conditions": [
                    {"type": "Applied", "status": "True", "lastTransitionTime": "2026-11-27T10:00:00Z",
                     "reason": "AppliedManifestComplete", "message": "Apply manifest complete"},
                ],
            }]},
        }))
    }

    #[test]
    fn the_status_payload_carries_the_manifest_list() {
        let payload = serde_json::to_value(ManifestBundleStatus::of(&sample())).unwrap();
        let list = payload["resourceStatus"].as_array().expect("a list, as OCM's Go type has");
        assert_eq!(list[0]["resourceMeta"]["name"], "cm");
        assert_eq!(payload["conditions"][0]["type"], "Applied");
        assert!(payload.get("manifestBundle").is_none());
        // No manifests: the list is omitted, the conditions are still written.
        let empty = serde_json::to_value(ManifestBundleStatus::default()).unwrap();
        assert_eq!(empty, json!({"conditions": []}));
    }

    #[test]
    fn both_status_shapes_read_back_to_the_same_work_status() {
        let new = serde_json::to_vec(&ManifestBundleStatus::of(&sample())).unwrap();
        let legacy = serde_json::to_vec(&sample()).unwrap();
        for bytes in [new, legacy] {
            let read: ManifestBundleStatus = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(read.into_work_status(), sample());
        }
        let null: ManifestBundleStatus =
            serde_json::from_str(r#"{"conditions":null,"resourceStatus":null}"#).unwrap();
        let nil_manifest: ManifestBundleStatus = serde_json::from_str(
            r#"{"conditions":[],"resourceStatus":[{"resourceMeta":{"ordinal":0},"conditions":null}]}"#,
        )
        .unwrap();
        assert!(nil_manifest.resource_status[0].conditions.is_empty());
        assert_eq!(null.into_work_status(), ManifestWorkStatus::default());
        let err = serde_json::from_str::<ManifestBundleStatus>(r#"{"resourceStatus":7}"#);
        assert!(err.is_err());
    }

    /// The bytes hashed are Go's: every `resourceMeta` key, empty structs kept, keys sorted,
    /// HTML escaped, `observedGeneration` 0 dropped.
    #[test]
    fn the_hashed_bytes_are_gos() {
        assert_eq!(go_json(&go_status(&ManifestWorkStatus::default())), r#"{"resourceStatus":{}}"#);
        let bare = status(json!({"resourceStatus": {"manifests": [
            {"resourceMeta": {"ordinal": 1}, "conditions": []}]}}));
        assert_eq!(
            go_json(&go_status(&bare)),
            concat!(
                r#"{"resourceStatus":{"manifests":[{"conditions":[],"resourceMeta":"#,
                r#"{"group":"","kind":"","name":"","namespace":"","ordinal":1,"resource":"","version":""},"#,
                r#""statusFeedback":{}}]}}"#
            )
        );
        assert_eq!(
            go_json(&go_status(&sample())),
            concat!(
                r#"{"conditions":[{"lastTransitionTime":"2026-11-27T10:00:00Z","message":"Apply manifest work complete","#,
                r#""observedGeneration":2,"reason":"AppliedManifestWorkComplete","status":"True","type":"Applied"}],"#,
                r#""resourceStatus":{"manifests":[{"conditions":[{"lastTransitionTime":"2026-11-27T10:00:00Z","#,
                r#""message":"Apply manifest complete","reason":"AppliedManifestComplete","status":"True","type":"Applied"}],"#,
                r#""resourceMeta":{"group":"","kind":"ConfigMap","name":"cm","namespace":"default","ordinal":0,"#,
                r#""resource":"configmaps","version":"v1"},"statusFeedback":{"values":[{"fieldValue":{"integer":3,"#,
                r#""type":"Integer"},"name":"replicas"},{"fieldValue":{"string":"a\u003cb","type":"String"},"name":"note"}]}}]}}"#
            )
        );
    }

    /// Hashes computed outside this code: Python's `json.dumps(sort_keys=True,
    /// separators=(",", ":"), ensure_ascii=False)` of the Go shapes written out by hand, with Go's
    /// HTML escapes, then `hashlib.sha256`.
    #[test]
    fn status_hashes_are_ocms() {
        let bare = status(json!({"resourceStatus": {"manifests": [
            {"resourceMeta": {"ordinal": 1}, "conditions": []}]}}));
        for (status, want) in [
            (
                ManifestWorkStatus::default(),
                "3a4ba43801251ccdf889a3154674d23a35ab996aacfc00de92e61dbb2f5cf189",
            ),
            (bare, "f30b36607ae0900d03f88003a07d778164657550940ff4c2617afb9f7474d471"),
            (sample(), "701d7ae5e025ef67dffbcf2fb0076f7aead04b42968d831c2d3e98bfb5c96823"),
        ] {
            assert_eq!(status_hash(&status), want, "{}", go_json(&go_status(&status)));
        }
    }

    /// Go keeps a condition's time to the second (metav1.Time is RFC 3339 in seconds), so a
    /// stored time with a fraction hashes as its second.
    #[test]
    fn condition_times_are_hashed_to_the_second() {
        let at = |t: &str| -> ManifestWorkStatus {
            serde_json::from_value(json!({"conditions": [{"type": "Applied", "status": "True",
                "lastTransitionTime": t, "reason": "r", "message": "m"}]}))
            .unwrap()
        };
        let hashed = crate::gojson::go_json(&go_status(&at("2026-11-27T10:00:00.123456Z")));
        assert!(hashed.contains(r#""lastTransitionTime":"2026-11-27T10:00:00Z""#), "{hashed}");
    }
}
