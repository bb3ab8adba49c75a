//! The agent of a template add-on on one cluster (ocm-wave2.md §2.1–§2.3, OCM's template
//! add-on manager): for a ManagedClusterAddOn whose desired configs name an AddOnTemplate, the
//! template rendered for the cluster into `addon-<name>-deploy-<i>` ManifestWorks owned by the
//! add-on, its registrations and install namespace in the add-on's status, its hub permissions
//! (`permissions.rs`), its pre-delete hooks run before it goes, and the add-on's
//! `ManifestApplied`, `Progressing` and (probed from the works, `health.rs`) `Available`
//! conditions. Nothing is rendered until the configuration controller has given the add-on its
//! desired template (`Configured`).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use ocm_proto::api::addon::v1alpha1::{
    AddOnTemplate, REGISTRATION_TYPE_CUSTOM_SIGNER, REGISTRATION_TYPE_KUBE_CLIENT,
};
use ocm_proto::api::addon::v1beta1::{
    self as beta, ClusterManagementAddOn, CustomSignerConfig, KubeClientConfig, KubeClientSubject,
    ManagedClusterAddOn, RegistrationConfig,
};
use ocm_proto::api::addon::{
    AddOnDeploymentConfigSpec, CONDITION_HOOK_MANIFEST_COMPLETED, CONDITION_MANIFEST_APPLIED,
    CONDITION_PROGRESSING, FINALIZER_ADDON_PRE_DELETE, GROUP as ADDON_GROUP,
    HEALTH_CHECK_MODE_CUSTOMIZED, HealthCheck, LABEL_ADDON_NAME, REASON_ADDON_MANIFEST_APPLIED,
    REASON_COMPLETED, REASON_MANIFEST_WORK_APPLY_FAILED, REASON_PROGRESSING,
};
use ocm_proto::api::meta::{CONDITION_FALSE, CONDITION_TRUE, condition, set_condition};
use serde_json::{Value, json};

use super::config::status_desired;
use super::template::{self, Inputs, Rendered};
use super::{AddonManager, WORKERS};
use crate::controllers::runtime::{Action, Runtime, Watch};
use crate::machinery::clock;
use crate::machinery::error::ApiError;
use crate::machinery::object;
use crate::store::cache::CachedObject;
use crate::store::registry::{DeleteOptions, Patch};

/// The annotation of a work naming the config spec hashes it was rendered from.
pub(super) const ANNOTATION_CONFIG_SPEC_HASH: &str = "open-cluster-management.io/config-spec-hash";
/// A deploy work's manifests at most (OCM: 80 % of the 500 KiB work limit).
const WORK_BYTES: usize = 400 * 1024;
const TEMPLATES: &str = "addontemplates";
const DEPLOYMENT_CONFIGS: &str = "addondeploymentconfigs";

/// Starts the template add-on controller: one key per ManagedClusterAddOn (`<cluster>/<name>`).
pub(super) fn start(m: &Arc<AddonManager>, runtime: &Runtime) {
    let k = &m.kinds;
    let own = |o: &CachedObject| {
        let (ns, name) = o.namespace_name();
        vec![format!("{ns}/{name}")]
    };
    let of_work = |w: &CachedObject| match w.label(LABEL_ADDON_NAME) {
        Some(addon) => vec![format!("{}/{addon}", w.namespace_name().0)],
        None => Vec::new(),
    };
    let of_cluster = {
        let m = Arc::clone(m);
        move |c: &CachedObject| m.addons_of_cluster(c.namespace_name().1)
    };
    let of_addon = {
        let m = Arc::clone(m);
        move |c: &CachedObject| m.installs_of(c.namespace_name().1)
    };
    let watches = vec![
        Watch::new(&k.mcas, own),
        super::cma_watch(&k.cmas, of_addon),
        Watch::new(&k.works, of_work).not_on_creation(),
        Watch::new(&k.clusters, of_cluster).on_changes(|a, b| {
            super::health::cluster_condition(&a.value())
                != super::health::cluster_condition(&b.value())
        }),
    ];
    let m = Arc::clone(m);
    runtime.run("addon-deploy", watches, WORKERS * 4, move |key| {
        let m = Arc::clone(&m);
        async move { m.deploy_key(&key).await }
    });
}

