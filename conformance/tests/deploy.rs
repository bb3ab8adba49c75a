//! The manifests under `deploy/` parse and agree with the hub: one APIService per OCM (and
//! SIG-multicluster ClusterProfile) group-version the hub serves, each pointing at the Service's named port with a CA bundle, the
//! Deployment's flags all accepted by `ocm-hub serve`, and the RBAC bindings naming the roles an
//! aggregated API server needs.

use std::collections::BTreeSet;
use std::path::PathBuf;

use anyhow::{Context as _, ensure};
use ocm_apiserver::machinery::scheme::{Profile, Scheme};
use serde_json::Value;

fn deploy_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/aggregation")
}

/// Every YAML document of every file in `deploy/aggregation`.
fn documents() -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(deploy_dir())?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    files.sort();
    for path in files.iter().filter(|p| p.extension().is_some_and(|e| e == "yaml")) {
        let text = std::fs::read_to_string(path)?;
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
            .with_context(|| format!("{} does not parse", path.display()))?;
        for doc in docs.into_iter().filter(|d| !d.is_null()) {
            ensure!(
                doc["apiVersion"].is_string() && doc["kind"].is_string(),
                "{}: {doc}",
                path.display()
            );
            out.push(doc);
        }
    }
    Ok(out)
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

#[test]
fn apiservices_cover_every_served_ocm_group_version() -> anyhow::Result<()> {
    let docs = documents()?;
    let scheme = Scheme::new(Profile::Hub);
    let served: BTreeSet<(String, String)> = scheme
        .types()
        .iter()
        .filter(|rt| {
            rt.group.ends_with("open-cluster-management.io")
                || rt.group == ocm_proto::api::multicluster::GROUP
        })
        .flat_map(|rt| rt.versions.iter().map(|v| (rt.group.clone(), v.clone())))
        .collect();
    let services = of_kind(&docs, "Service");
    let service = services.first().context("no Service")?;
    let mut listed = BTreeSet::new();
    for api in of_kind(&docs, "APIService") {
        let spec = &api["spec"];
        let (group, version) =
            (spec["group"].as_str().unwrap_or(""), spec["version"].as_str().unwrap_or(""));
        ensure!(api["metadata"]["name"] == format!("{version}.{group}"), "name of {api}");
        ensure!(
            spec["caBundle"].is_string() != (spec["insecureSkipTLSVerify"] == true),
            "caBundle xor insecure: {api}"
        );
        let gpm = spec["groupPriorityMinimum"].as_u64().unwrap_or(0);
        let vp = spec["versionPriority"].as_u64().unwrap_or(0);
        ensure!((1..=19999).contains(&gpm) && (1..=999).contains(&vp), "priorities of {api}");
        ensure!(spec["service"]["name"] == service["metadata"]["name"], "{api}");
        ensure!(spec["service"]["namespace"] == service["metadata"]["namespace"], "{api}");
        let port = spec["service"]["port"].as_u64().unwrap_or(443);
        ensure!(
            service["spec"]["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|p| p["port"] == port && p["name"].is_string()),
            "the Service has no named port {port}"
        );
        ensure!(listed.insert((group.to_owned(), version.to_owned())), "{group}/{version} twice");
    }
    ensure!(listed == served, "APIServices {listed:?}\nserved {served:?}");
    // The most stable version of each group (what discovery prefers) has the highest
    // versionPriority.
    for (group, _) in &served {
        let preferred = served
            .iter()
            .filter(|(g, _)| g == group)
            .map(|(_, v)| v.clone())
            .max_by_key(|v| kube_version_rank(v));
        let top = of_kind(&docs, "APIService")
            .into_iter()
            .filter(|a| a["spec"]["group"] == group.as_str())
            .max_by_key(|a| a["spec"]["versionPriority"].as_u64())
            .map(|a| a["spec"]["version"].as_str().unwrap_or("").to_owned());
        ensure!(top == preferred, "{group}: top priority {top:?}, preferred {preferred:?}");
    }
    Ok(())
}

/// Kubernetes' version order: GA over beta over alpha, then by number.
fn kube_version_rank(v: &str) -> (u8, u32, u32) {
    let rest = v.trim_start_matches('v');
    let (major, tail) =
        rest.split_at(rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len()));
    let major = major.parse().unwrap_or(0);
    let (stability, minor) = match tail {
        "" => (2, 0),
        t if t.starts_with("beta") => (1, t[4..].parse().unwrap_or(0)),
        t if t.starts_with("alpha") => (0, t[5..].parse().unwrap_or(0)),
        _ => (0, 0),
    };
    (stability, major, minor)
}

