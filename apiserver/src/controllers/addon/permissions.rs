//! A template add-on's hub permissions (ocm-wave2.md §2.3 `hubPermissions`): for each
//! `KubeClient` registration, a RoleBinding per permission, `CurrentCluster` in the cluster's
//! namespace to the named ClusterRole (owned by the ManagedClusterAddOn, so it goes with it),
//! `SingleNamespace` in the named namespace to the named role (removed when the add-on goes);
//! and the add-on's `RegistrationApplied` condition.
//!
//! Subjects are the cluster's own add-on identity only: the registration's user and those of
//! its groups that name the cluster. OCM's default groups also hold
//! `system:open-cluster-management:addon:<addon>`, which every cluster's agent of the add-on
//! carries; a binding to it would open one cluster's namespace to every other cluster's agent,
//! so it is never bound. `SingleNamespace` bindings are named per cluster
//! (`open-cluster-management:<addon>:<cluster>:<kind>:agent`) for the same reason: one shared
//! binding would be rewritten by each cluster in turn.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use ocm_proto::api::addon::v1alpha1::{
    AddOnTemplate, HUB_PERMISSION_CURRENT_CLUSTER, HUB_PERMISSION_SINGLE_NAMESPACE,
    REGISTRATION_TYPE_KUBE_CLIENT,
};
use ocm_proto::api::addon::v1beta1::{self as beta, ManagedClusterAddOn};
use ocm_proto::api::addon::{
    CONDITION_REGISTRATION_APPLIED, LABEL_ADDON_NAME, REASON_NIL_REGISTRATION,
    REASON_SET_PERMISSION_APPLIED, REASON_SET_PERMISSION_FAILED,
};
use ocm_proto::api::cluster::LABEL_CLUSTER_NAME;
use ocm_proto::api::meta::{CONDITION_FALSE, CONDITION_TRUE, condition, set_condition};
use serde_json::{Value, json};

use super::AddonManager;
use crate::auth::authz::RBAC_GROUP;
use crate::machinery::error::ApiError;
use crate::machinery::object;
use crate::store::registry::DeleteOptions;

/// The label naming the template of a binding (OCM sets it empty).
const LABEL_ADDON_TEMPLATE_NAME: &str = "open-cluster-management.io/addon-template-name";

impl AddonManager {
    /// Keeps the add-on's RoleBindings and sets `RegistrationApplied`; `true` once the add-on's
    /// registration is in place.
    pub(super) async fn apply_permissions(
        &self,
        raw: &Value,
        mca: &mut ManagedClusterAddOn,
        tpl: &AddOnTemplate,
        now: Time,
    ) -> Result<bool, ApiError> {
        let (cluster, name) = (object::namespace(raw), object::name(raw));
        let status = mca.status.get_or_insert_with(Default::default);
        if tpl.spec.registration.is_empty() {
            let c = condition(
                CONDITION_REGISTRATION_APPLIED,
                CONDITION_TRUE,
                REASON_NIL_REGISTRATION,
                "Registration of the addon agent is configured",
            );
            set_condition(&mut status.conditions, c, now);
            return Ok(true);
        }
        let subjects = subjects(&status.registrations, cluster);
        let mut failed = None;
        let bindings: Vec<Value> = tpl
            .spec
            .registration
            .iter()
            .filter(|r| r.type_ == REGISTRATION_TYPE_KUBE_CLIENT)
            .flat_map(|r| r.kube_client.iter().flat_map(|k| k.hub_permissions.iter()))
            .filter_map(|perm| match perm.type_.as_str() {
                HUB_PERMISSION_CURRENT_CLUSTER => perm.current_cluster.as_ref().map(|c| {
                    let role_ref = json!({"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": c.cluster_role_name});
                    let mut b = binding(cluster, name, cluster, &format!("open-cluster-management:{name}:clusterrole:agent"), role_ref, &subjects);
                    b["metadata"]["ownerReferences"] = json!([object::controller_ref(raw)]);
                    b
                }),
                HUB_PERMISSION_SINGLE_NAMESPACE => perm.single_namespace.as_ref().map(|s| {
                    let kind = s.role_ref.kind.to_lowercase();
                    let role_ref = serde_json::to_value(&s.role_ref).unwrap_or_default();
                    binding(&s.namespace, name, cluster, &format!("open-cluster-management:{name}:{cluster}:{kind}:agent"), role_ref, &subjects)
                }),
                _ => None,
            })
            .collect();
        for binding in bindings {
            if let Err(e) =
                self.registry.ensure(&self.kinds.rolebindings, binding, &Self::opts()).await
            {
                failed = Some(e.message);
            }
        }
        let c = match &failed {
            None => condition(
                CONDITION_REGISTRATION_APPLIED,
                CONDITION_TRUE,
                REASON_SET_PERMISSION_APPLIED,
                "Registration of the addon agent is configured",
            ),
            Some(e) => condition(
                CONDITION_REGISTRATION_APPLIED,
                CONDITION_FALSE,
                REASON_SET_PERMISSION_FAILED,
                format!("Failed to set permission for hub agent: {e}"),
            ),
        };
        set_condition(&mut status.conditions, c, now);
        Ok(failed.is_none())
    }

