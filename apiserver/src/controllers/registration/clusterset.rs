//! The cluster-set controllers (ocm.md §2.2, §2.3, §6): the `default` (ExclusiveClusterSetLabel)
//! and `global` (LabelSelector `{}`) sets kept in place (every 10 s, unless annotated
//! `cluster.open-cluster-management.io/autoupdate: "false"`), each set's `ClusterSetEmpty`
//! condition from its members, and each ManagedClusterSetBinding's `Bound` condition.

use std::sync::Arc;
use std::time::Duration;

use ocm_proto::api::cluster::v1beta2::{ManagedClusterSelector, ManagedClusterSet};
use ocm_proto::api::cluster::{self as api};
use ocm_proto::api::meta::{
    CONDITION_FALSE, CONDITION_TRUE, LabelSelector, condition, set_condition,
};
use ocm_proto::selector::LabelSelector as Selector;
use serde::Deserialize;
use serde_json::{Value, json};

use super::Ctx;
use crate::controllers::runtime::{Action, Runtime, Watch};
use crate::machinery::error::ApiError;
use crate::machinery::object;
use crate::store::cache::CachedObject;

/// How often the built-in sets are checked (OCM's resync).
const BUILT_IN_EVERY: Duration = Duration::from_secs(10);
const EXCLUSIVE: &str = "ExclusiveClusterSetLabel";
const LABEL_SELECTOR: &str = "LabelSelector";

fn built_in_spec(name: &str) -> Option<Value> {
    match name {
        api::CLUSTER_SET_DEFAULT => Some(json!({"clusterSelector": {"selectorType": EXCLUSIVE}})),
        api::CLUSTER_SET_GLOBAL => {
            Some(json!({"clusterSelector": {"selectorType": LABEL_SELECTOR, "labelSelector": {}}}))
        }
        _ => None,
    }
}

/// Which clusters a set selects: a predicate over a cluster's labels, or why it cannot say.
pub fn set_selector(
    set_name: &str,
    selector: Option<&ManagedClusterSelector>,
) -> Result<Selector, String> {
    let kind = selector.map(|s| s.selector_type.as_str()).filter(|t| !t.is_empty());
    match kind.unwrap_or(EXCLUSIVE) {
        EXCLUSIVE => Selector::parse(&format!("{}={set_name}", api::LABEL_CLUSTER_SET))
            .map_err(|e| e.to_string()),
        LABEL_SELECTOR => {
            let empty = LabelSelector::default();
            let sel = selector.and_then(|s| s.label_selector.as_ref()).unwrap_or(&empty);
            Selector::from_api(sel).map_err(|e| e.to_string())
        }
        other => Err(format!("selector type {other:?} is not supported")),
    }
}

struct Sets {
    ctx: Arc<Ctx>,
}

impl Sets {
    async fn run(&self, name: String) -> Result<Action, ApiError> {
        let ctx = &self.ctx;
        let rt = &ctx.kinds.sets;
        let built_in = built_in_spec(&name);
        let requeue =
            if built_in.is_some() { Action::RequeueAfter(BUILT_IN_EVERY) } else { Action::Done };
        let Some(cached) = ctx.registry.cached(rt, "", &name) else {
            if let Some(spec) = built_in {
                let obj = json!({
                    "apiVersion": rt.storage_api_version(), "kind": rt.kind,
                    "metadata": {"name": name}, "spec": spec,
                });
                ctx.registry.create_if_absent(rt, obj, &Ctx::opts()).await?;
            }
            return Ok(requeue);
        };
        let value = cached.value();
        let raw = &*value;
        if object::is_deleting(raw) {
            return Ok(requeue);
        }
        if let Some(spec) = built_in {
            let auto = raw
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(api::ANNOTATION_CLUSTER_SET_AUTO_UPDATE))
                .and_then(Value::as_str)
                != Some("false");
            if auto && raw.pointer("/spec/clusterSelector") != spec.get("clusterSelector") {
                // One merge patch: the type, and the selector cleared of any stale field (a
                // selector changed in two steps would briefly select the wrong clusters).
                let mut selector = spec["clusterSelector"].clone();
                selector["labelSelector"] = if selector.get("labelSelector").is_some() {
                    json!({"matchLabels": null, "matchExpressions": null})
                } else {
                    Value::Null
                };
                let body = json!({
                    "metadata": {"resourceVersion": object::meta_str(raw, "resourceVersion")},
                    "spec": {"clusterSelector": selector},
                });
                ctx.patch(rt, "", &name, body, None).await?;
                return Ok(Action::Done); // the write queues the set again
            }
        }
        let set = ManagedClusterSet::deserialize(raw)
            .map_err(|e| ApiError::internal(format!("stored ManagedClusterSet {name}: {e}")))?;
        let selector = set.spec.as_ref().and_then(|s| s.cluster_selector.as_ref());
        let c = match set_selector(&name, selector) {
            Ok(sel) => {
                let members = ctx
                    .registry
                    .cached_list(&ctx.kinds.clusters, "")
                    .iter()
                    .filter(|c| sel.matches(|k| c.label(k)))
                    .count();
                if members == 0 {
                    condition(
                        "ClusterSetEmpty",
                        CONDITION_TRUE,
                        "NoClusterMatched",
                        "No ManagedCluster selected",
                    )
                } else {
                    condition(
                        "ClusterSetEmpty",
                        CONDITION_FALSE,
                        "ClustersSelected",
                        format!("{members} ManagedClusters selected"),
                    )
                }
            }
            Err(why) => condition("ClusterSetEmpty", CONDITION_TRUE, "InvalidSelector", why),
        };
        let mut conditions = set.status.map(|s| s.conditions).unwrap_or_default();
        let now = ocm_proto::api::meta::Time(crate::machinery::clock::timestamp());
        if set_condition(&mut conditions, c, now) {
            let body = json!({
                "metadata": {"resourceVersion": object::meta_str(raw, "resourceVersion")},
                "status": {"conditions": conditions},
            });
            ctx.patch(rt, "", &name, body, Some("status")).await?;
        }
        Ok(requeue)
    }
}

