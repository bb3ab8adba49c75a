//! The ConfigurationPolicy objects on the managed cluster, as OCM's framework add-on keeps them:
//! each template of a replicated policy in the cluster's namespace there (labelled with the
//! replica and the cluster), its status the agent's last evaluation (`compliant`,
//! `compliancyDetails` per object template, `relatedObjects`, `lastEvaluated`,
//! `lastEvaluatedGeneration`), written only when it changed. A cluster that does not serve the
//! kind (no CRD) is left alone: the hub still gets each policy's compliance.

use std::collections::BTreeMap;

use ocm_proto::api::policy::v1::{
    CompliancyCondition, ConfigurationPolicy, ConfigurationPolicyStatus, TemplateStatus, Validity,
};
use ocm_proto::api::policy::{
    COMPLIANT, LABEL_CLUSTER_NAME, LABEL_CLUSTER_NAMESPACE, NON_COMPLIANT,
};
use serde_json::{Value, json};

use crate::cluster::{Cluster, Strategy, ensure_namespace};
use crate::configpolicy::Evaluation;
use crate::error::AgentError;

/// Label naming the replicated policy a template object belongs to.
const LABEL_POLICY: &str = "policy.open-cluster-management.io/policy";

/// The statuses last written, by `<namespace>/<name>` on the cluster.
#[derive(Default)]
pub(super) struct Written(BTreeMap<String, Value>);

/// The template object `cfg` of `replica` in namespace `cluster` on the managed cluster.
pub(super) fn object(cfg: &ConfigurationPolicy, replica: &str, cluster: &str) -> Value {
    let mut obj = serde_json::to_value(cfg).unwrap_or_default();
    if let Some(o) = obj.as_object_mut() {
        o.remove("status");
    }
    obj["metadata"] = json!({
        "name": cfg.metadata.name.clone().unwrap_or_default(),
        "namespace": cluster,
        "labels": {LABEL_POLICY: replica, LABEL_CLUSTER_NAME: cluster, LABEL_CLUSTER_NAMESPACE: cluster},
    });
    obj
}

/// The status an evaluation gives the template object.
fn status(eval: &Evaluation, generation: i64) -> Value {
    let now = crate::clock::now();
    let details = eval
        .templates
        .iter()
        .map(|t| TemplateStatus {
            compliant: Some(if t.compliant { COMPLIANT } else { NON_COMPLIANT }.to_owned()),
            validity: Some(Validity { reason: None, valid: Some(true) }),
            conditions: vec![CompliancyCondition {
                last_transition_time: Some(now.clone()),
                message: Some(t.message.clone()),
                reason: Some(t.reason.clone()),
                status: Some("True".to_owned()),
                type_: if t.compliant { "notification" } else { "violation" }.to_owned(),
            }],
        })
        .collect();
    let status = ConfigurationPolicyStatus {
        compliancy_details: details,
        compliant: Some(eval.state().to_owned()),
        history: Vec::new(),
        last_evaluated: Some(now.0.to_string()),
        last_evaluated_generation: Some(generation),
        related_objects: eval.related.clone(),
    };
    serde_json::to_value(status).unwrap_or_default()
}

/// Keeps the template object of `cfg` on `cluster` with the status of `eval`; writes only
/// when what it would write (but the times) changed since the last write.
pub(super) async fn keep(
    cluster: &dyn Cluster,
    written: &mut Written,
    obj: Value,
    eval: &Evaluation,
    generation: i64,
) -> Result<(), AgentError> {
    let key = format!("{}/{}", obj["metadata"]["namespace"], obj["metadata"]["name"]);
    let st = status(eval, generation);
    let timeless = |v: &Value| {
        let mut v = v.clone();
        v["lastEvaluated"] = Value::Null;
        for d in v["compliancyDetails"].as_array_mut().into_iter().flatten() {
            for c in d["conditions"].as_array_mut().into_iter().flatten() {
                c["lastTransitionTime"] = Value::Null;
            }
        }
        v
    };
    if written.0.get(&key).map(timeless) == Some(timeless(&st)) {
        return Ok(());
    }
    let namespace = obj["metadata"]["namespace"].as_str().unwrap_or("").to_owned();
    ensure_namespace(cluster, &namespace).await?;
    let (_, mut live) = cluster.apply(&obj, None, &Strategy::Update).await?;
    live["status"] = st.clone();
    cluster.replace_status(&live).await?;
    written.0.insert(key, st);
    Ok(())
}

/// Deletes the template object `obj` from the cluster (its policy went).
pub(super) async fn remove(cluster: &dyn Cluster, written: &mut Written, obj: &Value) {
    written.0.remove(&format!("{}/{}", obj["metadata"]["namespace"], obj["metadata"]["name"]));
    if let Ok(target) = cluster.resolve(obj).await {
        if let Err(e) = cluster.delete(&target).await {
            tracing::debug!(error = %e, "template object not deleted");
        }
    }
}
