//! Add-on health on the hub (ocm.md §7.4): the `WorkloadAvailability` probe of a template
//! add-on's deploy works (OCM's work prober with addon-framework's workload check), the hooks'
//! completion, and the `addon-health` controller, one key per cluster: while the cluster's
//! availability is Unknown every add-on on it is Unknown with the cluster's reason, and the
//! cluster's `feature.open-cluster-management.io/addon-<name>` labels mirror its add-ons'
//! health (`available`, `unhealthy`, `unreachable`).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use ocm_proto::api::addon::{
    CONDITION_AVAILABLE, REASON_NO_PROBE_RESULT, REASON_PROBE_AVAILABLE, REASON_PROBE_UNAVAILABLE,
    REASON_WORK_APPLIED, REASON_WORK_APPLY_FAILED, REASON_WORK_NOT_APPLIED, REASON_WORK_NOT_FOUND,
};
use ocm_proto::api::cluster::LABEL_PREFIX_ADDON_FEATURE;
use ocm_proto::api::meta::{
    CONDITION_FALSE, CONDITION_TRUE, CONDITION_UNKNOWN, Condition, condition, find_condition,
    set_condition,
};
use serde_json::{Map, Value, json};

use super::{AddonManager, WORKERS};
use crate::controllers::runtime::{Action, Runtime, Watch};
use crate::machinery::clock;
use crate::machinery::error::ApiError;
use crate::machinery::object;
use crate::store::cache::CachedObject;
use crate::store::registry::Patch;

/// A cluster's `ManagedClusterConditionAvailable` (status, reason, message), if any.
pub(super) fn cluster_condition(cluster: &Value) -> Option<(String, String, String)> {
    let conditions = cluster.pointer("/status/conditions")?.as_array()?;
    let c = conditions
        .iter()
        .find(|c| c["type"] == ocm_proto::api::cluster::v1::CONDITION_AVAILABLE)?;
    let s = |k: &str| c[k].as_str().unwrap_or("").to_owned();
    Some((s("status"), s("reason"), s("message")))
}

impl AddonManager {
    /// The cluster's availability as an add-on's `Available` when it is Unknown.
    pub(super) fn cluster_available(&self, cluster: &str) -> Option<Condition> {
        let c = self.registry.cached(&self.kinds.clusters, "", cluster)?;
        let (status, reason, message) = cluster_condition(&c.value())?;
        (status == CONDITION_UNKNOWN)
            .then(|| condition(CONDITION_AVAILABLE, CONDITION_UNKNOWN, &reason, message))
    }
}

/// `Available` of a template add-on from its deploy works, or the cluster's Unknown.
pub(super) fn probe(works: &[Arc<Value>], unknown_cluster: Option<&Condition>) -> Condition {
    if let Some(c) = unknown_cluster {
        return c.clone();
    }
    let a = |s: &str, r: &str, m: String| condition(CONDITION_AVAILABLE, s, r, m);
    if works.is_empty() {
        return a(CONDITION_UNKNOWN, REASON_WORK_NOT_FOUND, "Work for addon is not found".into());
    }
    for w in works {
        match work_condition(w, "Applied").as_deref() {
            Some(CONDITION_TRUE) => {}
            Some(CONDITION_FALSE) => {
                return a(
                    CONDITION_FALSE,
                    REASON_WORK_APPLY_FAILED,
                    format!("Work {} is not applied", object::name(w)),
                );
            }
            _ => {
                return a(
                    CONDITION_UNKNOWN,
                    REASON_WORK_NOT_APPLIED,
                    "Addon work is not applied yet".into(),
                );
            }
        }
    }
    let mut probed = 0;
    for w in works {
        for cfg in
            w.pointer("/spec/manifestConfigs").and_then(Value::as_array).into_iter().flatten()
        {
            let id = &cfg["resourceIdentifier"];
            probed += 1;
            let Some(values) = feedback(w, id) else {
                return a(
                    CONDITION_UNKNOWN,
                    REASON_NO_PROBE_RESULT,
                    "Probe results are not returned".into(),
                );
            };
            if let Err(e) = workload_available(id, &values) {
                return a(
                    CONDITION_FALSE,
                    REASON_PROBE_UNAVAILABLE,
                    format!("Probe addon unavailable with err {e}"),
                );
            }
        }
    }
    if probed == 0 {
        return a(CONDITION_TRUE, REASON_WORK_APPLIED, "Addon work is applied".into());
    }
    a(CONDITION_TRUE, REASON_PROBE_AVAILABLE, "Addon is available".into())
}

/// A work's condition status.
fn work_condition(work: &Value, type_: &str) -> Option<String> {
    let conditions = work.pointer("/status/conditions")?.as_array()?;
    let c = conditions.iter().find(|c| c["type"] == type_)?;
    c["status"].as_str().map(str::to_owned)
}

