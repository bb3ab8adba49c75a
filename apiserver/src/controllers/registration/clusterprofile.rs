//! The ClusterProfile controller (SIG-multicluster's cluster inventory, ocm-wave2.md §4.7), one
//! key per namespace: for each ManagedClusterSetBinding there whose `Bound` is True (its name is
//! its set's), a ClusterProfile `<cluster>` per member cluster of the set, labelled as OCM's
//! (`x-k8s.io/cluster-manager`, the cluster's name and its cluster set), with OCM's spec and a
//! status following the ManagedCluster: its Kubernetes version, its claims as properties, its
//! `ManagedClusterConditionAvailable` as `ControlPlaneHealthy` and `ManagedClusterJoined` as
//! `Joined`, and one access provider naming the hub's cluster proxy and CA. Profiles labelled
//! as OCM's that are no longer wanted are deleted; a terminating namespace is left alone, and a
//! same-named profile of another cluster manager is never touched.
//!
//! The access provider's URL is the advertised URL of the replica whose controllers run (with
//! several replicas, the leader's), so profiles name a hub that serves.
//!
//! Writes happen only when what a profile should say differs from what it says: a cluster wakes
//! the controller only when its labels, version, claims or those two conditions change, so the
//! agent's other status reports and its Lease renewals (another object) write nothing here.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ocm_proto::api::cluster::v1::{CONDITION_AVAILABLE, CONDITION_JOINED};
use ocm_proto::api::cluster::{LABEL_CLUSTER_NAME, LABEL_CLUSTER_SET as OCM_CLUSTER_SET};
use ocm_proto::api::meta::{
    ByteString, CONDITION_TRUE, CONDITION_UNKNOWN, Condition, Time, condition, find_condition,
    set_condition,
};
use ocm_proto::api::multicluster::v1alpha1::{
    AccessProvider, ClusterProfileStatus, ClusterVersion, KubeconfigCluster, Property,
};
use ocm_proto::api::multicluster::{
    self as mc, CONDITION_CONTROL_PLANE_HEALTHY, LABEL_CLUSTER_MANAGER, OCM_CLUSTER_MANAGER,
};
use ocm_proto::selector::LabelSelector as Selector;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::Ctx;
use super::clusterset::set_selector;
use crate::controllers::runtime::{Action, Runtime, Watch};
use crate::machinery::error::ApiError;
use crate::machinery::object;
use crate::machinery::scheme::ResourceType;
use crate::store::cache::CachedObject;
use crate::store::registry::Patch;

/// The reason of a profile condition whose ManagedCluster condition is absent (or carries a
/// reason the ClusterProfile schema refuses).
const REASON_NOT_REPORTED: &str = "NotReported";
/// The longest property name and value the ClusterProfile schema admits.
const MAX_PROPERTY_NAME: usize = 253;
const MAX_PROPERTY_VALUE: usize = 1024;

/// How profiles reach a cluster through the hub: the hub's advertised URL and its CA (PEM).
#[derive(Debug, Clone)]
pub struct HubAccess {
    /// The hub's advertised URL, as its join command names it to agents.
    pub server: String,
    /// The hub CA certificate, PEM.
    pub ca_pem: String,
}

impl HubAccess {
    /// The access provider of a cluster: its proxy endpoint on the hub, and the hub's CA.
    fn provider(&self, cluster: &str) -> AccessProvider {
        AccessProvider {
            name: OCM_CLUSTER_MANAGER.to_owned(),
            cluster: Some(KubeconfigCluster {
                server: format!(
                    "{}{}",
                    self.server.trim_end_matches('/'),
                    ocm_proto::tunnel::proxy_path(cluster)
                ),
                certificate_authority_data: Some(ByteString(self.ca_pem.as_bytes().to_vec())),
                ..KubeconfigCluster::default()
            }),
        }
    }
}

/// The clusters a namespace's bound sets select, by name: every cluster some selector
/// matches (a cluster in two sets is one profile).
fn wanted_clusters<'a>(
    selectors: &[Selector],
    clusters: &'a [Arc<CachedObject>],
) -> BTreeMap<&'a str, &'a CachedObject> {
    clusters
        .iter()
        .filter(|c| selectors.iter().any(|sel| sel.matches(|k| c.label(k))))
        .map(|c| (c.namespace_name().1, &**c))
        .collect()
}

