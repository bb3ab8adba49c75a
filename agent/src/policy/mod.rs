//! The klusterlet's governance part (OCM's framework and config-policy add-ons in one, which
//! `--disable-policies` switches off): every round it lists its cluster's replicated policies
//! on the hub (REST, in its cluster namespace, where the hub's RBAC lets it read policies and
//! write their status only), evaluates each ConfigurationPolicy template on its own cluster
//! with its own rights (`configpolicy/`), enforcing where the policy says `enforce`, and
//! writes each policy's compliance and history into the replica's status. The hub's list is
//! journaled (`journal.rs`), so evaluation and enforcement go on while the hub is away; a
//! policy the hub takes away has its objects pruned as its `pruneObjectBehavior` says.

mod grpc;
mod journal;
mod local;
mod report;

pub use grpc::GrpcPolicies;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use ocm_proto::api::policy::v1::{ConfigurationPolicy, DetailsPerTemplate, Policy};
use ocm_proto::api::policy::{GROUP, INFORM, KIND_CONFIGURATION_POLICY, is_enforce};
use serde_json::{Value, json};

use crate::cluster::Cluster;
use crate::configpolicy::{self, Evaluation};
use crate::error::AgentError;
use crate::state::DataDir;
use journal::Journal;

/// How often policies are evaluated when their interval is `watch` (`--policy-resync-seconds`).
pub const RESYNC: Duration = Duration::from_secs(10);

/// The suffix of a message whose template is not evaluated again (`never`).
const NEVER_AGAIN: &str = ". This policy will not be evaluated again due to spec.evaluationInterval.compliant being set to \"never\".";

/// Where replicated policies come from and their status goes.
pub enum Hub {
    /// The hub's REST API (`--transport kube`).
    Kube(kube::Client),
    /// The hub's gRPC CloudEvents stream (the default).
    Grpc(Arc<GrpcPolicies>),
}

/// The last evaluation of one template.
struct Last {
    at: Instant,
    generation: i64,
    message: String,
    compliant: bool,
}

/// The policy agent's state across rounds.
pub struct PolicyAgent {
    cluster_name: String,
    cluster: Arc<dyn Cluster>,
    data_dir: DataDir,
    journal: Journal,
    last: BTreeMap<String, Last>,
    details: BTreeMap<String, Vec<DetailsPerTemplate>>,
    written: local::Written,
}

/// The hub's Policy resource.
fn policy_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1", "Policy"), "policies")
}

impl PolicyAgent {
    /// The agent of cluster `cluster_name`, from its journal.
    pub fn new(cluster_name: &str, cluster: Arc<dyn Cluster>, data_dir: DataDir) -> PolicyAgent {
        let journal = Journal::load(&data_dir);
        PolicyAgent {
            cluster_name: cluster_name.to_owned(),
            cluster,
            data_dir,
            journal,
            last: BTreeMap::new(),
            details: BTreeMap::new(),
            written: local::Written::default(),
        }
    }

    /// The journal's policies (what a gRPC stream starts from).
    pub fn journaled(&self) -> &[Value] {
        &self.journal.policies
    }

    /// One round: the hub's policies (listed over REST, as the gRPC stream last said, or the
    /// journal's while the hub is away), each evaluated when due and its status written to
    /// the hub when it changed.
    pub async fn round(&mut self, hub: &Hub) {
        match hub {
            Hub::Kube(client) => match list(&self.api(client)).await {
                Ok(listed) => self.take(listed).await,
                Err(e) => {
                    tracing::debug!(error = %e, "replicated policies not listed; using the journal")
                }
            },
            Hub::Grpc(stream) => self.take(stream.listed()).await,
        }
        let policies = self.journal.policies.clone();
        for raw in &policies {
            let Ok(policy) = serde_json::from_value::<Policy>(raw.clone()) else { continue };
            let status = self.evaluate(&policy).await;
            if raw.get("status") != Some(&status) {
                let name = policy.metadata.name.clone().unwrap_or_default();
                if let Err(e) = self.write_status(hub, raw, &name, status).await {
                    tracing::debug!(policy = %name, error = %e, "policy status not written");
                }
            }
        }
        if let Err(e) = self.journal.save(&self.data_dir).await {
            tracing::warn!(error = %e, "policy journal not written");
        }
    }