/// Whether an add-on is a template add-on: a default config of kind AddOnTemplate.
pub(super) fn is_template_addon(cma: &ClusterManagementAddOn) -> bool {
    cma.spec
        .default_configs
        .iter()
        .any(|c| c.group.as_deref() == Some(ADDON_GROUP) && c.resource == TEMPLATES)
}

impl AddonManager {
    /// The ManagedClusterAddOn keys of every add-on on `cluster`.
    fn addons_of_cluster(&self, cluster: &str) -> Vec<String> {
        let mcas = self.registry.cached_list(&self.kinds.mcas, cluster);
        mcas.iter().map(|a| format!("{cluster}/{}", a.namespace_name().1)).collect()
    }

    /// The ManagedClusterAddOn keys of the add-on `name` on every cluster.
    fn installs_of(&self, name: &str) -> Vec<String> {
        let mcas = self.registry.cached_list(&self.kinds.mcas, "");
        mcas.iter()
            .filter(|a| a.namespace_name().1 == name)
            .map(|a| format!("{}/{name}", a.namespace_name().0))
            .collect()
    }

    /// One run of a key `<cluster>/<name>`.
    async fn deploy_key(&self, key: &str) -> Result<Action, ApiError> {
        let (cluster, name) = key.split_once('/').unwrap_or(("", key));
        self.deploy(cluster, name).await
    }

    /// One run of the add-on `name` on `cluster`.
    async fn deploy(&self, cluster: &str, name: &str) -> Result<Action, ApiError> {
        let Some((raw, mut mca)) = self.read_mca(cluster, name) else {
            self.remove_permissions(cluster, name).await?;
            return Ok(Action::Done);
        };
        let Some((cma_raw, cma)) = self.read_cma(name) else { return Ok(Action::Done) };
        if !is_template_addon(&cma) || !super::install::managed(&cma_raw) {
            return Ok(Action::Done);
        }
        let Some(tpl) = self.desired_template(&mca) else { return Ok(Action::Done) };
        let config = self.desired_deployment_config(&mca);
        let annotations = self
            .registry
            .cached(&self.kinds.clusters, "", cluster)
            .and_then(|c| c.value().pointer("/metadata/annotations").cloned());
        let inputs = Inputs {
            addon: name,
            cluster,
            config: config.as_ref(),
            cluster_annotations: annotations.as_ref(),
        };
        let rendered = template::render(&tpl.spec, &inputs);
        let before = mca.status.clone();
        let now = Time(clock::timestamp());
        {
            let status = mca.status.get_or_insert_with(Default::default);
            status.registrations = registrations(&tpl, cluster, name, &status.registrations);
            status.health_check =
                Some(HealthCheck { mode: Some(HEALTH_CHECK_MODE_CUSTOMIZED.to_owned()) });
            if let Ok(r) = &rendered {
                status.namespace = Some(r.install_namespace.clone());
            }
        }
        let registered = self.apply_permissions(&raw, &mut mca, &tpl, now.clone()).await?;
        let applied = match &rendered {
            Err(e) => Err(format!("the template cannot be rendered: {e}")),
            Ok(_) if !registered => Err("waiting for the add-on's registration".to_owned()),
            Ok(r) => self.apply_works(&raw, &mca, r).await,
        };
        let status = mca.status.get_or_insert_with(Default::default);
        let c = match &applied {
            Ok(()) => condition(
                CONDITION_MANIFEST_APPLIED,
                CONDITION_TRUE,
                REASON_ADDON_MANIFEST_APPLIED,
                "no error",
            ),
            Err(e) => condition(
                CONDITION_MANIFEST_APPLIED,
                CONDITION_FALSE,
                REASON_MANIFEST_WORK_APPLY_FAILED,
                e.clone(),
            ),
        };
        set_condition(&mut status.conditions, c, now.clone());
        let works = self.deploy_works(cluster, name);
        let available = super::health::probe(&works, self.cluster_available(cluster).as_ref());
        set_condition(&mut status.conditions, available, now.clone());
        progress(status, &works, now.clone());
        let hooks = rendered.map(|r| r.hooks).unwrap_or_default();
        if let Some(keep) = self.run_hooks(&raw, &mut mca, &hooks, now).await? {
            // The finalizer first; the status follows on the run its write wakes.
            let patch = object::finalizer_patch(&raw, FINALIZER_ADDON_PRE_DELETE, keep);
            let rt = &self.kinds.mcas;
            self.registry
                .patch(rt, cluster, name, &Patch::Merge(patch), None, &Self::opts())
                .await?;
            return Ok(Action::Done);
        }
        if mca.status != before {
            self.store_mca_status(&mca).await?;
        }
        Ok(Action::Done)
    }

