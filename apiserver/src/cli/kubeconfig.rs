//! `ocm-hub kubeconfig CLUSTER`: a kubeconfig whose server is a managed cluster's proxy URL
//! on the hub (`…/managedclusters/CLUSTER/proxy`) and whose credentials are the caller's hub
//! credentials, so kubectl acts on that cluster through the hub.
//!
//! It is made from a hub kubeconfig (the data dir's `admin.kubeconfig` unless `--kubeconfig`
//! names another): its current context's cluster entry (server, CA and every other field) and
//! user entry are kept as they are, the server gets the proxy path, and cluster and context are
//! named after the managed cluster. Nothing is asked of the hub: the file works once the
//! cluster's klusterlet has its tunnel open, and the hub decides every request.

use std::path::Path;

use serde_json::{Value, json};

use super::admin::CliError;

/// The kubeconfig for `cluster` made from the hub kubeconfig at `source`, as YAML.
pub fn for_cluster(source: &Path, cluster: &str) -> Result<String, CliError> {
    let unreadable =
        |detail: String| CliError::Kubeconfig { path: source.display().to_string(), detail };
    let text = std::fs::read_to_string(source).map_err(|e| unreadable(e.to_string()))?;
    let hub: Value = serde_saphyr::from_str(&text).map_err(|e| unreadable(e.to_string()))?;
    let made = rewrite(&hub, cluster).map_err(|e| unreadable(e.to_owned()))?;
    serde_saphyr::to_string(&made).map_err(|e| unreadable(e.to_string()))
}

/// The entry named `name` of a kubeconfig list (`clusters`, `users`, `contexts`).
fn named<'a>(config: &'a Value, list: &str, name: &str) -> Option<&'a Value> {
    config
        .get(list)?
        .as_array()?
        .iter()
        .find(|e| e.get("name").and_then(Value::as_str) == Some(name))
}

/// The managed cluster's kubeconfig from a hub kubeconfig's current context.
fn rewrite(hub: &Value, cluster: &str) -> Result<Value, &'static str> {
    let current = match hub.get("current-context").and_then(Value::as_str) {
        Some(name) if !name.is_empty() => name.to_owned(),
        _ => hub
            .pointer("/contexts/0/name")
            .and_then(Value::as_str)
            .ok_or("it has no context")?
            .to_owned(),
    };
    let context = named(hub, "contexts", &current)
        .and_then(|c| c.get("context"))
        .ok_or("its current context is not among its contexts")?;
    let cluster_name =
        context.get("cluster").and_then(Value::as_str).ok_or("its context names no cluster")?;
    let user_name =
        context.get("user").and_then(Value::as_str).ok_or("its context names no user")?;
    let mut entry = named(hub, "clusters", cluster_name)
        .and_then(|c| c.get("cluster"))
        .cloned()
        .ok_or("its context's cluster is not among its clusters")?;
    let user = named(hub, "users", user_name)
        .cloned()
        .ok_or("its context's user is not among its users")?;
    let server = entry.get("server").and_then(Value::as_str).ok_or("its cluster has no server")?;
    let server =
        format!("{}{}", server.trim_end_matches('/'), ocm_proto::tunnel::proxy_path(cluster));
    entry["server"] = Value::String(server);
    Ok(json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": entry}],
        "users": [user],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": user_name}}],
        "current-context": cluster,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_contexts_user_reaches_the_clusters_proxy() {
        let hub = json!({
            "apiVersion": "v1", "kind": "Config", "current-context": "admin@hub",
            "clusters": [
                {"name": "other", "cluster": {"server": "https://elsewhere:1"}},
                {"name": "hub", "cluster": {"server": "https://127.0.0.1:6443/", "certificate-authority-data": "Q0E="}},
            ],
            "users": [{"name": "admin", "user": {"client-certificate-data": "Yw==", "client-key-data": "aw=="}}],
            "contexts": [{"name": "admin@hub", "context": {"cluster": "hub", "user": "admin"}}],
        });
        let made = rewrite(&hub, "c1").unwrap();
        assert_eq!(
            made["clusters"][0]["cluster"]["server"],
            "https://127.0.0.1:6443/apis/cluster.open-cluster-management.io/v1/managedclusters/c1/proxy"
        );
        assert_eq!(made["clusters"][0]["cluster"]["certificate-authority-data"], "Q0E=");
        assert_eq!(made["users"][0]["user"]["client-key-data"], "aw==");
        assert_eq!(made["current-context"], "c1");
        assert_eq!(made["contexts"][0]["context"], json!({"cluster": "c1", "user": "admin"}));
    }

    #[test]
    fn a_kubeconfig_without_its_pieces_is_refused() {
        assert!(rewrite(&json!({}), "c1").is_err());
        let dangling = json!({"current-context": "x", "contexts": [{"name": "x", "context": {"cluster": "h", "user": "u"}}]});
        assert_eq!(
            rewrite(&dangling, "c1"),
            Err("its context's cluster is not among its clusters")
        );
    }
}
