//! The managed cluster as the agent sees it: a trait, so the fleet simulator can run agents
//! against a cluster that only records, and its real implementation over the `kube` crate
//! (kubeconfig or in-cluster), which knows nothing of whether it talks to a real cluster or an
//! `ocm-hub serve --profile cluster`.

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DynamicObject, ListParams};

use crate::error::AgentError;
use ocm_proto::quantity::Quantity;

/// Node capacity and allocatable, summed over the cluster's Nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    pub capacity: BTreeMap<String, String>,
    pub allocatable: BTreeMap<String, String>,
}

/// A ClusterClaim (name, value) the cluster reports.
pub type Claim = (String, String);

/// What the agent applied, as its AppliedManifestWork lists it (`status.appliedResources`).
pub use ocm_proto::api::work::v1::AppliedManifestResourceMeta as Applied;

/// How a manifest is written (a ManifestWork's `manifestConfigs[].updateStrategy`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Strategy {
    /// Created if missing, else replaced when it no longer holds the manifest.
    Update,
    /// Created if missing, never changed after (owner references aside).
    CreateOnly,
    /// Server-side apply with this field manager, forcing conflicts or not.
    ServerSideApply {
        /// The field manager (`work-agent` by default).
        field_manager: String,
        /// Take fields other managers own.
        force: bool,
    },
    /// Read only: never written, never deleted.
    ReadOnly,
    /// Created if missing, else replaced by the manifest, a complete object (a policy's
    /// enforcement, which may remove fields), whenever it differs from the live object.
    Replace,
}

fn no_workloads() -> AgentError {
    AgentError::Cluster("this cluster backend cannot apply manifests".into())
}

/// What the agent asks of its managed cluster.
pub trait Cluster: Send + Sync + 'static {
    /// Whether its API server is healthy (`/livez`, or `/healthz` where that is missing).
    fn healthy(&self) -> BoxFuture<'_, Result<(), AgentError>>;

    /// The cluster's API server for the cluster proxy, where the agent can reach one (none in
    /// the fleet simulator's clusters).
    fn proxy_api(&self) -> Option<crate::proxy::ClusterApi> {
        None
    }
    /// Its Kubernetes version (`gitVersion`).
    fn version(&self) -> BoxFuture<'_, Result<String, AgentError>>;
    /// Its Nodes' resources.
    fn resources(&self) -> BoxFuture<'_, Result<Resources, AgentError>>;
    /// Its ClusterClaims that are not spoke-only.
    fn claims(&self) -> BoxFuture<'_, Result<Vec<Claim>, AgentError>>;

    /// What `manifest` names: its group, version, plural and namespace (discovery), no uid.
    fn resolve<'a>(
        &'a self,
        manifest: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<Applied, AgentError>> {
        let _ = manifest;
        Box::pin(async { Err(no_workloads()) })
    }

    /// Writes `manifest` by `strategy` (see [`Strategy`]; with `Update`, labels, annotations
    /// and owner references are merged into the live ones and finalizers kept). `owner`, when
    /// given, is added to its owner references. Returns what it applied, with the live uid, and
    /// the live object.
    fn apply<'a>(
        &'a self,
        manifest: &'a serde_json::Value,
        owner: Option<&'a serde_json::Value>,
        strategy: &'a Strategy,
    ) -> BoxFuture<'a, Result<(Applied, serde_json::Value), AgentError>> {
        let _ = (manifest, owner, strategy);
        Box::pin(async { Err(no_workloads()) })
    }

    /// Deletes what `resource` names if its uid is still `resource.uid` (background
    /// propagation). `true` once it is gone (or another object now has the name).
    fn delete<'a>(&'a self, resource: &'a Applied) -> BoxFuture<'a, Result<bool, AgentError>> {
        let _ = resource;
        Box::pin(async { Err(no_workloads()) })
    }

    /// The live object `manifest` names, if it exists.
    fn get<'a>(
        &'a self,
        manifest: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<Option<serde_json::Value>, AgentError>> {
        let _ = manifest;
        Box::pin(async { Err(no_workloads()) })
    }

    /// Every live object of the cluster-scoped kind `kind` names (its `apiVersion` and `kind`).
    fn list<'a>(
        &'a self,
        kind: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<Vec<serde_json::Value>, AgentError>> {
        let _ = kind;
        Box::pin(async { Err(no_workloads()) })
    }

    /// The cluster's CA bundle (PEM): what a client of its API trusts (empty when unknown).
    fn ca_bundle(&self) -> String {
        String::new()
    }

    /// A token of ServiceAccount `name` in `namespace` (TokenRequest) valid for `seconds`:
    /// the token and its expiry (RFC 3339).
    fn request_token<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        seconds: i64,
    ) -> BoxFuture<'a, Result<(String, String), AgentError>> {
        let _ = (namespace, name, seconds);
        Box::pin(async { Err(no_workloads()) })
    }

    /// Whether the cluster authenticates `token` (TokenReview).
    fn token_authenticated<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<bool, AgentError>> {
        let _ = token;
        Box::pin(async { Err(no_workloads()) })
    }

    /// Replaces the status of the live object `object` names (its `status` subresource).
    fn replace_status<'a>(
        &'a self,
        object: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<(), AgentError>> {
        let _ = object;
        Box::pin(async { Err(no_workloads()) })
    }
}