    /// The AddOnTemplate the add-on's desired configs name (with a spec hash), if any.
    pub(super) fn desired_template(&self, mca: &ManagedClusterAddOn) -> Option<AddOnTemplate> {
        let desired = status_desired(mca);
        let hash = desired.get(&(ADDON_GROUP.to_owned(), TEMPLATES.to_owned()))?;
        if hash.spec_hash.as_deref().unwrap_or("").is_empty() {
            return None; // OCM: "template desired spec hash is empty"
        }
        let t = self.registry.cached(&self.kinds.templates, "", &hash.name)?;
        serde_json::from_value((*t.value()).clone()).ok()
    }

    /// The AddOnDeploymentConfig the add-on's desired configs name, if any.
    fn desired_deployment_config(
        &self,
        mca: &ManagedClusterAddOn,
    ) -> Option<AddOnDeploymentConfigSpec> {
        let desired = status_desired(mca);
        let c = desired.get(&(ADDON_GROUP.to_owned(), DEPLOYMENT_CONFIGS.to_owned()))?;
        let ns = c.namespace.as_deref().unwrap_or("");
        let obj = self.registry.cached(&self.kinds.configs, ns, &c.name)?.value();
        serde_json::from_value(obj.get("spec").cloned().unwrap_or(json!({}))).ok()
    }

    /// The add-on's works on its cluster (deploy works, not the pre-delete one), by name.
    fn deploy_works(&self, cluster: &str, name: &str) -> Vec<Arc<Value>> {
        let hook = pre_delete_work(name);
        let mut works: Vec<Arc<Value>> = self
            .registry
            .cached_list(&self.kinds.works, cluster)
            .iter()
            .filter(|w| w.label(LABEL_ADDON_NAME) == Some(name) && w.namespace_name().1 != hook)
            .map(|w| w.value())
            .collect();
        works.sort_by(|a, b| object::name(a).cmp(object::name(b)));
        works
    }

    /// Writes the rendered deploy works, and deletes those of an earlier rendering beyond them.
    async fn apply_works(
        &self,
        raw: &Value,
        mca: &ManagedClusterAddOn,
        r: &Rendered,
    ) -> Result<(), String> {
        let (cluster, name) = (object::namespace(raw), object::name(raw));
        let hashes = config_spec_hashes(mca);
        let chunks = pack(&r.manifests);
        let rt = &self.kinds.works;
        for (i, manifests) in chunks.iter().enumerate() {
            let work = deploy_work(raw, &format!("addon-{name}-deploy-{i}"), manifests, &hashes);
            self.registry.ensure(rt, work, &Self::opts()).await.map_err(|e| e.message)?;
        }
        for stale in self.deploy_works(cluster, name).iter().skip(chunks.len()) {
            let n = object::name(stale).to_owned();
            match self.registry.delete(rt, cluster, &n, &DeleteOptions::default()).await {
                Err(e) if e.code != 404 => return Err(e.message),
                _ => {}
            }
        }
        Ok(())
    }

