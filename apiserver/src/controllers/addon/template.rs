//! An AddOnTemplate rendered for one cluster (ocm-wave2.md §2.3), as OCM's template add-on
//! manager renders it: every manifest's JSON text run through fasttemplate (`{{KEY}}`, exact
//! keys, unknown tags rendered empty, values inserted unescaped), then the decorators on every
//! Deployment and DaemonSet (the variables as env vars, the hub-kubeconfig and custom-signer
//! volumes, the AddOnDeploymentConfig's node placement, image mirrors, proxy and resources) and
//! the install-namespace override. Pure: the caller looks up the template, the config and the
//! cluster.

use std::collections::BTreeMap;

use ocm_proto::api::addon::v1alpha1::{
    AddOnTemplateSpec, REGISTRATION_TYPE_CUSTOM_SIGNER, REGISTRATION_TYPE_KUBE_CLIENT,
};
use ocm_proto::api::addon::{
    ANNOTATION_ADDON_PRE_DELETE, AddOnDeploymentConfigSpec, DEFAULT_INSTALL_NAMESPACE,
};
use serde_json::{Value, json};

/// Where the hub kubeconfig Secret is mounted in the add-on's pods.
pub(super) const HUB_KUBECONFIG_DIR: &str = "/managed/hub-kubeconfig";
/// The cluster annotation naming image mirrors (lower priority than the config's).
const ANNOTATION_IMAGE_REGISTRIES: &str = "open-cluster-management.io/image-registries";

/// One cluster's rendering of a template.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Rendered {
    /// The manifests of the deploy works.
    pub manifests: Vec<Value>,
    /// The pre-delete hooks (Jobs and Pods so annotated), for the pre-delete work.
    pub hooks: Vec<Value>,
    /// The namespace the agent runs in.
    pub install_namespace: String,
}

/// What a rendering is for: the cluster and what the add-on's configs say.
pub(super) struct Inputs<'a> {
    pub addon: &'a str,
    pub cluster: &'a str,
    /// The AddOnDeploymentConfig the add-on's config references resolve to, if any.
    pub config: Option<&'a AddOnDeploymentConfigSpec>,
    /// The ManagedCluster's annotations (image registries).
    pub cluster_annotations: Option<&'a Value>,
}