#[test]
fn the_deployment_uses_flags_the_hub_accepts() -> anyhow::Result<()> {
    let docs = documents()?;
    let deployment = of_kind(&docs, "Deployment").into_iter().next().context("no Deployment")?;
    let pod = &deployment["spec"]["template"]["spec"];
    let accounts: Vec<&Value> =
        of_kind(&docs, "ServiceAccount").into_iter().map(|s| &s["metadata"]["name"]).collect();
    ensure!(
        accounts.contains(&&pod["serviceAccountName"]),
        "serviceAccountName {}",
        pod["serviceAccountName"]
    );
    let container = &pod["containers"][0];
    ensure!(
        container["ports"].as_array().into_iter().flatten().any(|p| p["name"] == "https"),
        "no https port"
    );
    let args: Vec<&str> =
        container["args"].as_array().context("args")?.iter().filter_map(Value::as_str).collect();
    ensure!(args.first() == Some(&"serve"), "{args:?}");
    ocm_conformance::programs::check_flags(
        &ocm_conformance::programs::ocm_hub()?,
        &["serve"],
        &args[1..],
    )?;
    for needed in
        ["--requestheader-client-ca-file", "--tls-cert-file", "--authorization-kubeconfig"]
    {
        ensure!(args.iter().any(|a| a.starts_with(needed)), "{needed} missing");
    }
    // The probes and the mounts name what exists.
    for probe in ["readinessProbe", "livenessProbe"] {
        ensure!(container[probe]["httpGet"]["port"] == "https", "{probe}");
    }
    let volumes: Vec<&Value> =
        pod["volumes"].as_array().context("volumes")?.iter().map(|v| &v["name"]).collect();
    for mount in container["volumeMounts"].as_array().context("mounts")? {
        ensure!(volumes.contains(&&mount["name"]), "mount {mount} has no volume");
    }
    Ok(())
}

#[test]
fn rbac_binds_what_an_aggregated_server_needs() -> anyhow::Result<()> {
    let docs = documents()?;
    // The identity the hub runs as: the Deployment's ServiceAccount in its namespace.
    let deployment = of_kind(&docs, "Deployment").into_iter().next().context("no Deployment")?;
    let account = &deployment["spec"]["template"]["spec"]["serviceAccountName"];
    let account_ns = &deployment["metadata"]["namespace"];
    // (role, binding namespace) of each binding that names that ServiceAccount.
    let roles: Vec<(String, String)> = docs
        .iter()
        .filter(|d| d["kind"] == "ClusterRoleBinding" || d["kind"] == "RoleBinding")
        .filter(|b| {
            b["subjects"].as_array().into_iter().flatten().any(|s| {
                s["kind"] == "ServiceAccount"
                    && s["name"] == *account
                    && s["namespace"] == *account_ns
            })
        })
        .map(|b| {
            (
                b["roleRef"]["name"].as_str().unwrap_or("").to_owned(),
                b["metadata"]["namespace"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    ensure!(roles.contains(&("system:auth-delegator".into(), String::new())), "{roles:?}");
    ensure!(
        roles.contains(&("extension-apiserver-authentication-reader".into(), "kube-system".into())),
        "{roles:?}"
    );
    let aggregated = of_kind(&docs, "ClusterRole")
        .into_iter()
        .filter(|r| {
            r["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
        })
        .count();
    ensure!(aggregated >= 1, "no role aggregated into view");
    Ok(())
}

#[test]
fn the_walkthrough_names_every_manifest() -> anyhow::Result<()> {
    let readme = std::fs::read_to_string(deploy_dir().join("README.md"))
        .context("deploy/aggregation/README.md, the walkthrough, is missing")?;
    for entry in std::fs::read_dir(deploy_dir())? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.ends_with(".yaml") {
            ensure!(readme.contains(&name), "the walkthrough never uses {name}");
        }
    }
    for placeholder in ["OCM_HUB_IMAGE", "CA_BUNDLE"] {
        ensure!(readme.contains(placeholder), "the walkthrough never fills in {placeholder}");
    }
    Ok(())
}