    /// The pre-delete hooks: the finalizer while the add-on lives and has hooks; once it is
    /// deleting, the hook work, and the finalizer's removal when every hook completed.
    /// Returns the finalizer change to make, if any (`Some(true)`: add, `Some(false)`: remove).
    async fn run_hooks(
        &self,
        raw: &Value,
        mca: &mut ManagedClusterAddOn,
        hooks: &[Value],
        now: Time,
    ) -> Result<Option<bool>, ApiError> {
        let has = object::finalizers(raw).contains(&FINALIZER_ADDON_PRE_DELETE);
        if !object::is_deleting(raw) {
            return Ok((!hooks.is_empty() && !has).then_some(true));
        }
        if !has {
            return Ok(None);
        }
        if hooks.is_empty() {
            return Ok(Some(false));
        }
        let (cluster, name) = (object::namespace(raw), object::name(raw));
        let work = hook_work(raw, hooks);
        self.registry.ensure(&self.kinds.works, work, &Self::opts()).await?;
        let stored = self.registry.cached(&self.kinds.works, cluster, &pre_delete_work(name));
        let done = stored.is_some_and(|w| super::health::hooks_completed(&w.value(), hooks));
        let status = mca.status.get_or_insert_with(Default::default);
        let c = if done {
            condition(
                CONDITION_HOOK_MANIFEST_COMPLETED,
                CONDITION_TRUE,
                "HookManifestIsCompleted",
                format!("{name} completed with no errors."),
            )
        } else {
            condition(
                CONDITION_HOOK_MANIFEST_COMPLETED,
                CONDITION_FALSE,
                "HookManifestIsNotCompleted",
                format!("{name} is uninstalling."),
            )
        };
        set_condition(&mut status.conditions, c, now);
        Ok(done.then_some(false))
    }
}

/// The add-on's registrations from its template: a KubeClient with OCM's default subject (the
/// driver the agent reported kept), a CustomSigner with its signer and subject.
fn registrations(
    tpl: &AddOnTemplate,
    cluster: &str,
    addon: &str,
    old: &[RegistrationConfig],
) -> Vec<RegistrationConfig> {
    let (user, groups) = default_subject(cluster, addon);
    tpl.spec
        .registration
        .iter()
        .filter_map(|r| match r.type_.as_str() {
            REGISTRATION_TYPE_KUBE_CLIENT => {
                let driver = old
                    .iter()
                    .find(|o| o.type_ == beta::REGISTRATION_TYPE_KUBE_CLIENT)
                    .and_then(|o| o.kube_client.as_ref())
                    .and_then(|k| k.driver.clone());
                Some(RegistrationConfig {
                    type_: beta::REGISTRATION_TYPE_KUBE_CLIENT.to_owned(),
                    kube_client: Some(KubeClientConfig {
                        subject: Some(KubeClientSubject {
                            user: Some(user.clone()),
                            groups: groups.clone(),
                        }),
                        driver,
                    }),
                    custom_signer: None,
                })
            }
            REGISTRATION_TYPE_CUSTOM_SIGNER => {
                let signer = r.custom_signer.as_ref()?;
                let subject = signer.subject.as_ref().map_or_else(
                    || beta::Subject {
                        user: Some(user.clone()),
                        groups: groups.clone(),
                        organization_units: Vec::new(),
                    },
                    |s| beta::Subject {
                        user: s.user.clone(),
                        groups: s.groups.clone(),
                        organization_units: s.organization_units.clone(),
                    },
                );
                Some(RegistrationConfig {
                    type_: beta::REGISTRATION_TYPE_CUSTOM_SIGNER.to_owned(),
                    kube_client: None,
                    custom_signer: Some(CustomSignerConfig {
                        signer_name: signer.signer_name.clone(),
                        subject: Some(subject),
                    }),
                })
            }
            _ => None,
        })
        .collect()
}