    fn api(&self, client: &kube::Client) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), &self.cluster_name, &policy_resource())
    }

    /// Writes a replica's status on the hub.
    async fn write_status(
        &self,
        hub: &Hub,
        raw: &Value,
        name: &str,
        status: Value,
    ) -> Result<(), AgentError> {
        match hub {
            Hub::Kube(client) => {
                let body = Patch::Merge(json!({ "status": status }));
                self.api(client).patch_status(name, &PatchParams::default(), &body).await?;
                Ok(())
            }
            Hub::Grpc(stream) => stream.write_status(raw, &status).await,
        }
    }

    /// Takes the hub's list: policies it no longer lists are pruned, the rest journaled.
    async fn take(&mut self, listed: Vec<Value>) {
        let names = |l: &[Value]| -> Vec<String> {
            l.iter()
                .filter_map(|p| p.pointer("/metadata/name")?.as_str().map(str::to_owned))
                .collect()
        };
        let now = names(&listed);
        let gone: Vec<Value> = self
            .journal
            .policies
            .iter()
            .filter(|p| {
                p.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .is_some_and(|n| !now.iter().any(|m| m == n))
            })
            .cloned()
            .collect();
        for p in gone {
            self.prune(&p).await;
        }
        self.journal.policies = listed;
    }

    /// Removes what a policy the hub took away leaves behind, as each template's
    /// `pruneObjectBehavior` says (`DeleteAll`, `DeleteIfCreated`; `None` keeps it all).
    async fn prune(&mut self, raw: &Value) {
        let replica =
            raw.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_owned();
        let Ok(policy) = serde_json::from_value::<Policy>(raw.clone()) else { return };
        for (name, cfg) in templates(&policy) {
            let key = format!("{replica}/{name}");
            let managed = self.journal.managed.remove(&key).unwrap_or_default();
            let behavior = cfg.spec.prune_object_behavior.as_deref().unwrap_or("None");
            for m in managed {
                if behavior == "DeleteAll" || (behavior == "DeleteIfCreated" && m.created) {
                    if let Err(e) = self.cluster.delete(&m.object).await {
                        tracing::warn!(policy = %replica, error = %e, "pruned object not deleted");
                    }
                }
            }
            self.last.remove(&key);
            let obj = local::object(&cfg, &replica, &self.cluster_name);
            local::remove(self.cluster.as_ref(), &mut self.written, &obj).await;
        }
        self.details.remove(&replica);
    }

    /// The status of one replicated policy after evaluating its due templates.
    async fn evaluate(&mut self, policy: &Policy) -> Value {
        let replica = policy.metadata.name.clone().unwrap_or_default();
        let generation = policy.metadata.generation.unwrap_or(0);
        let previous = self.details.get(&replica).cloned().unwrap_or_else(|| {
            policy.status.as_ref().map(|s| s.details.clone()).unwrap_or_default()
        });
        let mut details = Vec::new();
        for (name, cfg) in templates(policy) {
            let key = format!("{replica}/{name}");
            let message = match self.due(&key, generation, &cfg) {
                Some(message) => message,
                None => {
                    let enforce = is_enforce(&remediation(policy, &cfg));
                    let mut eval =
                        configpolicy::evaluate(self.cluster.as_ref(), &cfg.spec, enforce).await;
                    self.journal.record(&key, eval.managed.clone(), &eval.created);
                    self.journal.mark_created(&key, &mut eval.related);
                    let obj = local::object(&cfg, &replica, &self.cluster_name);
                    let kept = local::keep(
                        self.cluster.as_ref(),
                        &mut self.written,
                        obj,
                        &eval,
                        generation,
                    );
                    if let Err(e) = kept.await {
                        tracing::debug!(template = %key, error = %e, "template object not kept");
                    }
                    let message = message_of(&eval, &cfg);
                    let last = Last {
                        at: Instant::now(),
                        generation,
                        message: message.clone(),
                        compliant: eval.compliant(),
                    };
                    self.last.insert(key, last);
                    message
                }
            };
            let before = previous.iter().find(|d| template_name(d) == Some(name.as_str()));
            let now = crate::clock::timestamp();
            details.push(report::with_message(before, &name, &replica, &message, now));
        }
        let mut status = json!({ "details": details });
        if let Some(c) = report::policy_compliance(&details) {
            status["compliant"] = json!(c);
        }
        self.details.insert(replica, details);
        status
    }

    /// The last message of template `key` while it is not due again (its interval, for the
    /// compliance it had, has not passed at this generation), else `None`: evaluate it.
    fn due(&self, key: &str, generation: i64, cfg: &ConfigurationPolicy) -> Option<String> {
        let last = self.last.get(key).filter(|l| l.generation == generation)?;
        let interval = cfg.spec.evaluation_interval.clone().unwrap_or_default();
        let wanted = if last.compliant { interval.compliant } else { interval.noncompliant };
        match wanted.as_deref().map(str::to_ascii_lowercase).as_deref() {
            None | Some("" | "watch") => None,
            Some("never") => Some(last.message.clone()),
            Some(d) => match ocm_proto::duration::parse_duration(d) {
                Ok(every) if last.at.elapsed() < every => Some(last.message.clone()),
                _ => None,
            },
        }
    }
}