/// fasttemplate with `{{` `}}`: each tag replaced by its exact key's value, or by nothing.
pub(super) fn fasttemplate(text: &str, values: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            // An unclosed tag: fasttemplate keeps the text as it is.
            out.push_str(&rest[start..]);
            return out;
        };
        if let Some(v) = values.get(&after[..end]) {
            out.push_str(v);
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

/// Renders `template` for `inputs` (an error names the manifest that is not JSON once
/// rendered).
pub(super) fn render(
    template: &AddOnTemplateSpec,
    inputs: &Inputs<'_>,
) -> Result<Rendered, String> {
    let override_ns =
        inputs.config.and_then(|c| c.agent_install_namespace.clone()).filter(|ns| !ns.is_empty());
    let builtin = builtin_values(template, inputs, override_ns.as_deref());
    let mut values: BTreeMap<String, String> = inputs
        .config
        .map(|c| {
            c.customized_variables
                .iter()
                .map(|v| (v.name.clone(), v.value.clone().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    values.extend(builtin.clone());
    let mut rendered = Rendered::default();
    let manifests = template.agent_spec.workload.iter().flat_map(|w| &w.manifests);
    for (i, manifest) in manifests.enumerate() {
        let text = serde_json::to_string(&manifest.0).map_err(|e| e.to_string())?;
        let mut object: Value = serde_json::from_str(&fasttemplate(&text, &values))
            .map_err(|e| format!("manifest {i} is not JSON once rendered: {e}"))?;
        decorate(&mut object, template, inputs, &builtin);
        if let Some(ns) = &override_ns {
            set_namespace(&mut object, ns);
        }
        if is_hook(&object) {
            rendered.hooks.push(object);
        } else {
            rendered.manifests.push(object);
        }
    }
    rendered.install_namespace =
        override_ns.unwrap_or_else(|| workload_namespace(&rendered.manifests));
    Ok(rendered)
}

/// The default and builtin values: `HUB_KUBECONFIG` with a registration, `CLUSTER_NAME`, and
/// `INSTALL_NAMESPACE` when the config overrides it.
fn builtin_values(
    template: &AddOnTemplateSpec,
    inputs: &Inputs<'_>,
    install_namespace: Option<&str>,
) -> BTreeMap<String, String> {
    let mut values = BTreeMap::new();
    if !template.registration.is_empty() {
        values.insert("HUB_KUBECONFIG".to_owned(), format!("{HUB_KUBECONFIG_DIR}/kubeconfig"));
    }
    values.insert("CLUSTER_NAME".to_owned(), inputs.cluster.to_owned());
    if let Some(ns) = install_namespace {
        values.insert("INSTALL_NAMESPACE".to_owned(), ns.to_owned());
    }
    values
}

/// Whether an object is a pre-delete hook: a Job or Pod annotated (or, deprecated, labelled)
/// `addon.open-cluster-management.io/addon-pre-delete`.
pub(super) fn is_hook(object: &Value) -> bool {
    let kind = object["kind"].as_str().unwrap_or("");
    let marked = ["annotations", "labels"]
        .iter()
        .any(|m| object["metadata"][m].get(ANNOTATION_ADDON_PRE_DELETE).is_some());
    matches!(kind, "Job" | "Pod") && marked
}

/// The agent's namespace when no config overrides it: the first Deployment's, else the first
/// DaemonSet's, else OCM's default.
fn workload_namespace(manifests: &[Value]) -> String {
    ["Deployment", "DaemonSet"]
        .iter()
        .find_map(|kind| {
            manifests
                .iter()
                .find(|m| m["kind"] == *kind)
                .and_then(|m| m["metadata"]["namespace"].as_str())
                .filter(|ns| !ns.is_empty())
        })
        .unwrap_or(DEFAULT_INSTALL_NAMESPACE)
        .to_owned()
}

/// The decorators of a Deployment's or DaemonSet's pod template.
fn decorate(
    object: &mut Value,
    template: &AddOnTemplateSpec,
    inputs: &Inputs<'_>,
    builtin: &BTreeMap<String, String>,
) {
    let kind = object["kind"].as_str().unwrap_or("").to_owned();
    if !matches!(kind.as_str(), "Deployment" | "DaemonSet") {
        return;
    }
    let name = object["metadata"]["name"].as_str().unwrap_or("").to_owned();
    let Some(pod) = object.pointer_mut("/spec/template/spec") else { return };
    let mut env: Vec<Value> = builtin.iter().map(|(k, v)| json!({"name": k, "value": v})).collect();
    let mut volumes = Vec::new();
    let mut mounts = Vec::new();
    for r in &template.registration {
        if r.type_ == REGISTRATION_TYPE_KUBE_CLIENT {
            volumes.push(json!({"name": "hub-kubeconfig",
                "secret": {"secretName": format!("{}-hub-kubeconfig", inputs.addon)}}));
            mounts.push(json!({"name": "hub-kubeconfig", "mountPath": HUB_KUBECONFIG_DIR}));
        } else if let (REGISTRATION_TYPE_CUSTOM_SIGNER, Some(signer)) =
            (r.type_.as_str(), &r.custom_signer)
        {
            let slashed = signer.signer_name.replace('/', "-");
            let volume = format!("cert-{}", slashed.replace('.', "-"));
            volumes.push(json!({"name": volume,
                "secret": {"secretName": format!("{}-{slashed}-client-cert", inputs.addon)}}));
            mounts.push(json!({"name": volume, "mountPath": format!("/managed/{slashed}")}));
        }
    }
    let config = inputs.config;
    if let Some(proxy) = config.and_then(|c| c.proxy_config.as_ref()) {
        for (keys, value) in [
            (["HTTP_PROXY", "http_proxy"], &proxy.http_proxy),
            (["HTTPS_PROXY", "https_proxy"], &proxy.https_proxy),
            (["NO_PROXY", "no_proxy"], &proxy.no_proxy),
        ] {
            if let Some(v) = value.as_deref().filter(|v| !v.is_empty()) {
                env.extend(keys.iter().map(|k| json!({"name": k, "value": v})));
            }
        }
        if proxy.ca_bundle.as_ref().is_some_and(|b| !b.0.is_empty()) {
            let volume = "proxy-ca";
            volumes.push(json!({"name": volume,
                "configMap": {"name": format!("{}-proxy-ca", inputs.addon)}}));
            mounts.push(json!({"name": volume, "mountPath": "/managed/proxy-ca"}));
        }
    }
    let mirrors = mirrors(config, inputs.cluster_annotations);
    let resources = config.map(|c| c.resource_requirements.as_slice()).unwrap_or_default();
    let kind_plural = if kind == "Deployment" { "deployments" } else { "daemonsets" };
    if let Some(containers) = pod.get_mut("containers").and_then(Value::as_array_mut) {
        for c in containers {
            push_all(c, "env", &env);
            push_all(c, "volumeMounts", &mounts);
            let container = c["name"].as_str().unwrap_or("").to_owned();
            if let Some(image) = c["image"].as_str() {
                c["image"] = json!(mirror_image(image, &mirrors));
            }
            let id = [kind_plural, name.as_str(), container.as_str()];
            if let Some(r) = resources.iter().rev().find(|r| container_matches(&r.container_id, id))
            {
                c["resources"] = serde_json::to_value(&r.resources).unwrap_or(Value::Null);
            }
        }
    }
    push_all(pod, "volumes", &volumes);
    if let Some(placement) = config.and_then(|c| c.node_placement.as_ref()) {
        if !placement.node_selector.is_empty() {
            pod["nodeSelector"] = json!(placement.node_selector);
        }
        if !placement.tolerations.is_empty() {
            pod["tolerations"] = serde_json::to_value(&placement.tolerations).unwrap_or_default();
        }
    }
}

/// Appends `items` to the array at `field` of `object` (made if missing).
fn push_all(object: &mut Value, field: &str, items: &[Value]) {
    if items.is_empty() || !object.is_object() {
        return;
    }
    let slot = &mut object[field];
    if !slot.is_array() {
        *slot = json!([]);
    }
    if let Some(list) = slot.as_array_mut() {
        list.extend(items.iter().cloned());
    }
}

/// Image mirrors as (source, mirror): the config's first, then the cluster annotation's.
fn mirrors(
    config: Option<&AddOnDeploymentConfigSpec>,
    annotations: Option<&Value>,
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = config
        .map(|c| {
            c.registries
                .iter()
                .map(|r| (r.source.clone().unwrap_or_default(), r.mirror.clone()))
                .collect()
        })
        .unwrap_or_default();
    let annotated = annotations
        .and_then(|a| a.get(ANNOTATION_IMAGE_REGISTRIES))
        .and_then(Value::as_str)
        .and_then(|s| serde_json::from_str::<Value>(s).ok());
    for r in annotated.iter().flat_map(|v| v["registries"].as_array().into_iter().flatten()) {
        if let (Some(source), Some(mirror)) = (r["source"].as_str(), r["mirror"].as_str()) {
            out.push((source.to_owned(), mirror.to_owned()));
        }
    }
    out
}

/// The image with the first matching mirror's prefix in place of its source's.
fn mirror_image(image: &str, mirrors: &[(String, String)]) -> String {
    for (source, mirror) in mirrors {
        if source.is_empty() {
            continue;
        }
        if let Some(rest) = image.strip_prefix(source.as_str()) {
            return format!("{mirror}{rest}");
        }
    }
    image.to_owned()
}

/// Whether a `containerID` (`<kind>:<name>:<container>`, each part a name or `*`) names `id`.
fn container_matches(pattern: &str, id: [&str; 3]) -> bool {
    let parts: Vec<&str> = pattern.split(':').collect();
    parts.len() == 3 && parts.iter().zip(id).all(|(p, v)| *p == "*" || *p == v)
}

/// The install-namespace override: a namespaced object's namespace, a binding's subjects'
/// namespaces, a Namespace's name.
fn set_namespace(object: &mut Value, ns: &str) {
    let kind = object["kind"].as_str().unwrap_or("").to_owned();
    if kind == "Namespace" {
        object["metadata"]["name"] = json!(ns);
        return;
    }
    if object["metadata"]["namespace"].as_str().is_some_and(|n| !n.is_empty()) {
        object["metadata"]["namespace"] = json!(ns);
    }
    if matches!(kind.as_str(), "RoleBinding" | "ClusterRoleBinding") {
        for s in object["subjects"].as_array_mut().into_iter().flatten() {
            if s.get("namespace").is_some() {
                s["namespace"] = json!(ns);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn fasttemplate_matches_exact_keys_and_eats_the_rest() {
        let v = values(&[("CLUSTER_NAME", "c1")]);
        assert_eq!(fasttemplate("a-{{CLUSTER_NAME}}-b", &v), "a-c1-b");
        assert_eq!(fasttemplate("{{ CLUSTER_NAME }}", &v), "", "spaces are another key");
        assert_eq!(fasttemplate("{{.x}} y", &v), " y");
        assert_eq!(fasttemplate("open {{ tag", &v), "open {{ tag");
        let quote = values(&[("Q", "a\"b")]);
        assert_eq!(fasttemplate("{{Q}}", &quote), "a\"b", "no escaping");
    }

    fn template() -> AddOnTemplateSpec {
        serde_json::from_value(json!({
            "addonName": "hello",
            "agentSpec": {"workload": {"manifests": [
                {"apiVersion": "apps/v1", "kind": "Deployment",
                 "metadata": {"name": "hello-agent", "namespace": "hello-ns"},
                 "spec": {"template": {"spec": {"containers": [
                     {"name": "agent", "image": "quay.io/x/hello:1",
                      "args": ["--cluster={{CLUSTER_NAME}}", "--greeting={{GREETING}}"]}]}}}},
                {"apiVersion": "batch/v1", "kind": "Job",
                 "metadata": {"name": "cleanup", "namespace": "hello-ns",
                              "annotations": {ANNOTATION_ADDON_PRE_DELETE: ""}}},
            ]}},
            "registration": [{"type": "KubeClient"}],
        }))
        .expect("a template")
    }

    #[test]
    fn renders_variables_decorators_and_hooks() {
        let config: AddOnDeploymentConfigSpec = serde_json::from_value(json!({
            "customizedVariables": [{"name": "GREETING", "value": "hi"}],
            "nodePlacement": {"nodeSelector": {"role": "infra"}},
            "registries": [{"source": "quay.io/x", "mirror": "mirror.local/y"}],
        }))
        .expect("a config");
        let inputs = Inputs {
            addon: "hello",
            cluster: "c1",
            config: Some(&config),
            cluster_annotations: None,
        };
        let r = render(&template(), &inputs).expect("renders");
        assert_eq!(r.install_namespace, "hello-ns");
        assert_eq!(r.hooks.len(), 1);
        let d = &r.manifests[0];
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["args"], json!(["--cluster=c1", "--greeting=hi"]));
        assert_eq!(c["image"], "mirror.local/y/hello:1");
        assert_eq!(
            c["env"],
            json!([{"name": "CLUSTER_NAME", "value": "c1"},
                   {"name": "HUB_KUBECONFIG", "value": "/managed/hub-kubeconfig/kubeconfig"}])
        );
        assert_eq!(c["volumeMounts"][0]["mountPath"], HUB_KUBECONFIG_DIR);
        let pod = &d["spec"]["template"]["spec"];
        assert_eq!(pod["volumes"][0]["secret"]["secretName"], "hello-hub-kubeconfig");
        assert_eq!(pod["nodeSelector"], json!({"role": "infra"}));
    }

    #[test]
    fn an_install_namespace_override_moves_everything() {
        let config: AddOnDeploymentConfigSpec =
            serde_json::from_value(json!({"agentInstallNamespace": "elsewhere"})).expect("config");
        let inputs = Inputs {
            addon: "hello",
            cluster: "c1",
            config: Some(&config),
            cluster_annotations: None,
        };
        let r = render(&template(), &inputs).expect("renders");
        assert_eq!(r.install_namespace, "elsewhere");
        assert_eq!(r.manifests[0]["metadata"]["namespace"], "elsewhere");
        let env = &r.manifests[0]["spec"]["template"]["spec"]["containers"][0]["env"];
        assert!(env.as_array().expect("env").iter().any(|e| e["name"] == "INSTALL_NAMESPACE"));
    }

    #[test]
    fn resource_requirements_match_by_container_id() {
        assert!(container_matches("deployments:*:agent", ["deployments", "x", "agent"]));
        assert!(!container_matches("daemonsets:*:*", ["deployments", "x", "agent"]));
        assert!(!container_matches("deployments:x", ["deployments", "x", "agent"]));
    }
}