    /// Removes the add-on's bindings on `cluster` outside the cluster's namespace (those inside
    /// go with the add-on by their owner reference).
    pub(super) async fn remove_permissions(
        &self,
        cluster: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        let rt = &self.kinds.rolebindings;
        for b in self.registry.cached_list(rt, "") {
            if b.label(LABEL_ADDON_NAME) != Some(name)
                || b.label(LABEL_CLUSTER_NAME) != Some(cluster)
            {
                continue;
            }
            let (ns, n) = b.namespace_name();
            match self.registry.delete(rt, ns, n, &DeleteOptions::default()).await {
                Err(e) if e.code != 404 => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }
}

/// The subjects of the cluster's add-on identity: the KubeClient registration's user, and its
/// groups that name this cluster.
fn subjects(registrations: &[beta::RegistrationConfig], cluster: &str) -> Vec<Value> {
    let own = format!(":cluster:{cluster}:");
    let subject = registrations
        .iter()
        .filter(|r| r.type_ == beta::REGISTRATION_TYPE_KUBE_CLIENT)
        .find_map(|r| r.kube_client.as_ref()?.subject.clone());
    let Some(subject) = subject else { return Vec::new() };
    let user =
        subject.user.iter().map(|u| json!({"kind": "User", "apiGroup": RBAC_GROUP, "name": u}));
    let groups = subject
        .groups
        .iter()
        .filter(|g| g.contains(&own))
        .map(|g| json!({"kind": "Group", "apiGroup": RBAC_GROUP, "name": g}));
    user.chain(groups).collect()
}

fn binding(
    ns: &str,
    addon: &str,
    cluster: &str,
    name: &str,
    role_ref: Value,
    subjects: &[Value],
) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": ns, "labels": {
            LABEL_ADDON_NAME: addon, LABEL_CLUSTER_NAME: cluster, LABEL_ADDON_TEMPLATE_NAME: "",
        }},
        "roleRef": role_ref,
        "subjects": subjects,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_clusters_own_identity_is_bound() {
        let (user, groups) = super::super::deploy::default_subject("c1", "hello");
        let regs = vec![beta::RegistrationConfig {
            type_: beta::REGISTRATION_TYPE_KUBE_CLIENT.to_owned(),
            kube_client: Some(beta::KubeClientConfig {
                subject: Some(beta::KubeClientSubject { user: Some(user.clone()), groups }),
                driver: None,
            }),
            custom_signer: None,
        }];
        let s = subjects(&regs, "c1");
        let got: Vec<&str> = s.iter().filter_map(|v| v["name"].as_str()).collect();
        assert_eq!(got, [user.as_str(), "system:open-cluster-management:cluster:c1:addon:hello"]);
        assert_eq!(
            subjects(&regs, "c").iter().filter(|v| v["kind"] == "Group").count(),
            0,
            "no prefix match"
        );
    }
}