/// The labels a cluster's profile carries: every key OCM sets, `None` where the label must be
/// absent (the cluster has no cluster-set label).
fn profile_labels(cluster: &str, cluster_labels: &Value) -> BTreeMap<&'static str, Option<String>> {
    let set = cluster_labels.get(OCM_CLUSTER_SET).and_then(Value::as_str).map(str::to_owned);
    BTreeMap::from([
        (LABEL_CLUSTER_MANAGER, Some(OCM_CLUSTER_MANAGER.to_owned())),
        (LABEL_CLUSTER_NAME, Some(cluster.to_owned())),
        (mc::LABEL_CLUSTER_SET, set),
    ])
}

/// A profile's spec: OCM as its manager, the cluster's name to show.
fn profile_spec(cluster: &str) -> Value {
    json!({"displayName": cluster, "clusterManager": {"name": OCM_CLUSTER_MANAGER}})
}

/// A reason the ClusterProfile schema admits (`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`).
fn valid_reason(reason: &str) -> bool {
    let first = reason.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
    let rest = reason.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ',' | ':'));
    let last = reason.chars().last().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    first && rest && last && reason.len() <= 1024
}

/// The profile condition `type_` mirroring the cluster's condition `source`: its status,
/// reason and message, or Unknown while the cluster reports none.
fn mirrored(type_: &str, source: &str, conditions: &[Condition], cluster: &str) -> Condition {
    match find_condition(conditions, source) {
        Some(c) => {
            let reason =
                if valid_reason(&c.reason) { c.reason.as_str() } else { REASON_NOT_REPORTED };
            condition(type_, &c.status, reason, c.message.clone())
        }
        None => condition(
            type_,
            CONDITION_UNKNOWN,
            REASON_NOT_REPORTED,
            format!("ManagedCluster {cluster} reports no {source} condition"),
        ),
    }
}

/// What the profile reads of a ManagedCluster's status.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClusterStatus {
    #[serde(default)]
    version: Option<ClusterVersion>,
    #[serde(default)]
    cluster_claims: Option<Vec<Claim>>,
    #[serde(default)]
    conditions: Option<Vec<Condition>>,
}

#[derive(Debug, Default, Deserialize)]
struct Claim {
    #[serde(default)]
    name: String,
    #[serde(default)]
    value: String,
}

/// The status a cluster's profile should have, from the cluster's status and the profile's
/// current one (its conditions keep their transition times; other managers' conditions and
/// access providers stay). `None` when the current status already says it.
fn desired_status(
    cluster: &str,
    cluster_status: &Value,
    current: &Value,
    hub: &HubAccess,
    now: Time,
) -> Option<Value> {
    let source = ClusterStatus::deserialize(cluster_status).unwrap_or_default();
    let before = ClusterProfileStatus::deserialize(current).unwrap_or_default();
    let mut status = before.clone();
    status.version = source
        .version
        .and_then(|v| v.kubernetes)
        .filter(|k| !k.is_empty())
        .map(|k| ClusterVersion { kubernetes: Some(k) });
    // Every claim is a property, once per name; the schema bounds names and values.
    let mut seen = BTreeSet::new();
    status.properties = source
        .cluster_claims
        .unwrap_or_default()
        .into_iter()
        .filter(|c| (1..=MAX_PROPERTY_NAME).contains(&c.name.len()))
        .filter(|c| (1..=MAX_PROPERTY_VALUE).contains(&c.value.len()))
        .filter(|c| seen.insert(c.name.clone()))
        .map(|c| Property { name: c.name, value: c.value, last_observed_time: None })
        .collect();
    let conditions = source.conditions.unwrap_or_default();
    let healthy =
        mirrored(CONDITION_CONTROL_PLANE_HEALTHY, CONDITION_AVAILABLE, &conditions, cluster);
    let joined = mirrored(mc::CONDITION_JOINED, CONDITION_JOINED, &conditions, cluster);
    set_condition(&mut status.conditions, healthy, now.clone());
    set_condition(&mut status.conditions, joined, now);
    let ours = hub.provider(cluster);
    match status.access_providers.iter_mut().find(|p| p.name == ours.name) {
        Some(p) => *p = ours,
        None => status.access_providers.push(ours),
    }
    if status == before && ClusterProfileStatus::deserialize(current).is_ok() {
        return None;
    }
    serde_json::to_value(&status).ok()
}