/// Creates namespace `ns` on the cluster unless it exists (an add-on's, when nothing of the
/// add-on's own made it).
pub async fn ensure_namespace(cluster: &dyn Cluster, ns: &str) -> Result<(), AgentError> {
    let namespace =
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
    cluster.apply(&namespace, None, &Strategy::CreateOnly).await.map(drop)
}

/// A real Kubernetes API.
#[derive(Clone)]
pub struct KubeCluster {
    client: kube::Client,
    /// The same API server, as the cluster proxy calls it.
    proxy: crate::proxy::ClusterApi,
    /// The CA bundle the client trusts, PEM.
    ca_pem: String,
    /// Discovery answers: `apiVersion/kind` → the resource and whether it is namespaced.
    kinds: std::sync::Arc<
        std::sync::Mutex<std::collections::HashMap<String, (kube::api::ApiResource, bool)>>,
    >,
}

/// A DER certificate as PEM.
fn pem_certificate(der: &[u8]) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> =
        b64.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).unwrap_or_default()).collect();
    format!("-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n", lines.join("\n"))
}

fn cluster_err(e: kube::Error) -> AgentError {
    AgentError::Cluster(crate::hub::error_chain(&e))
}

impl KubeCluster {
    /// The cluster of a kubeconfig file, or (without one) the in-cluster or default config.
    pub async fn connect(kubeconfig: Option<&std::path::Path>) -> Result<KubeCluster, AgentError> {
        let config = match kubeconfig {
            Some(path) => {
                let kc = kube::config::Kubeconfig::read_from(path).map_err(|e| {
                    AgentError::Invalid(format!("--cluster-kubeconfig {}: {e}", path.display()))
                })?;
                kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.map_err(
                    |e| {
                        AgentError::Invalid(format!("--cluster-kubeconfig {}: {e}", path.display()))
                    },
                )?
            }
            None => kube::Config::infer().await.map_err(|e| {
                AgentError::Invalid(format!(
                    "no cluster to manage: give --cluster-kubeconfig, or run in a cluster ({e})"
                ))
            })?,
        };
        let ca_pem = config.root_cert.iter().flatten().map(|der| pem_certificate(der)).collect();
        let proxy = crate::proxy::ClusterApi::new(&config)?;
        let client = kube::Client::try_from(config).map_err(cluster_err)?;
        Ok(KubeCluster { client, proxy, ca_pem, kinds: Default::default() })
    }