struct Bindings {
    ctx: Arc<Ctx>,
}

impl Bindings {
    async fn run(&self, key: String) -> Result<Action, ApiError> {
        let ctx = &self.ctx;
        let rt = &ctx.kinds.bindings;
        let Some((ns, name)) = key.split_once('/') else { return Ok(Action::Done) };
        let Some(cached) = ctx.registry.cached(rt, ns, name) else { return Ok(Action::Done) };
        let value = cached.value();
        let raw = &*value;
        let set = raw.pointer("/spec/clusterSet").and_then(Value::as_str).unwrap_or(name);
        let found = ctx.registry.cached(&ctx.kinds.sets, "", set).is_some_and(|s| !s.deleting);
        let c = if found {
            condition("Bound", CONDITION_TRUE, "ClusterSetBound", "")
        } else {
            condition(
                "Bound",
                CONDITION_FALSE,
                "ClusterSetNotFound",
                format!("ManagedClusterSet {set:?} not found"),
            )
        };
        let binding = api::v1beta2::ManagedClusterSetBinding::deserialize(raw)
            .map_err(|e| ApiError::internal(format!("stored binding {key}: {e}")))?;
        let mut conditions = binding.status.map(|s| s.conditions).unwrap_or_default();
        let now = ocm_proto::api::meta::Time(crate::machinery::clock::timestamp());
        if set_condition(&mut conditions, c, now) {
            let body = json!({
                "metadata": {"resourceVersion": object::meta_str(raw, "resourceVersion")},
                "status": {"conditions": conditions},
            });
            ctx.patch(rt, ns, name, body, Some("status")).await?;
        }
        Ok(Action::Done)
    }
}

pub(super) fn start(ctx: &Arc<Ctx>, runtime: &Runtime) {
    let k = &ctx.kinds;
    // A cluster's labels may move it between any sets: every set looks again.
    let sets_of = {
        let ctx = Arc::clone(ctx);
        move |_: &CachedObject| -> Vec<String> {
            let mut names: Vec<String> = ctx
                .registry
                .cached_list(&ctx.kinds.sets, "")
                .iter()
                .map(|s| s.namespace_name().1.to_owned())
                .collect();
            names.extend([api::CLUSTER_SET_DEFAULT.to_owned(), api::CLUSTER_SET_GLOBAL.to_owned()]);
            names
        }
    };
    let watches =
        vec![super::by_name(&k.sets), Watch::new(&k.clusters, sets_of).on_label_changes()];
    let sets = Arc::new(Sets { ctx: Arc::clone(ctx) });
    let queue = runtime.run("managedclusterset", watches, 1, move |key| {
        let sets = Arc::clone(&sets);
        async move { sets.run(key).await }
    });
    queue.add(api::CLUSTER_SET_DEFAULT.to_owned());
    queue.add(api::CLUSTER_SET_GLOBAL.to_owned());

    let bindings_of_set = {
        let ctx = Arc::clone(ctx);
        move |set: &CachedObject| -> Vec<String> {
            let name = set.namespace_name().1;
            ctx.registry
                .cached_list(&ctx.kinds.bindings, "")
                .iter()
                .map(|b| b.namespace_name())
                .filter(|(_, b)| *b == name)
                .map(|(ns, _)| format!("{ns}/{name}"))
                .collect()
        }
    };
    let watches = vec![
        Watch::new(&k.bindings, |o| {
            let (ns, name) = o.namespace_name();
            vec![format!("{ns}/{name}")]
        }),
        Watch::new(&k.sets, bindings_of_set),
    ];
    let bindings = Arc::new(Bindings { ctx: Arc::clone(ctx) });
    runtime.run("managedclustersetbinding", watches, 1, move |key| {
        let bindings = Arc::clone(&bindings);
        async move { bindings.run(key).await }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_of_both_types() {
        fn labels(set: &'static str) -> impl Fn(&str) -> Option<&'static str> {
            move |k| if k == api::LABEL_CLUSTER_SET { Some(set) } else { None }
        }
        let exclusive = set_selector("dev", None).unwrap();
        assert!(exclusive.matches(labels("dev")));
        assert!(!exclusive.matches(labels("prod")));
        let global: ManagedClusterSelector =
            serde_json::from_value(json!({"selectorType": "LabelSelector", "labelSelector": {}}))
                .unwrap();
        assert!(set_selector("global", Some(&global)).unwrap().matches(labels("anything")));
        let bad: ManagedClusterSelector =
            serde_json::from_value(json!({"selectorType": "Nope"})).unwrap();
        assert!(set_selector("x", Some(&bad)).is_err());
    }
}