/// The merge patch bringing a profile's labels and spec to what they should be, if they
/// differ.
fn main_patch(cluster: &str, cluster_labels: &Value, profile: &Value) -> Option<Value> {
    let have = profile.pointer("/metadata/labels");
    let mut labels = Map::new();
    for (k, want) in profile_labels(cluster, cluster_labels) {
        let current = have.and_then(|l| l.get(k)).and_then(Value::as_str);
        if current != want.as_deref() {
            labels.insert(k.to_owned(), want.map_or(Value::Null, Value::String));
        }
    }
    let spec = profile_spec(cluster);
    let mut patch = Map::new();
    if !labels.is_empty() {
        patch.insert("metadata".into(), json!({"labels": labels}));
    }
    if profile.get("spec") != Some(&spec) {
        patch.insert("spec".into(), spec);
    }
    (!patch.is_empty()).then_some(Value::Object(patch))
}

/// Whether a profile is OCM's (the cluster-manager label), so the controller may change or
/// delete it.
fn is_ours(profile: &CachedObject) -> bool {
    profile.label(LABEL_CLUSTER_MANAGER) == Some(OCM_CLUSTER_MANAGER)
}

/// What of a ManagedCluster its profiles follow (beyond its labels): the version, the claims
/// and the two mirrored conditions without their times.
fn followed(cluster: &CachedObject) -> Value {
    let v = cluster.value();
    let condition = |t: &str| {
        let c = v
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|l| l.iter().find(|c| c.get("type").and_then(Value::as_str) == Some(t)));
        c.map(|c| json!([c.get("status"), c.get("reason"), c.get("message")]))
    };
    json!([
        v.pointer("/status/version/kubernetes"),
        v.pointer("/status/clusterClaims"),
        condition(CONDITION_AVAILABLE),
        condition(CONDITION_JOINED),
    ])
}

struct Profiles {
    ctx: Arc<Ctx>,
    profiles: Arc<ResourceType>,
    hub: HubAccess,
}

impl Profiles {
    async fn run(&self, ns: String) -> Result<Action, ApiError> {
        let ctx = &self.ctx;
        let k = &ctx.kinds;
        let Some(namespace) = ctx.registry.cached(&k.namespaces, "", &ns) else {
            return Ok(Action::Done);
        };
        if namespace.deleting {
            return Ok(Action::Done);
        }
        let mut selectors = Vec::new();
        for binding in ctx.registry.cached_list(&k.bindings, &ns) {
            let value = binding.value();
            let conditions: Vec<Condition> = value
                .pointer("/status/conditions")
                .and_then(|c| Vec::<Condition>::deserialize(c).ok())
                .unwrap_or_default();
            if find_condition(&conditions, "Bound").is_none_or(|c| c.status != CONDITION_TRUE) {
                continue;
            }
            let set_name = binding.namespace_name().1;
            let Some(set) = ctx.registry.cached(&k.sets, "", set_name) else { continue };
            let set =
                ocm_proto::api::cluster::v1beta2::ManagedClusterSet::deserialize(&*set.value())
                    .map_err(|e| {
                        ApiError::internal(format!("stored ManagedClusterSet {set_name}: {e}"))
                    })?;
            let selector = set.spec.as_ref().and_then(|s| s.cluster_selector.as_ref());
            if let Ok(sel) = set_selector(set_name, selector) {
                selectors.push(sel);
            }
        }
        let clusters = ctx.registry.cached_list(&k.clusters, "");
        let wanted = wanted_clusters(&selectors, &clusters);
        let existing = ctx.registry.cached_list(&self.profiles, &ns);
        let by_name: BTreeMap<&str, &Arc<CachedObject>> =
            existing.iter().map(|p| (p.namespace_name().1, p)).collect();
        for (name, cluster) in &wanted {
            match by_name.get(name) {
                Some(profile) if is_ours(profile) => self.keep(&ns, name, cluster, profile).await?,
                Some(_) => {
                    tracing::debug!(namespace = %ns, profile = %name, "a ClusterProfile of another cluster manager has the cluster's name; left alone");
                }
                None => self.create(&ns, name, cluster).await?,
            }
        }
        for profile in existing.iter().filter(|p| is_ours(p) && !p.deleting) {
            let name = profile.namespace_name().1;
            if !wanted.contains_key(name) {
                ctx.remove(&self.profiles, &ns, name).await?;
            }
        }
        Ok(Action::Done)
    }