/// OCM's default add-on agent identity on `cluster`: its user and groups.
pub(super) fn default_subject(cluster: &str, addon: &str) -> (String, Vec<String>) {
    let user = format!(
        "system:open-cluster-management:cluster:{cluster}:addon:{addon}:agent:{addon}-agent"
    );
    let groups = vec![
        format!("system:open-cluster-management:cluster:{cluster}:addon:{addon}"),
        format!("system:open-cluster-management:addon:{addon}"),
    ];
    (user, groups)
}

/// The config-spec-hash annotation: `<resource>[.<group>]/<namespace>/<name>` → spec hash.
fn config_spec_hashes(mca: &ManagedClusterAddOn) -> String {
    serde_json::to_string(&spec_hash_map(status_desired(mca))).unwrap_or_default()
}

/// Desired configs as the config-spec-hash annotation keys them.
fn spec_hash_map(desired: super::config::Desired) -> BTreeMap<String, String> {
    desired
        .into_iter()
        .map(|((group, resource), d)| {
            let kind = if group.is_empty() { resource } else { format!("{resource}.{group}") };
            let key = format!("{kind}/{}/{}", d.namespace.unwrap_or_default(), d.name);
            (key, d.spec_hash.unwrap_or_default())
        })
        .collect()
}

/// Manifests packed in order into works of at most [`WORK_BYTES`] (one work at least).
fn pack(manifests: &[Value]) -> Vec<Vec<Value>> {
    let mut chunks: Vec<Vec<Value>> = vec![Vec::new()];
    let mut size = 0;
    for m in manifests {
        let len = object::json_len(m);
        if size + len > WORK_BYTES && chunks.last().is_some_and(|c| !c.is_empty()) {
            chunks.push(Vec::new());
            size = 0;
        }
        size += len;
        if let Some(last) = chunks.last_mut() {
            last.push(m.clone());
        }
    }
    chunks
}

/// A ManifestWork of the add-on `mca` (owned by it) named `name` with `manifests`.
fn addon_work(mca: &Value, name: &str, manifests: &[Value], configs: Vec<Value>) -> Value {
    let addon = object::name(mca);
    json!({
        "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {
            "name": name, "namespace": object::namespace(mca),
            "labels": {LABEL_ADDON_NAME: addon},
            "ownerReferences": [object::controller_ref(mca)],
        },
        "spec": {"workload": {"manifests": manifests}, "manifestConfigs": configs},
    })
}

/// A deploy work: the manifests, a `WellKnownStatus` probe of each Deployment and DaemonSet,
/// the orphaning rules of objects so annotated, and the config hashes it renders.
fn deploy_work(mca: &Value, name: &str, manifests: &[Value], hashes: &str) -> Value {
    let probes: Vec<Value> = manifests
        .iter()
        .filter(|m| matches!(m["kind"].as_str(), Some("Deployment" | "DaemonSet")))
        .map(feedback_rule)
        .collect();
    let mut work = addon_work(mca, name, manifests, probes);
    work["metadata"]["annotations"] = json!({ ANNOTATION_CONFIG_SPEC_HASH: hashes });
    let orphans: Vec<Value> = manifests
        .iter()
        .filter(|m| m["metadata"]["annotations"].get(ocm_proto::api::addon::ANNOTATION_DELETION_ORPHAN).is_some())
        .map(|m| {
            let id = identifier(m);
            json!({"group": id["group"], "resource": id["resource"], "namespace": id["namespace"], "name": id["name"]})
        })
        .collect();
    if !orphans.is_empty() {
        work["spec"]["deleteOption"] = json!({"propagationPolicy": "SelectivelyOrphan",
            "selectivelyOrphans": {"orphaningRules": orphans}});
    }
    work
}

/// The pre-delete work `addon-<name>-pre-delete`: the hooks, each with a feedback rule.
fn hook_work(mca: &Value, hooks: &[Value]) -> Value {
    let rules: Vec<Value> = hooks.iter().map(feedback_rule).collect();
    addon_work(mca, &pre_delete_work(object::name(mca)), hooks, rules)
}

/// The pre-delete work's name.
pub(super) fn pre_delete_work(addon: &str) -> String {
    format!("addon-{addon}-pre-delete")
}