    /// The API of the object `manifest` names (discovery answers cached per kind).
    async fn api_for(
        &self,
        manifest: &serde_json::Value,
    ) -> Result<(Api<DynamicObject>, kube::api::ApiResource, String), AgentError> {
        let text = |p: &str| manifest.pointer(p).and_then(serde_json::Value::as_str).unwrap_or("");
        let (api_version, kind) = (text("/apiVersion"), text("/kind"));
        let key = format!("{api_version}/{kind}");
        let cached =
            self.kinds.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&key).cloned();
        let (ar, namespaced) = match cached {
            Some(found) => found,
            None => {
                let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
                let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
                let (ar, caps) =
                    kube::discovery::pinned_kind(&self.client, &gvk).await.map_err(|e| {
                        AgentError::Cluster(format!(
                            "{key} is not served: {}",
                            crate::hub::error_chain(&e)
                        ))
                    })?;
                let found = (ar, caps.scope == kube::discovery::Scope::Namespaced);
                self.kinds
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(key, found.clone());
                found
            }
        };
        let namespace = if namespaced {
            let ns = text("/metadata/namespace");
            if ns.is_empty() { "default" } else { ns }.to_owned()
        } else {
            String::new()
        };
        let api = if namespaced {
            Api::namespaced_with(self.client.clone(), &namespace, &ar)
        } else {
            Api::all_with(self.client.clone(), &ar)
        };
        Ok((api, ar, namespace))
    }

    async fn get_text(&self, path: &str) -> Result<(), kube::Error> {
        let req = http::Request::get(path).body(Vec::new()).map_err(kube::Error::HttpError)?;
        self.client.request_text(req).await.map(drop)
    }
}

fn applied_resource(
    ar: &kube::api::ApiResource,
    namespace: String,
    manifest: &serde_json::Value,
    uid: &str,
) -> Applied {
    let some = |v: &str| (!v.is_empty()).then(|| v.to_owned());
    Applied {
        group: some(&ar.group),
        version: ar.version.clone(),
        resource: ar.plural.clone(),
        namespace: some(&namespace),
        name: manifest
            .pointer("/metadata/name")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("")
            .to_owned(),
        uid: some(uid),
    }
}

/// Whether `live` already holds everything `desired` says (objects compared key by key,
/// everything else exactly): an `Update` that would change nothing is not sent.
pub fn holds(live: &serde_json::Value, desired: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (live, desired) {
        (Value::Object(l), Value::Object(d)) => {
            d.iter().all(|(k, dv)| l.get(k).is_some_and(|lv| holds(lv, dv)))
        }
        (l, d) => l == d,
    }
}

/// What an `Update` writes over `live`: the manifest, with the live object's labels,
/// annotations and owner references merged under the manifest's, its finalizers, and the live
/// `resourceVersion` (so a concurrent change is a conflict, not lost); `owner` added to the
/// owner references.
pub fn merge_for_update(
    live: &serde_json::Value,
    desired: &serde_json::Value,
    owner: Option<&serde_json::Value>,
) -> serde_json::Value {
    use serde_json::Value;
    let mut out = desired.clone();
    let live_meta = &live["metadata"];
    for key in ["labels", "annotations"] {
        if let Some(l) = live_meta.get(key).and_then(Value::as_object) {
            let mut merged = l.clone();
            if let Some(d) = out["metadata"].get(key).and_then(Value::as_object) {
                merged.extend(d.clone());
            }
            out["metadata"][key] = Value::Object(merged);
        }
    }
    let mut owners: Vec<Value> =
        live_meta.get("ownerReferences").and_then(Value::as_array).cloned().unwrap_or_default();
    if let Some(owner) = owner {
        if !owners.iter().any(|o| o.get("uid") == owner.get("uid")) {
            owners.push(owner.clone());
        }
    }
    if !owners.is_empty() {
        out["metadata"]["ownerReferences"] = Value::Array(owners);
    }
    if let Some(f) = live_meta.get("finalizers") {
        out["metadata"]["finalizers"] = f.clone();
    }
    if let Some(rv) = live_meta.get("resourceVersion") {
        out["metadata"]["resourceVersion"] = rv.clone();
    }
    out
}