    fn now() -> Time {
        Time(crate::machinery::clock::timestamp())
    }

    async fn create(&self, ns: &str, name: &str, cluster: &CachedObject) -> Result<(), ApiError> {
        let rt = &self.profiles;
        let value = cluster.value();
        let labels: Map<String, Value> = profile_labels(name, &value["metadata"]["labels"])
            .into_iter()
            .filter_map(|(k, v)| Some((k.to_owned(), Value::String(v?))))
            .collect();
        let obj = json!({
            "apiVersion": rt.storage_api_version(), "kind": rt.kind,
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": profile_spec(name),
        });
        let written = self.ctx.registry.create(rt, ns, obj, &Ctx::opts()).await?;
        let mut profile = written.object;
        let status = desired_status(name, &value["status"], &Value::Null, &self.hub, Self::now());
        if let Some(status) = status {
            profile["status"] = status;
            let sub = rt.subresource("status");
            self.ctx.registry.update(rt, ns, name, profile, sub, &Ctx::opts()).await?;
        }
        Ok(())
    }

    async fn keep(
        &self,
        ns: &str,
        name: &str,
        cluster: &CachedObject,
        profile: &CachedObject,
    ) -> Result<(), ApiError> {
        let rt = &self.profiles;
        let value = cluster.value();
        let current = profile.value();
        let mut written = None;
        if let Some(mut patch) = main_patch(name, &value["metadata"]["labels"], &current) {
            patch["metadata"]["resourceVersion"] =
                json!(object::meta_str(&current, "resourceVersion"));
            let opts = Ctx::opts();
            written = Some(
                self.ctx
                    .registry
                    .patch(rt, ns, name, &Patch::Merge(patch), None, &opts)
                    .await?
                    .object,
            );
        }
        let now = Self::now();
        let Some(status) =
            desired_status(name, &value["status"], &current["status"], &self.hub, now)
        else {
            return Ok(());
        };
        let mut profile = written.unwrap_or_else(|| (*current).clone());
        profile["status"] = status;
        let sub = rt.subresource("status");
        self.ctx.registry.update(rt, ns, name, profile, sub, &Ctx::opts()).await?;
        Ok(())
    }
}

