//! `events.k8s.io/v1` Events as a view of core `v1` Events: one store, two APIs, as in
//! Kubernetes. The strategy renames the fields that differ (`regarding` ⇄ `involvedObject`,
//! `note` ⇄ `message`, ...) on the way in and out, and applies the events API's own rules.

use k8s_openapi::api::core;
use ocm_proto::validation::FieldError;
use serde_json::{Map, Value};

use crate::machinery::error::ApiError;
use crate::machinery::strategy::{Strategy, Typed, set_api_version};

/// (events.k8s.io/v1 field, core/v1 field) for the top-level fields whose names differ.
const RENAMES: [(&str, &str); 7] = [
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

fn rename(obj: Value, api_version: &str, to_core: bool) -> Value {
    let Value::Object(map) = obj else { return obj };
    let mut out = Map::with_capacity(map.len());
    for (k, v) in map {
        let renamed = RENAMES.iter().find_map(|(events, core)| {
            let (from, to) = if to_core { (events, core) } else { (core, events) };
            (k == *from).then(|| (*to).to_owned())
        });
        out.insert(renamed.unwrap_or(k), v);
    }
    let mut obj = Value::Object(out);
    set_api_version(&mut obj, api_version);
    obj
}

/// The `events.k8s.io/v1` view of core Events.
#[derive(Debug, Default)]
pub struct EventsV1;

/// The core Event the view is stored as: its decoding and known fields (the view's fields are
/// core fields renamed, so an unknown field keeps its name in either).
static CORE_EVENT: Typed<core::v1::Event> = Typed::new("Event", None);

impl Strategy for EventsV1 {
    fn tracks_generation(&self) -> bool {
        false
    }

    fn prune(&self, obj: &mut Value) -> Vec<String> {
        CORE_EVENT.prune(obj)
    }

    fn openapi_schema(&self, version: &str) -> Option<crate::machinery::strategy::OpenApiSchema> {
        Typed::<k8s_openapi::api::events::v1::Event>::new("Event", None).openapi_schema(version)
    }

    fn validate(&self, obj: &Value) -> Result<Vec<FieldError>, ApiError> {
        let mut errs = CORE_EVENT.validate(obj)?;
        // The events API requires what the core API leaves optional (names as the client sent them).
        for (events, core) in [
            ("reportingController", "reportingComponent"),
            ("reportingInstance", "reportingInstance"),
            ("action", "action"),
            ("reason", "reason"),
            ("eventTime", "eventTime"),
        ] {
            if obj.get(core).and_then(Value::as_str).is_none_or(str::is_empty) {
                errs.push(FieldError::required(events, ""));
            }
        }
        Ok(errs)
    }

    fn field_path<'a>(&self, field: &'a str) -> &'a str {
        match field {
            "regarding.kind" => "involvedObject.kind",
            "regarding.name" => "involvedObject.name",
            "regarding.namespace" => "involvedObject.namespace",
            "regarding.uid" => "involvedObject.uid",
            "regarding.apiVersion" => "involvedObject.apiVersion",
            "regarding.resourceVersion" => "involvedObject.resourceVersion",
            "regarding.fieldPath" => "involvedObject.fieldPath",
            "reportingController" => "reportingComponent",
            other => other,
        }
    }

    fn storage_to_version(&self, obj: Value, api_version: &str) -> Result<Value, ApiError> {
        Ok(rename(obj, api_version, false))
    }

    fn version_to_storage(&self, obj: Value, storage_api_version: &str) -> Result<Value, ApiError> {
        Ok(rename(obj, storage_api_version, true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_through_the_core_form() {
        let ev = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e1", "namespace": "c1"},
            "regarding": {"kind": "ManagedCluster", "name": "c1"},
            "note": "joined", "reason": "Joined", "reportingController": "agent",
            "deprecatedCount": 2,
        });
        let core = EventsV1.version_to_storage(ev.clone(), "v1").unwrap();
        assert_eq!(core["involvedObject"]["name"], "c1");
        assert_eq!(core["message"], "joined");
        assert_eq!(core["reportingComponent"], "agent");
        assert_eq!(core["count"], 2);
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(EventsV1.storage_to_version(core, "events.k8s.io/v1").unwrap(), ev);
    }
}