fn sum(
    nodes: &[Node],
    pick: impl Fn(
        &Node,
    )
        -> Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> BTreeMap<String, String> {
    let mut total: BTreeMap<String, Quantity> = BTreeMap::new();
    for node in nodes {
        for (k, v) in pick(node).into_iter().flatten() {
            if let Some(q) = Quantity::parse(&v.0) {
                let e = total.entry(k.clone()).or_default();
                *e = *e + q;
            }
        }
    }
    total.into_iter().map(|(k, v)| (k, v.to_string())).collect()
}

impl Cluster for KubeCluster {
    fn proxy_api(&self) -> Option<crate::proxy::ClusterApi> {
        Some(self.proxy.clone())
    }

    fn healthy(&self) -> BoxFuture<'_, Result<(), AgentError>> {
        Box::pin(async move {
            match self.get_text("/livez").await {
                Ok(()) => Ok(()),
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 403 => {
                    self.get_text("/healthz").await.map_err(cluster_err)
                }
                Err(e) => Err(cluster_err(e)),
            }
        })
    }

    fn version(&self) -> BoxFuture<'_, Result<String, AgentError>> {
        Box::pin(async move {
            self.client.apiserver_version().await.map(|v| v.git_version).map_err(cluster_err)
        })
    }

    fn resources(&self) -> BoxFuture<'_, Result<Resources, AgentError>> {
        Box::pin(async move {
            let nodes: Api<Node> = Api::all(self.client.clone());
            let list = nodes.list(&ListParams::default()).await.map_err(cluster_err)?.items;
            let schedulable: Vec<Node> = list
                .iter()
                .filter(|n| !n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false))
                .cloned()
                .collect();
            Ok(Resources {
                capacity: sum(&list, |n| n.status.as_ref().and_then(|s| s.capacity.as_ref())),
                allocatable: sum(&schedulable, |n| {
                    n.status.as_ref().and_then(|s| s.allocatable.as_ref())
                }),
            })
        })
    }

    fn claims(&self) -> BoxFuture<'_, Result<Vec<Claim>, AgentError>> {
        Box::pin(async move {
            let gvk = kube::api::GroupVersionKind::gvk(
                ocm_proto::api::cluster::GROUP,
                "v1alpha1",
                "ClusterClaim",
            );
            let ar = kube::api::ApiResource::from_gvk_with_plural(&gvk, "clusterclaims");
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &ar);
            let lp = ListParams::default()
                .labels(&format!("!{}", ocm_proto::api::cluster::LABEL_SPOKE_ONLY));
            let items = match api.list(&lp).await {
                Ok(l) => l.items,
                // A cluster without the ClusterClaim kind has no claims.
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Vec::new()),
                Err(e) => return Err(cluster_err(e)),
            };
            Ok(items
                .into_iter()
                .filter_map(|o| {
                    let name = o.metadata.name?;
                    let value = o.data.pointer("/spec/value")?.as_str()?.to_owned();
                    Some((name, value))
                })
                .collect())
        })
    }

    fn resolve<'a>(
        &'a self,
        manifest: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<Applied, AgentError>> {
        Box::pin(async move {
            let (_, ar, namespace) = self.api_for(manifest).await?;
            Ok(applied_resource(&ar, namespace, manifest, ""))
        })
    }

    fn apply<'a>(
        &'a self,
        manifest: &'a serde_json::Value,
        owner: Option<&'a serde_json::Value>,
        strategy: &'a Strategy,
    ) -> BoxFuture<'a, Result<(Applied, serde_json::Value), AgentError>> {
        Box::pin(async move {
            let (api, ar, namespace) = self.api_for(manifest).await?;
            let name = manifest
                .pointer("/metadata/name")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("");
            let mut desired = manifest.clone();
            if !namespace.is_empty() {
                desired["metadata"]["namespace"] = serde_json::Value::String(namespace.clone());
            }
            let to_object = |v: serde_json::Value| -> Result<DynamicObject, AgentError> {
                serde_json::from_value(v)
                    .map_err(|e| AgentError::Cluster(format!("manifest {name}: {e}")))
            };
            let pp = kube::api::PostParams::default();
            let live = match strategy {
                Strategy::ServerSideApply { .. } => None,
                _ => api.get_opt(name).await.map_err(cluster_err)?,
            };
            let written = match (strategy, live) {
                (Strategy::ReadOnly, None) => {
                    return Err(AgentError::Cluster(format!(
                        "{} {name} does not exist (ReadOnly)",
                        ar.kind
                    )));
                }
                (Strategy::ReadOnly, Some(live)) => live,
                (Strategy::ServerSideApply { field_manager, force }, _) => {
                    if let Some(owner) = owner {
                        desired["metadata"]["ownerReferences"] = serde_json::json!([owner]);
                    }
                    let mut params = kube::api::PatchParams::apply(field_manager);
                    params.force = *force;
                    api.patch(name, &params, &kube::api::Patch::Apply(&desired))
                        .await
                        .map_err(cluster_err)?
                }
                (_, None) => {
                    if let Some(owner) = owner {
                        desired["metadata"]["ownerReferences"] = serde_json::json!([owner]);
                    }
                    api.create(&pp, &to_object(desired)?).await.map_err(cluster_err)?
                }
                (strategy, Some(live)) => {
                    // CreateOnly never changes what it created, but owns it as the work says.
                    let live_json = serde_json::to_value(&live).unwrap_or_default();
                    let wanted =
                        if *strategy == Strategy::CreateOnly { &live_json } else { &desired };
                    let merged = merge_for_update(&live_json, wanted, owner);
                    let same = match strategy {
                        Strategy::Replace => {
                            holds(&live_json, &merged) && holds(&merged, &live_json)
                        }
                        _ => holds(&live_json, &merged),
                    };
                    if same {
                        live
                    } else {
                        api.replace(name, &pp, &to_object(merged)?).await.map_err(cluster_err)?
                    }
                }
            };
            let uid = written.metadata.uid.clone().unwrap_or_default();
            let live = serde_json::to_value(&written).unwrap_or_default();
            Ok((applied_resource(&ar, namespace, manifest, &uid), live))
        })
    }

    fn delete<'a>(&'a self, r: &'a Applied) -> BoxFuture<'a, Result<bool, AgentError>> {
        Box::pin(async move {
            let group = r.group.as_deref().unwrap_or("");
            // The kind only names the resource in messages; the URL needs group, version, plural.
            let gvk = kube::api::GroupVersionKind::gvk(group, &r.version, "");
            let ar = kube::api::ApiResource::from_gvk_with_plural(&gvk, &r.resource);
            let api: Api<DynamicObject> = match r.namespace.as_deref().filter(|n| !n.is_empty()) {
                Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
                None => Api::all_with(self.client.clone(), &ar),
            };
            let mut dp = kube::api::DeleteParams::background();
            if let Some(uid) = r.uid.clone().filter(|u| !u.is_empty()) {
                dp.preconditions =
                    Some(kube::api::Preconditions { uid: Some(uid), resource_version: None });
            }
            match api.delete(&r.name, &dp).await {
                Ok(either) => Ok(either.is_right()),
                // Gone, or another object took the name (the uid precondition failed).
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(true),
                Err(e) => Err(cluster_err(e)),
            }
        })
    }

    fn get<'a>(
        &'a self,
        manifest: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<Option<serde_json::Value>, AgentError>> {
        Box::pin(async move {
            let (api, _, _) = self.api_for(manifest).await?;
            let name = manifest
                .pointer("/metadata/name")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("");
            let live = api.get_opt(name).await.map_err(cluster_err)?;
            Ok(live.map(|o| serde_json::to_value(o).unwrap_or_default()))
        })
    }

    fn list<'a>(
        &'a self,
        kind: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<Vec<serde_json::Value>, AgentError>> {
        Box::pin(async move {
            let (api, _, _) = self.api_for(kind).await?;
            let list = api.list(&kube::api::ListParams::default()).await.map_err(cluster_err)?;
            Ok(list
                .items
                .into_iter()
                .map(|o| serde_json::to_value(o).unwrap_or_default())
                .collect())
        })
    }

    fn ca_bundle(&self) -> String {
        self.ca_pem.clone()
    }

    fn request_token<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        seconds: i64,
    ) -> BoxFuture<'a, Result<(String, String), AgentError>> {
        Box::pin(async move {
            use k8s_openapi::api::authentication::v1::TokenRequest;
            let api: Api<k8s_openapi::api::core::v1::ServiceAccount> =
                Api::namespaced(self.client.clone(), namespace);
            let request: TokenRequest = serde_json::from_value(serde_json::json!({
                "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"audiences": [], "expirationSeconds": seconds},
            }))
            .map_err(|e| AgentError::Invalid(e.to_string()))?;
            let issued: TokenRequest = api
                .create_subresource("token", name, &Default::default(), &request)
                .await
                .map_err(cluster_err)?;
            let status = issued.status.ok_or_else(|| {
                AgentError::Cluster(format!("the TokenRequest of {namespace}/{name} has no status"))
            })?;
            Ok((status.token, status.expiration_timestamp.0.to_string()))
        })
    }

    fn token_authenticated<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<bool, AgentError>> {
        Box::pin(async move {
            use k8s_openapi::api::authentication::v1::TokenReview;
            let api: Api<TokenReview> = Api::all(self.client.clone());
            let review: TokenReview = serde_json::from_value(serde_json::json!({
                "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                "spec": {"token": token},
            }))
            .map_err(|e| AgentError::Invalid(e.to_string()))?;
            let answered = api.create(&Default::default(), &review).await.map_err(cluster_err)?;
            Ok(answered.status.and_then(|s| s.authenticated).unwrap_or(false))
        })
    }

    fn replace_status<'a>(
        &'a self,
        object: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<(), AgentError>> {
        Box::pin(async move {
            let (api, _, _) = self.api_for(object).await?;
            let name =
                object.pointer("/metadata/name").and_then(serde_json::Value::as_str).unwrap_or("");
            let obj: DynamicObject = serde_json::from_value(object.clone())
                .map_err(|e| AgentError::Invalid(e.to_string()))?;
            api.replace_status(name, &kube::api::PostParams::default(), &obj)
                .await
                .map_err(cluster_err)?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn holds_compares_what_the_manifest_says() {
        let live = json!({"metadata": {"name": "a", "uid": "u", "labels": {"x": "1", "y": "2"}},
                          "data": {"k": "v"}, "status": {"s": 1}});
        assert!(holds(
            &live,
            &json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "data": {"k": "v"}})
        ));
        assert!(!holds(&live, &json!({"data": {"k": "w"}})));
        assert!(!holds(&live, &json!({"data": {"k": "v", "n": "new"}})));
        assert!(!holds(&json!({"a": [1, 2]}), &json!({"a": [1]})));
    }

    #[test]
    fn updates_keep_live_labels_owners_finalizers_and_version() {
        let live = json!({"metadata": {"name": "a", "resourceVersion": "7", "finalizers": ["f"],
            "labels": {"live": "1", "both": "live"}, "ownerReferences": [{"uid": "o1"}]}});
        let desired =
            json!({"metadata": {"name": "a", "labels": {"both": "manifest"}}, "data": {}});
        let owner = json!({"uid": "amw"});
        let out = merge_for_update(&live, &desired, Some(&owner));
        assert_eq!(out["metadata"]["labels"], json!({"live": "1", "both": "manifest"}));
        assert_eq!(out["metadata"]["ownerReferences"], json!([{"uid": "o1"}, {"uid": "amw"}]));
        assert_eq!(out["metadata"]["finalizers"], json!(["f"]));
        assert_eq!(out["metadata"]["resourceVersion"], "7");
        // The owner is not added twice.
        let again = merge_for_update(&out, &desired, Some(&owner));
        assert_eq!(again["metadata"]["ownerReferences"].as_array().map(Vec::len), Some(2));
    }
}