/// Whether a work is applied and available at its generation.
pub(super) fn work_ready(work: &Value) -> bool {
    let generation = object::generation(work);
    let conditions = work.pointer("/status/conditions").and_then(Value::as_array);
    ["Applied", "Available"].iter().all(|t| {
        conditions.into_iter().flatten().any(|c| {
            c["type"] == *t
                && c["status"] == CONDITION_TRUE
                && c["observedGeneration"].as_i64().is_none_or(|g| g == generation)
        })
    })
}

/// The status feedback values a work reports for the object `id` names, by name.
fn feedback(work: &Value, id: &Value) -> Option<BTreeMap<String, Value>> {
    let manifests = work.pointer("/status/resourceStatus/manifests")?.as_array()?;
    let m = manifests.iter().find(|m| {
        let meta = &m["resourceMeta"];
        ["group", "resource", "namespace", "name"]
            .iter()
            .all(|k| meta[k].as_str().unwrap_or("") == id[k].as_str().unwrap_or(""))
    })?;
    let values = m.pointer("/statusFeedback/values")?.as_array()?;
    if values.is_empty() {
        return None;
    }
    Some(
        values
            .iter()
            .filter_map(|v| Some((v["name"].as_str()?.to_owned(), v["fieldValue"].clone())))
            .collect(),
    )
}

/// addon-framework's workload check: a Deployment or DaemonSet wanting pods has one ready.
fn workload_available(id: &Value, values: &BTreeMap<String, Value>) -> Result<(), String> {
    let int = |n: &str| values.get(n).and_then(|v| v["integer"].as_i64());
    let (desired, ready) = match id["resource"].as_str() {
        Some("deployments") => (int("Replicas"), int("ReadyReplicas")),
        Some("daemonsets") => (int("DesiredNumberScheduled"), int("NumberReady")),
        other => return Err(format!("unsupported resource type {}", other.unwrap_or(""))),
    };
    let what = format!(
        "{} {}/{}",
        id["resource"].as_str().unwrap_or(""),
        id["namespace"].as_str().unwrap_or(""),
        id["name"].as_str().unwrap_or("")
    );
    let desired =
        desired.ok_or_else(|| format!("desiredNumberReplicas is not probed for {what}"))?;
    let ready = ready.unwrap_or(0);
    if desired == 0 || ready >= 1 {
        return Ok(());
    }
    Err(format!("desiredNumberReplicas is {desired} but readyReplica is {ready} for {what}"))
}

/// Whether every hook of the pre-delete work completed: the work available, each Job
/// reporting `JobComplete` True and each Pod `PodPhase` Succeeded.
pub(super) fn hooks_completed(work: &Value, hooks: &[Value]) -> bool {
    if work_condition(work, "Available").as_deref() != Some(CONDITION_TRUE) {
        return false;
    }
    hooks.iter().all(|h| {
        let Some(values) = feedback(work, &super::deploy::identifier(h)) else { return false };
        match h["kind"].as_str() {
            Some("Job") => {
                values.get("JobComplete").and_then(|v| v["string"].as_str()) == Some("True")
            }
            Some("Pod") => {
                values.get("PodPhase").and_then(|v| v["string"].as_str()) == Some("Succeeded")
            }
            _ => false,
        }
    })
}

/// Starts the health controller: one key per cluster.
pub(super) fn start(m: &Arc<AddonManager>, runtime: &Runtime) {
    let k = &m.kinds;
    let of_addon = |a: &CachedObject| vec![a.namespace_name().0.to_owned()];
    let by_name = |c: &CachedObject| vec![c.namespace_name().1.to_owned()];
    let watches = vec![
        Watch::new(&k.mcas, of_addon)
            .on_changes(|a, b| available(&a.value()) != available(&b.value())),
        Watch::new(&k.clusters, by_name).on_changes(|a, b| {
            cluster_condition(&a.value()) != cluster_condition(&b.value()) || !a.same_labels(b)
        }),
    ];
    let m = Arc::clone(m);
    runtime.run("addon-health", watches, WORKERS, move |key| {
        let m = Arc::clone(&m);
        async move { m.health(&key).await }
    });
}

/// An add-on's `Available` status.
fn available(mca: &Value) -> Option<String> {
    let conditions = mca.pointer("/status/conditions")?.as_array()?;
    let c = conditions.iter().find(|c| c["type"] == CONDITION_AVAILABLE)?;
    c["status"].as_str().map(str::to_owned)
}

/// The label value mirroring an add-on's health.
fn health_label(status: Option<&str>) -> &'static str {
    match status {
        Some(CONDITION_TRUE) => "available",
        Some(CONDITION_FALSE) => "unhealthy",
        _ => "unreachable",
    }
}