/// Starts the controller; `hub` is where profiles say clusters are reached.
pub(super) fn start(ctx: &Arc<Ctx>, runtime: &Runtime, hub: HubAccess) {
    let Some(profiles) =
        ctx.registry.scheme.lookup(mc::GROUP, "v1alpha1", "clusterprofiles").cloned()
    else {
        return;
    };
    let k = &ctx.kinds;
    // Every namespace holding a binding: a cluster's change may concern any of them.
    let bound_namespaces = {
        let ctx = Arc::clone(ctx);
        move |_: &CachedObject| -> Vec<String> {
            let mut out: Vec<String> = ctx
                .registry
                .cached_list(&ctx.kinds.bindings, "")
                .iter()
                .map(|b| b.namespace_name().0.to_owned())
                .collect();
            out.sort_unstable();
            out.dedup();
            out
        }
    };
    let namespaces_binding_set = {
        let ctx = Arc::clone(ctx);
        move |set: &CachedObject| -> Vec<String> {
            let name = set.namespace_name().1;
            ctx.registry
                .cached_list(&ctx.kinds.bindings, "")
                .iter()
                .map(|b| b.namespace_name())
                .filter(|(_, b)| *b == name)
                .map(|(ns, _)| ns.to_owned())
                .collect()
        }
    };
    let in_namespace = |o: &CachedObject| vec![o.namespace_name().0.to_owned()];
    let watches = vec![
        super::by_name(&k.namespaces).on_changes(|a, b| a.deleting != b.deleting),
        Watch::new(&k.bindings, in_namespace),
        Watch::new(&k.sets, namespaces_binding_set)
            .on_changes(|a, b| a.value().get("spec") != b.value().get("spec")),
        Watch::new(&k.clusters, bound_namespaces)
            .on_changes(|a, b| !a.same_labels(b) || followed(a) != followed(b)),
        // A profile deleted or changed by someone else is put back; the controller's own
        // creations and status writes wake nothing.
        Watch::new(&profiles, in_namespace)
            .not_on_creation()
            .on_changes(|a, b| !a.same_labels(b) || a.value().get("spec") != b.value().get("spec")),
    ];
    let controller = Arc::new(Profiles { ctx: Arc::clone(ctx), profiles, hub });
    runtime.run("clusterprofile", watches, 1, move |key| {
        let controller = Arc::clone(&controller);
        async move { controller.run(key).await }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use ocm_proto::api::meta::CONDITION_FALSE;

    fn hub() -> HubAccess {
        HubAccess { server: "https://hub.example:6443".into(), ca_pem: "PEM".into() }
    }

    fn at(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).expect("in range"))
    }

    fn cluster(name: &str, labels: Value) -> Arc<CachedObject> {
        let obj = json!({"apiVersion": "cluster.open-cluster-management.io/v1",
            "kind": "ManagedCluster", "metadata": {"name": name, "labels": labels}});
        let key = format!("/registry/cluster.open-cluster-management.io/managedclusters/{name}");
        Arc::new(CachedObject::new(key, obj, 1))
    }

    #[test]
    fn the_wanted_clusters_are_every_bound_sets_members_once() {
        let clusters = vec![
            cluster("a", json!({OCM_CLUSTER_SET: "dev"})),
            cluster("b", json!({OCM_CLUSTER_SET: "prod", "env": "prod"})),
            cluster("c", json!({OCM_CLUSTER_SET: "prod"})),
        ];
        let dev = set_selector("dev", None).unwrap();
        let prod = set_selector("prod", None).unwrap();
        let env: ocm_proto::api::cluster::v1beta2::ManagedClusterSelector =
            serde_json::from_value(json!({"selectorType": "LabelSelector",
                "labelSelector": {"matchLabels": {"env": "prod"}}}))
            .unwrap();
        let env = set_selector("envprod", Some(&env)).unwrap();
        let names = |sels: &[Selector]| -> Vec<String> {
            wanted_clusters(sels, &clusters).keys().map(|k| (*k).to_owned()).collect()
        };
        assert_eq!(names(&[]), Vec::<String>::new());
        assert_eq!(names(std::slice::from_ref(&dev)), ["a"]);
        assert_eq!(names(&[prod.clone(), env]), ["b", "c"]);
        assert_eq!(names(&[dev, prod]), ["a", "b", "c"]);
    }

    #[test]
    fn labels_and_spec_are_ocms_and_only_differences_are_patched() {
        let labels = json!({OCM_CLUSTER_SET: "prod", "other": "x"});
        let want = profile_labels("c1", &labels);
        assert_eq!(want[LABEL_CLUSTER_MANAGER].as_deref(), Some("open-cluster-management"));
        assert_eq!(want[LABEL_CLUSTER_NAME].as_deref(), Some("c1"));
        assert_eq!(want[mc::LABEL_CLUSTER_SET].as_deref(), Some("prod"));
        let profile = json!({"metadata": {"labels": {
                LABEL_CLUSTER_MANAGER: "open-cluster-management", LABEL_CLUSTER_NAME: "c1",
                mc::LABEL_CLUSTER_SET: "prod", "user": "kept"}},
            "spec": {"displayName": "c1", "clusterManager": {"name": "open-cluster-management"}}});
        assert_eq!(main_patch("c1", &labels, &profile), None);
        // The cluster left every set: the label goes; a changed display name comes back.
        let mut changed = profile.clone();
        changed["spec"]["displayName"] = json!("mine");
        let patch = main_patch("c1", &json!({}), &changed).unwrap();
        assert_eq!(patch["metadata"]["labels"], json!({mc::LABEL_CLUSTER_SET: null}));
        assert_eq!(patch["spec"], profile_spec("c1"));
    }

    #[test]
    fn the_status_follows_the_cluster_and_keeps_what_is_not_ours() {
        let cluster_status = json!({
            "version": {"kubernetes": "v1.31.2"},
            "clusterClaims": [{"name": "id.k8s.io", "value": "u1"}, {"name": "id.k8s.io", "value": "u2"},
                {"name": "empty", "value": ""}, {"name": "region", "value": "eu"}],
            "conditions": [{"type": "ManagedClusterConditionAvailable", "status": "True",
                "reason": "ManagedClusterAvailable", "message": "up",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        });
        let status = desired_status("c1", &cluster_status, &Value::Null, &hub(), at(10)).unwrap();
        assert_eq!(status["version"], json!({"kubernetes": "v1.31.2"}));
        assert_eq!(
            status["properties"],
            json!([{"name": "id.k8s.io", "value": "u1"}, {"name": "region", "value": "eu"}])
        );
        let conditions = &status["conditions"];
        assert_eq!(conditions[0]["type"], "ControlPlaneHealthy");
        assert_eq!(
            (&conditions[0]["status"], &conditions[0]["reason"], &conditions[0]["message"]),
            (&json!("True"), &json!("ManagedClusterAvailable"), &json!("up"))
        );
        assert_eq!(
            (&conditions[1]["type"], &conditions[1]["status"], &conditions[1]["reason"]),
            (&json!("Joined"), &json!(CONDITION_UNKNOWN), &json!(REASON_NOT_REPORTED))
        );
        assert_eq!(
            status["accessProviders"],
            json!([{"name": "open-cluster-management", "cluster": {
                "server": "https://hub.example:6443/apis/cluster.open-cluster-management.io/v1/managedclusters/c1/proxy",
                "certificate-authority-data": "UEVN"}}])
        );
        // Nothing changed: nothing to write, whatever the time.
        assert_eq!(desired_status("c1", &cluster_status, &status, &hub(), at(20)), None);
        // Another manager's provider and condition stay; the version goes with the cluster's.
        let mut theirs = status.clone();
        theirs["accessProviders"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "other", "cluster": {"server": "https://x"}}));
        theirs["conditions"].as_array_mut().unwrap().push(json!({"type": "Other",
            "status": "True", "reason": "R", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}));
        let mut down = cluster_status.clone();
        down["conditions"][0]["status"] = json!(CONDITION_FALSE);
        down["conditions"][0]["reason"] = json!("");
        down.as_object_mut().unwrap().remove("version");
        let next = desired_status("c1", &down, &theirs, &hub(), at(30)).unwrap();
        assert!(next.get("version").is_none(), "{next}");
        assert_eq!(next["accessProviders"].as_array().unwrap().len(), 2);
        assert_eq!(next["conditions"].as_array().unwrap().len(), 3);
        assert_eq!(next["conditions"][0]["status"], CONDITION_FALSE);
        assert_eq!(next["conditions"][0]["reason"], REASON_NOT_REPORTED);
        assert_eq!(next["conditions"][0]["lastTransitionTime"], "1970-01-01T00:00:30Z");
        assert_eq!(
            next["conditions"][1]["lastTransitionTime"],
            status["conditions"][1]["lastTransitionTime"]
        );
    }

    #[test]
    fn reasons_the_schema_refuses_are_replaced() {
        assert!(valid_reason("ManagedClusterAvailable"));
        assert!(valid_reason("A_b:c,D1"));
        for bad in ["", "1abc", "has space", "ends,", "dash-ed"] {
            assert!(!valid_reason(bad), "{bad}");
        }
    }

    #[test]
    fn only_followed_changes_of_a_cluster_concern_profiles() {
        let with = |status: Value| {
            let obj = json!({"metadata": {"name": "c1"}, "status": status});
            CachedObject::new(
                "/registry/cluster.open-cluster-management.io/managedclusters/c1".into(),
                obj,
                1,
            )
        };
        let base = json!({"version": {"kubernetes": "v1"}, "allocatable": {"cpu": "1"},
            "conditions": [{"type": CONDITION_AVAILABLE, "status": "True", "reason": "R",
                "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
        let mut resources = base.clone();
        resources["allocatable"]["cpu"] = json!("2");
        assert_eq!(followed(&with(base.clone())), followed(&with(resources)));
        let mut retimed = base.clone();
        retimed["conditions"][0]["lastTransitionTime"] = json!("2026-02-01T00:00:00Z");
        assert_eq!(followed(&with(base.clone())), followed(&with(retimed)));
        let mut claims = base.clone();
        claims["clusterClaims"] = json!([{"name": "a", "value": "b"}]);
        assert_ne!(followed(&with(base.clone())), followed(&with(claims)));
        let mut down = base.clone();
        down["conditions"][0]["status"] = json!("Unknown");
        assert_ne!(followed(&with(base)), followed(&with(down)));
    }
}