/// A `WellKnownStatus` feedback rule for one object.
fn feedback_rule(m: &Value) -> Value {
    json!({"resourceIdentifier": identifier(m), "feedbackRules": [{"type": "WellKnownStatus"}]})
}

/// A manifest's resource identifier (its resource guessed from its kind, as OCM guesses it).
pub(super) fn identifier(m: &Value) -> Value {
    let api = m["apiVersion"].as_str().unwrap_or("");
    let group = api.rsplit_once('/').map_or("", |(g, _)| g);
    let kind = m["kind"].as_str().unwrap_or("").to_lowercase();
    let resource = if let Some(stem) = kind.strip_suffix('y') {
        format!("{stem}ies")
    } else if kind.ends_with('s') {
        format!("{kind}es")
    } else {
        format!("{kind}s")
    };
    json!({"group": group, "resource": resource,
           "namespace": m["metadata"]["namespace"].as_str().unwrap_or(""),
           "name": m["metadata"]["name"].as_str().unwrap_or("")})
}

/// `Progressing` from the deploy works (OCM's `addonprogressing`): completed, with every
/// desired config copied to `lastAppliedConfig`, once every work renders the desired configs
/// and is applied and available at its generation.
fn progress(status: &mut beta::ManagedClusterAddOnStatus, works: &[Arc<Value>], now: Time) {
    let desired = spec_hash_map(super::config::desired_of(&status.config_references));
    let matches = |w: &Value| {
        let a = w.pointer("/metadata/annotations").and_then(|a| a.get(ANNOTATION_CONFIG_SPEC_HASH));
        let map: BTreeMap<String, String> = a
            .and_then(Value::as_str)
            .and_then(|s| serde_json::from_str(s).ok())
            .unwrap_or_default();
        map == desired
    };
    let c = if works.is_empty() {
        condition(
            CONDITION_PROGRESSING,
            CONDITION_TRUE,
            REASON_PROGRESSING,
            "progressing... no addon works",
        )
    } else if !works.iter().all(|w| matches(w)) {
        condition(
            CONDITION_PROGRESSING,
            CONDITION_TRUE,
            REASON_PROGRESSING,
            "progressing... mca and work configs mismatch",
        )
    } else if !works.iter().all(|w| super::health::work_ready(w)) {
        condition(
            CONDITION_PROGRESSING,
            CONDITION_TRUE,
            REASON_PROGRESSING,
            "progressing... work is not ready",
        )
    } else {
        for r in &mut status.config_references {
            r.last_applied_config = r.desired_config.clone();
        }
        condition(
            CONDITION_PROGRESSING,
            CONDITION_FALSE,
            REASON_COMPLETED,
            "completed with no errors.",
        )
    };
    set_condition(&mut status.conditions, c, now);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_are_guessed_from_kinds() {
        let m = |api: &str, kind: &str| json!({"apiVersion": api, "kind": kind, "metadata": {"name": "n"}});
        assert_eq!(identifier(&m("apps/v1", "Deployment"))["resource"], "deployments");
        assert_eq!(identifier(&m("v1", "Ingress"))["resource"], "ingresses");
        assert_eq!(identifier(&m("v1", "NetworkPolicy"))["resource"], "networkpolicies");
        assert_eq!(identifier(&m("v1", "ConfigMap"))["group"], "");
    }

    #[test]
    fn manifests_pack_into_works_under_the_limit() {
        let big = json!({"data": "x".repeat(300 * 1024)});
        assert_eq!(pack(&[]).len(), 1, "an empty rendering is one empty work");
        assert_eq!(
            pack(&[big.clone(), big.clone(), json!({})]).iter().map(Vec::len).collect::<Vec<_>>(),
            [1, 2]
        );
    }

    #[test]
    fn the_default_subject_names_cluster_and_addon() {
        let (user, groups) = default_subject("c1", "hello");
        assert_eq!(user, "system:open-cluster-management:cluster:c1:addon:hello:agent:hello-agent");
        assert_eq!(groups[1], "system:open-cluster-management:addon:hello");
    }
}