impl AddonManager {
    /// One run over `cluster`'s add-ons.
    async fn health(&self, cluster: &str) -> Result<Action, ApiError> {
        let Some(mc) = self.registry.cached(&self.kinds.clusters, "", cluster) else {
            return Ok(Action::Done);
        };
        let unknown = self.cluster_available(cluster);
        let mut labels = Map::new();
        for a in self.registry.cached_list(&self.kinds.mcas, cluster) {
            let name = a.namespace_name().1.to_owned();
            if let Some(c) = &unknown {
                self.mark_unknown(cluster, &name, c).await?;
            }
            let status = if unknown.is_some() { None } else { available(&a.value()) };
            labels.insert(
                format!("{LABEL_PREFIX_ADDON_FEATURE}{name}"),
                json!(health_label(status.as_deref())),
            );
        }
        let current = mc.value();
        let have = current.pointer("/metadata/labels").and_then(Value::as_object);
        let mut patch = Map::new();
        for (k, v) in have.into_iter().flatten() {
            if k.starts_with(LABEL_PREFIX_ADDON_FEATURE) && !labels.contains_key(k) {
                patch.insert(k.clone(), Value::Null);
            } else if labels.get(k).is_some_and(|want| want == v) {
                labels.remove(k);
            }
        }
        patch.extend(labels);
        if patch.is_empty() {
            return Ok(Action::Done);
        }
        let body = json!({"metadata": {"labels": patch}});
        let rt = &self.kinds.clusters;
        self.registry.patch(rt, "", cluster, &Patch::Merge(body), None, &Self::opts()).await?;
        Ok(Action::Done)
    }

    /// Sets an add-on's `Available` to the cluster's Unknown.
    async fn mark_unknown(&self, cluster: &str, name: &str, c: &Condition) -> Result<(), ApiError> {
        let Some((_, mut mca)) = self.read_mca(cluster, name) else { return Ok(()) };
        let status = mca.status.get_or_insert_with(Default::default);
        let same = find_condition(&status.conditions, CONDITION_AVAILABLE).is_some_and(|o| {
            o.status == c.status && o.reason == c.reason && o.message == c.message
        });
        if same {
            return Ok(());
        }
        set_condition(&mut status.conditions, c.clone(), Time(clock::timestamp()));
        self.store_mca_status(&mca).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work(conditions: Value, manifests: Value) -> Arc<Value> {
        Arc::new(json!({"metadata": {"name": "addon-a-deploy-0", "generation": 1},
            "spec": {"manifestConfigs": [{"resourceIdentifier":
                {"group": "apps", "resource": "deployments", "namespace": "ns", "name": "d"}}]},
            "status": {"conditions": conditions, "resourceStatus": {"manifests": manifests}}}))
    }

    fn deployment(replicas: i64, ready: i64) -> Value {
        json!([{"resourceMeta": {"group": "apps", "resource": "deployments", "namespace": "ns", "name": "d"},
            "statusFeedback": {"values": [
                {"name": "Replicas", "fieldValue": {"type": "Integer", "integer": replicas}},
                {"name": "ReadyReplicas", "fieldValue": {"type": "Integer", "integer": ready}}]}}])
    }

    #[test]
    fn the_workload_probe_reads_the_feedback() {
        let applied = json!([{"type": "Applied", "status": "True"}]);
        assert_eq!(probe(&[], None).reason, REASON_WORK_NOT_FOUND);
        assert_eq!(probe(&[work(json!([]), json!([]))], None).reason, REASON_WORK_NOT_APPLIED);
        assert_eq!(probe(&[work(applied.clone(), json!([]))], None).reason, REASON_NO_PROBE_RESULT);
        let down = probe(&[work(applied.clone(), deployment(1, 0))], None);
        assert_eq!(
            (down.status.as_str(), down.reason.as_str()),
            (CONDITION_FALSE, REASON_PROBE_UNAVAILABLE)
        );
        let up = probe(&[work(applied, deployment(1, 1))], None);
        assert_eq!(
            (up.status.as_str(), up.reason.as_str()),
            (CONDITION_TRUE, REASON_PROBE_AVAILABLE)
        );
        let unknown = condition(
            CONDITION_AVAILABLE,
            CONDITION_UNKNOWN,
            "ManagedClusterLeaseUpdateStopped",
            "m",
        );
        assert_eq!(probe(&[], Some(&unknown)).reason, "ManagedClusterLeaseUpdateStopped");
    }

    #[test]
    fn labels_mirror_health() {
        assert_eq!(health_label(Some("True")), "available");
        assert_eq!(health_label(Some("False")), "unhealthy");
        assert_eq!(health_label(None), "unreachable");
    }
}