/// The replica's ConfigurationPolicy templates by name (other kinds are other controllers').
fn templates(policy: &Policy) -> Vec<(String, ConfigurationPolicy)> {
    policy
        .spec
        .policy_templates
        .iter()
        .filter_map(|t| {
            let def = &t.object_definition.0;
            let kind = def.get("kind").and_then(Value::as_str);
            let api_version = def.get("apiVersion").and_then(Value::as_str).unwrap_or("");
            if kind != Some(KIND_CONFIGURATION_POLICY) || !api_version.starts_with(GROUP) {
                return None;
            }
            let cfg: ConfigurationPolicy = serde_json::from_value(def.clone()).ok()?;
            Some((cfg.metadata.name.clone().unwrap_or_default(), cfg))
        })
        .collect()
}

/// A template's remediation: `informonly` stays inform; otherwise the policy's, when it says
/// one, overrides the template's (the framework add-on's rule).
fn remediation(policy: &Policy, cfg: &ConfigurationPolicy) -> String {
    let own = cfg.spec.remediation_action.as_str();
    if own.eq_ignore_ascii_case("informonly") {
        return INFORM.to_owned();
    }
    match policy.spec.remediation_action.as_deref() {
        Some(action) if !action.is_empty() => action.to_owned(),
        _ => own.to_owned(),
    }
}

/// The compliance message of an evaluation, with OCM's note when it is not evaluated again.
fn message_of(eval: &Evaluation, cfg: &ConfigurationPolicy) -> String {
    let mut message = eval.message();
    let interval = cfg.spec.evaluation_interval.clone().unwrap_or_default();
    let next = if eval.compliant() { interval.compliant } else { interval.noncompliant };
    if next.is_some_and(|n| n.eq_ignore_ascii_case("never")) && eval.compliant() {
        message.push_str(NEVER_AGAIN);
    }
    message
}

fn template_name(d: &DetailsPerTemplate) -> Option<&str> {
    d.template_meta.as_ref()?.0.get("name")?.as_str()
}

/// The replicated policies of the cluster's namespace on the hub.
async fn list(api: &Api<DynamicObject>) -> Result<Vec<Value>, AgentError> {
    let list = api.list(&ListParams::default()).await?;
    Ok(list.items.into_iter().filter_map(|o| serde_json::to_value(o).ok()).collect())
}
