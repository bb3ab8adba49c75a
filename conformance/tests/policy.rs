//! Governance policies end to end: a hub, `--profile cluster` stand-ins and a real `klusterlet`
//! for each (gRPC, and REST for one scenario), Policies placed with Placements and PlacementBindings. A
//! `musthave` ConfigMap policy in `inform` is NonCompliant naming the missing object on every
//! selected cluster and only there; in `enforce` the ConfigMap is created and the policy turns
//! Compliant; drift is put back; placement changes add and remove replicas and status rows;
//! `disabled` stops evaluation; `mustnothave` deletes, `mustonlyhave` removes extra fields,
//! `DeleteIfCreated` prunes; a PolicySet aggregates; the agent enforces with the hub away; a
//! user who may edit Policies in one namespace reaches nothing beyond its placements.

use std::time::Duration;

use anyhow::Context as _;
use ocm_conformance::fleet::{Fleet, get};
use ocm_conformance::hub::{TestHub, eventually};
use ocm_conformance::kubectl::{Kubectl, create, delete, merge_patch};
use reqwest::Method;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(90);
const NS: &str = "policies";
const GROUP: &str = "/apis/policy.open-cluster-management.io";
const MCL: &str = "/apis/cluster.open-cluster-management.io/v1/managedclusters";
const NOT_FOUND: &str =
    "NonCompliant; violation - configmaps [settings] not found in namespace default";
const FOUND: &str =
    "Compliant; notification - configmaps [settings] found as specified in namespace default";

/// The agents' flags over gRPC (the default transport): a round every second.
const GRPC: &[&str] = &["--policy-resync-seconds", "1"];
/// The same over REST.
const REST: &[&str] = &["--transport", "kube", "--policy-resync-seconds", "1"];

fn policies(ns: &str) -> String {
    format!("{GROUP}/v1/namespaces/{ns}/policies")
}

/// A fleet of `names` whose agents run with `agent_args`, with namespace `policies` bound to
/// the `default` cluster set.
async fn fleet(names: &[&str], agent_args: &[&str]) -> anyhow::Result<Fleet> {
    let fleet = Fleet::start(names, agent_args).await?;
    fleet.bind_namespace(NS).await?;
    Ok(fleet)
}

/// A ConfigurationPolicy template with one object template.
fn config(name: &str, compliance: &str, object: Value, extra: Value) -> Value {
    let mut spec = json!({"remediationAction": "inform",
        "object-templates": [{"complianceType": compliance, "objectDefinition": object}]});
    for (k, v) in extra.as_object().into_iter().flatten() {
        spec[k] = v.clone();
    }
    json!({"objectDefinition": {"apiVersion": "policy.open-cluster-management.io/v1",
        "kind": "ConfigurationPolicy", "metadata": {"name": name}, "spec": spec}})
}

fn configmap(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"}, "data": data})
}

fn policy(name: &str, action: &str, templates: Vec<Value>) -> Value {
    json!({"apiVersion": "policy.open-cluster-management.io/v1", "kind": "Policy",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"disabled": false, "remediationAction": action, "policy-templates": templates}})
}

/// A Placement selecting clusters labelled `env=<env>`, and a binding of `subject` to it.
async fn place(fleet: &Fleet, name: &str, env: &str, subject: (&str, &str)) -> anyhow::Result<()> {
    let (hub, http) = (&fleet.hub, fleet.hub.http()?);
    let placement = json!({"apiVersion": "cluster.open-cluster-management.io/v1beta1",
        "kind": "Placement", "metadata": {"name": name, "namespace": NS},
        "spec": {"predicates": [{"requiredClusterSelector": {"labelSelector":
            {"matchLabels": {"env": env}}}}]}});
    let path =
        format!("/apis/cluster.open-cluster-management.io/v1beta1/namespaces/{NS}/placements");
    create(hub, &http, &path, placement).await?;
    let binding = json!({"apiVersion": "policy.open-cluster-management.io/v1",
        "kind": "PlacementBinding", "metadata": {"name": name, "namespace": NS},
        "placementRef": {"apiGroup": "cluster.open-cluster-management.io", "kind": "Placement", "name": name},
        "subjects": [{"apiGroup": "policy.open-cluster-management.io", "kind": subject.0, "name": subject.1}]});
    create(hub, &http, &format!("{GROUP}/v1/namespaces/{NS}/placementbindings"), binding).await?;
    Ok(())
}

/// The policy `settings` (ConfigMap `default/settings` with `mode: strict`, `musthave`) with
/// remediation `action`, bound to the Placement `prod` of clusters labelled `env=prod`.
async fn settings_policy(fleet: &Fleet, action: &str) -> anyhow::Result<()> {
    let data = json!({"mode": "strict"});
    let template = config("settings-present", "musthave", configmap("settings", data), json!({}));
    let http = fleet.hub.http()?;
    create(&fleet.hub, &http, &policies(NS), policy("settings", action, vec![template])).await?;
    place(fleet, "prod", "prod", ("Policy", "settings")).await
}

async fn label(fleet: &Fleet, cluster: &str, labels: Value) -> anyhow::Result<()> {
    let path = format!("{MCL}/{cluster}");
    merge_patch(&fleet.hub, &fleet.hub.http()?, &path, json!({"metadata": {"labels": labels}}))
        .await?;
    Ok(())
}

/// The ConfigMap `name` in `default` on a stand-in cluster, if there.
async fn cm(on: &TestHub, name: &str) -> anyhow::Result<Option<Value>> {
    get(on, &format!("/api/v1/namespaces/default/configmaps/{name}")).await
}

/// Writes the ConfigMap `name` on a stand-in cluster (created or replaced).
async fn put_cm(on: &TestHub, name: &str, data: Value) -> anyhow::Result<()> {
    let http = on.http()?;
    let path = "/api/v1/namespaces/default/configmaps";
    match cm(on, name).await? {
        None => create(on, &http, path, configmap(name, data)).await.map(drop),
        Some(_) => {
            let p = format!("{path}/{name}");
            let body = json!({"data": data});
            let resp = http
                .patch(format!("{}{p}", on.url))
                .header("content-type", "application/merge-patch+json")
                .body(body.to_string())
                .send()
                .await?;
            anyhow::ensure!(resp.status().is_success(), "PATCH {p}: {}", resp.status());
            Ok(())
        }
    }
}

/// Waits until `check` holds of the hub object at `path`.
async fn wait_for(
    fleet: &Fleet,
    what: &str,
    path: &str,
    check: impl Fn(&Value) -> bool,
) -> anyhow::Result<Value> {
    eventually(what, WAIT, || async { Ok(fleet.get(path).await?.filter(|v| check(v))) }).await
}

/// The newest history message of the replica's first template.
fn newest(replica: &Value) -> &str {
    replica["status"]["details"][0]["history"][0]["message"].as_str().unwrap_or("")
}

/// The clusters in a root policy's `status.status[]` with their compliance.
fn rows(root: &Value) -> Vec<(String, String)> {
    root["status"]["status"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or("").to_owned();
            (s("clustername"), s("compliant"))
        })
        .collect()
}

fn row_pairs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configmap_policy_is_reported_enforced_and_follows_its_placement() -> anyhow::Result<()> {
    let fleet = fleet(&["c1", "c2", "c3"], GRPC).await?;
    for c in ["c1", "c2"] {
        label(&fleet, c, json!({"env": "prod"})).await?;
    }
    let (hub, http) = (&fleet.hub, fleet.hub.http()?);
    settings_policy(&fleet, "inform").await?;
    let root = format!("{}/settings", policies(NS));

    // inform: NonCompliant, naming the missing object, on c1 and c2 only.
    for c in ["c1", "c2"] {
        let replica = format!("{}/policies.settings", policies(c));
        let r = wait_for(&fleet, &format!("{c} reports NonCompliant"), &replica, |r| {
            newest(r) == NOT_FOUND
        })
        .await?;
        assert_eq!(
            r["metadata"]["labels"]["policy.open-cluster-management.io/root-policy"],
            "policies.settings"
        );
        assert_eq!(r["metadata"]["labels"]["policy.open-cluster-management.io/cluster-name"], c);
        assert_eq!(r["status"]["compliant"], "NonCompliant");
        assert_eq!(r["status"]["details"][0]["templateMeta"]["name"], "settings-present");
        assert!(cm(&fleet.clusters[c], "settings").await?.is_none(), "inform created on {c}");
    }
    assert!(fleet.get(&format!("{}/policies.settings", policies("c3"))).await?.is_none());
    let want = row_pairs(&[("c1", "NonCompliant"), ("c2", "NonCompliant")]);
    let r = wait_for(&fleet, "root rows", &root, |r| rows(r) == want).await?;
    assert_eq!(r["status"]["compliant"], "NonCompliant");
    assert_eq!(r["status"]["placement"][0]["placementBinding"], "prod");
    assert_eq!(r["status"]["placement"][0]["decisions"].as_array().map(Vec::len), Some(2));
    kubectl_shows(hub, "NonCompliant").await?;

    // enforce: created on each, Compliant.
    merge_patch(hub, &http, &root, json!({"spec": {"remediationAction": "enforce"}})).await?;
    let want = row_pairs(&[("c1", "Compliant"), ("c2", "Compliant")]);
    wait_for(&fleet, "root Compliant", &root, |r| {
        rows(r) == want && r["status"]["compliant"] == "Compliant"
    })
    .await?;
    for c in ["c1", "c2"] {
        let made = cm(&fleet.clusters[c], "settings").await?.context("created")?;
        assert_eq!(made["data"]["mode"], "strict");
        let replica =
            fleet.get(&format!("{}/policies.settings", policies(c))).await?.context("replica")?;
        let history = replica["status"]["details"][0]["history"].as_array().context("history")?;
        assert!(
            history.iter().any(|h| h["message"]
                .as_str()
                .is_some_and(|m| m.contains("was created successfully"))),
            "{history:?}"
        );
        assert!(history.iter().any(|h| h["message"] == NOT_FOUND), "{history:?}");
    }
    assert!(cm(&fleet.clusters["c3"], "settings").await?.is_none());
    // The next evaluation finds it as specified.
    let replica = format!("{}/policies.settings", policies("c1"));
    wait_for(&fleet, "found as specified", &replica, |r| newest(r) == FOUND).await?;
    // The template is kept on the cluster, in its namespace, with its related objects.
    let c1 = &fleet.clusters["c1"];
    let path = format!("{GROUP}/v1/namespaces/c1/configurationpolicies/settings-present");
    let kept = eventually("the template on c1", WAIT, || async {
        Ok(get(c1, &path).await?.filter(|t| t["status"]["compliant"] == "Compliant"))
    })
    .await?;
    assert_eq!(
        kept["metadata"]["labels"]["policy.open-cluster-management.io/policy"],
        "policies.settings"
    );
    let related = &kept["status"]["relatedObjects"][0];
    assert_eq!(related["object"]["metadata"], json!({"name": "settings", "namespace": "default"}));
    assert_eq!(related["reason"], "K8s `must have` object already exists");
    assert_eq!(related["properties"]["createdByPolicy"], true);
    kubectl_shows(hub, "Compliant").await?;

    // Drift is put back at the next evaluation.
    put_cm(&fleet.clusters["c1"], "settings", json!({"mode": "loose"})).await?;
    eventually("drift corrected on c1", WAIT, || async {
        Ok(cm(&fleet.clusters["c1"], "settings")
            .await?
            .filter(|c| c["data"]["mode"] == "strict")
            .map(drop))
    })
    .await?;

    // Placement changes add and remove the replica and its status row.
    label(&fleet, "c3", json!({"env": "prod"})).await?;
    label(&fleet, "c1", json!({"env": null})).await?;
    let want = row_pairs(&[("c2", "Compliant"), ("c3", "Compliant")]);
    wait_for(&fleet, "rows follow the placement", &root, |r| rows(r) == want).await?;
    assert!(cm(&fleet.clusters["c3"], "settings").await?.is_some());
    eventually("c1's replica removed", WAIT, || async {
        Ok(fleet
            .get(&format!("{}/policies.settings", policies("c1")))
            .await?
            .is_none()
            .then_some(()))
    })
    .await?;

    // disabled: replicas go, and evaluation stops (a later policy's enforcement on c2 proves
    // the agent ran rounds meanwhile).
    merge_patch(hub, &http, &root, json!({"spec": {"disabled": true}})).await?;
    wait_for(&fleet, "no rows once disabled", &root, |r| rows(r).is_empty()).await?;
    for c in ["c2", "c3"] {
        eventually(&format!("{c}'s replica removed"), WAIT, || async {
            Ok(fleet
                .get(&format!("{}/policies.settings", policies(c)))
                .await?
                .is_none()
                .then_some(()))
        })
        .await?;
    }
    put_cm(&fleet.clusters["c2"], "settings", json!({"mode": "loose"})).await?;
    let marker =
        config("marker-present", "musthave", configmap("marker", json!({"k": "v"})), json!({}));
    create(hub, &http, &policies(NS), policy("marker", "enforce", vec![marker])).await?;
    let binding = json!({"apiVersion": "policy.open-cluster-management.io/v1", "kind": "PlacementBinding",
        "metadata": {"name": "marker", "namespace": NS},
        "placementRef": {"apiGroup": "cluster.open-cluster-management.io", "kind": "Placement", "name": "prod"},
        "subjects": [{"apiGroup": "policy.open-cluster-management.io", "kind": "Policy", "name": "marker"}]});
    create(hub, &http, &format!("{GROUP}/v1/namespaces/{NS}/placementbindings"), binding).await?;
    eventually("marker enforced on c2", WAIT, || async {
        Ok(cm(&fleet.clusters["c2"], "marker").await?.map(drop))
    })
    .await?;
    // Two more rounds of the agent after the marker.
    let marker_replica = format!("{}/policies.marker", policies("c2"));
    wait_for(&fleet, "marker Compliant on c2", &marker_replica, |r| {
        r["status"]["compliant"] == "Compliant"
    })
    .await?;
    let left = cm(&fleet.clusters["c2"], "settings").await?.context("settings on c2")?;
    assert_eq!(left["data"]["mode"], "loose", "a disabled policy was still enforced");
    Ok(())
}

/// `kubectl get policy -A` lists the root with `state` in its compliance column (skipped,
/// and said so, without kubectl).
async fn kubectl_shows(hub: &TestHub, state: &str) -> anyhow::Result<()> {
    if ocm_conformance::kubectl::skip("kubectl get policy -A") {
        return Ok(());
    }
    let kubectl = Kubectl::new(hub)?;
    let out = kubectl.ok(&["get", "policy", "-A"]).await?;
    let printed = ocm_conformance::kubectl::Printed::parse(&out)?;
    let row = (0..printed.rows.len())
        .find(|r| printed.cell(*r, "NAME").is_ok_and(|n| n == "settings"))
        .with_context(|| format!("no root row in {out}"))?;
    assert_eq!(printed.cell(row, "COMPLIANCE STATE")?, state, "{out}");
    assert_eq!(printed.cell(row, "NAMESPACE")?, NS, "{out}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mustnothave_deletes_mustonlyhave_trims_and_created_objects_are_pruned()
-> anyhow::Result<()> {
    let fleet = fleet(&["c1"], REST).await?;
    label(&fleet, "c1", json!({"env": "prod"})).await?;
    let c1 = &fleet.clusters["c1"];
    put_cm(c1, "forbidden", json!({"x": "1"})).await?;
    put_cm(c1, "trimmed", json!({"keep": "1", "extra": "2"})).await?;
    put_cm(c1, "kept", json!({"old": "1"})).await?;
    let (hub, http) = (&fleet.hub, fleet.hub.http()?);
    let prune = json!({"pruneObjectBehavior": "DeleteIfCreated"});
    let templates = vec![
        config("no-forbidden", "mustnothave", configmap("forbidden", json!({})), json!({})),
        config("only-keep", "mustonlyhave", configmap("trimmed", json!({"keep": "1"})), json!({})),
        config("made", "musthave", configmap("made", json!({"k": "v"})), prune.clone()),
        config("kept", "musthave", configmap("kept", json!({"old": "1"})), prune),
    ];
    create(hub, &http, &policies(NS), policy("shapes", "enforce", templates)).await?;
    place(&fleet, "prod", "prod", ("Policy", "shapes")).await?;
    let replica = format!("{}/policies.shapes", policies("c1"));
    let r =
        wait_for(&fleet, "shapes Compliant", &replica, |r| r["status"]["compliant"] == "Compliant")
            .await?;
    let messages: Vec<String> = r["status"]["details"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| d["history"][0]["message"].as_str().unwrap_or("").to_owned())
        .collect();
    assert!(messages.iter().any(|m| m == "Compliant; notification - configmaps [forbidden] was deleted successfully"
        || m == "Compliant; notification - configmaps [forbidden] missing as expected in namespace default"
        || m.contains("[forbidden]")), "{messages:?}");
    assert!(cm(c1, "forbidden").await?.is_none());
    let trimmed = cm(c1, "trimmed").await?.context("trimmed")?;
    assert_eq!(trimmed["data"], json!({"keep": "1"}));
    assert!(cm(c1, "made").await?.is_some());
    // The root goes: what the policy created is pruned, what it found is kept.
    delete(hub, &http, &format!("{}/shapes", policies(NS))).await?;
    eventually("made pruned", WAIT, || async { Ok(cm(c1, "made").await?.is_none().then_some(())) })
        .await?;
    assert!(cm(c1, "kept").await?.is_some(), "an object the policy did not create was pruned");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_set_aggregates_its_policies() -> anyhow::Result<()> {
    let fleet = fleet(&["c1"], GRPC).await?;
    label(&fleet, "c1", json!({"env": "prod"})).await?;
    let (hub, http) = (&fleet.hub, fleet.hub.http()?);
    let present = config("a-present", "musthave", configmap("a", json!({"k": "v"})), json!({}));
    let missing = config("b-present", "musthave", configmap("b", json!({"k": "v"})), json!({}));
    create(hub, &http, &policies(NS), policy("enforced", "enforce", vec![present])).await?;
    create(hub, &http, &policies(NS), policy("informed", "inform", vec![missing])).await?;
    let set = json!({"apiVersion": "policy.open-cluster-management.io/v1beta1", "kind": "PolicySet",
        "metadata": {"name": "baseline", "namespace": NS},
        "spec": {"description": "two", "policies": ["enforced", "informed"]}});
    let sets = format!("{GROUP}/v1beta1/namespaces/{NS}/policysets");
    create(hub, &http, &sets, set).await?;
    place(&fleet, "prod", "prod", ("PolicySet", "baseline")).await?;
    let s = wait_for(&fleet, "set NonCompliant", &format!("{sets}/baseline"), |s| {
        s["status"]["compliant"] == "NonCompliant"
    })
    .await?;
    assert_eq!(s["status"]["statusMessage"], "All policies are reporting status");
    assert_eq!(s["status"]["placement"][0]["placementBinding"], "prod");
    let enforced = fleet.get(&format!("{}/enforced", policies(NS))).await?.context("root")?;
    assert_eq!(enforced["status"]["placement"][0]["policySet"], "baseline");
    // The missing ConfigMap made by hand: the set turns Compliant.
    put_cm(&fleet.clusters["c1"], "b", json!({"k": "v"})).await?;
    wait_for(&fleet, "set Compliant", &format!("{sets}/baseline"), |s| {
        s["status"]["compliant"] == "Compliant"
    })
    .await?;
    // A member deleted is named.
    delete(hub, &http, &format!("{}/informed", policies(NS))).await?;
    wait_for(&fleet, "deleted member named", &format!("{sets}/baseline"), |s| {
        s["status"]["statusMessage"] == "Deleted policies: informed"
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_keeps_enforcing_while_the_hub_is_away() -> anyhow::Result<()> {
    let mut fleet = fleet(&["c1"], GRPC).await?;
    label(&fleet, "c1", json!({"env": "prod"})).await?;
    settings_policy(&fleet, "enforce").await?;
    let replica = format!("{}/policies.settings", policies("c1"));
    wait_for(&fleet, "Compliant", &replica, |r| r["status"]["compliant"] == "Compliant").await?;
    fleet.hub.pause().await;
    let c1 = &fleet.clusters["c1"];
    let http = c1.http()?;
    delete(c1, &http, "/api/v1/namespaces/default/configmaps/settings").await?;
    eventually("recreated with the hub away", WAIT, || async {
        Ok(cm(c1, "settings").await?.map(drop))
    })
    .await?;
    put_cm(c1, "settings", json!({"mode": "loose"})).await?;
    eventually("drift corrected with the hub away", WAIT, || async {
        Ok(cm(c1, "settings").await?.filter(|c| c["data"]["mode"] == "strict").map(drop))
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_editor_reaches_nothing_beyond_its_placements() -> anyhow::Result<()> {
    let fleet = fleet(&["c1"], GRPC).await?;
    label(&fleet, "c1", json!({"env": "prod"})).await?;
    let (hub, admin) = (&fleet.hub, fleet.hub.http()?);
    create(hub, &admin, "/api/v1/namespaces", json!({"metadata": {"name": "team-a"}})).await?;
    hub.create_rbac([
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "policy-editor", "namespace": "team-a"},
            "rules": [{"apiGroups": ["policy.open-cluster-management.io", "cluster.open-cluster-management.io"],
                "resources": ["*"], "verbs": ["*"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "alice", "namespace": "team-a"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "policy-editor"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]}),
    ])
    .await?;
    let alice = hub.http_as("alice", None)?;
    let call = |method: Method, path: String, body: Value| {
        let alice = alice.clone();
        async move { hub.call(&alice, method, &path, Some(&body), &[]).await }
    };
    // Writing a policy straight into the cluster's namespace, or another team's, is refused.
    let mut direct = policy(
        "direct",
        "enforce",
        vec![config("d", "musthave", configmap("direct", json!({})), json!({}))],
    );
    direct["metadata"]["namespace"] = json!("c1");
    let (code, _) = call(Method::POST, policies("c1"), direct).await?;
    assert_eq!(code, 403);
    // In its own namespace: a policy, a placement selecting everything, a binding, and a
    // look-alike replica labelled for c1. Without a ManagedClusterSetBinding of its own the
    // placement decides nothing, so nothing reaches c1.
    let mut own = policy(
        "reach",
        "enforce",
        vec![config("r", "musthave", configmap("reached", json!({})), json!({}))],
    );
    own["metadata"]["namespace"] = json!("team-a");
    let (code, body) = call(Method::POST, policies("team-a"), own).await?;
    assert_eq!(code, 201, "{body}");
    let mut fake = policy(
        "policies.settings",
        "enforce",
        vec![config("f", "musthave", configmap("faked", json!({})), json!({}))],
    );
    fake["metadata"]["namespace"] = json!("team-a");
    fake["metadata"]["labels"] = json!({"policy.open-cluster-management.io/root-policy": "policies.settings",
        "policy.open-cluster-management.io/cluster-name": "c1"});
    let (code, body) = call(Method::POST, policies("team-a"), fake).await?;
    assert_eq!(code, 201, "{body}");
    let placement = json!({"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
        "metadata": {"name": "all", "namespace": "team-a"}, "spec": {}});
    let (code, body) = call(
        Method::POST,
        "/apis/cluster.open-cluster-management.io/v1beta1/namespaces/team-a/placements".into(),
        placement,
    )
    .await?;
    assert_eq!(code, 201, "{body}");
    // A binding naming another namespace's placement still reads its own namespace's.
    for (name, placement) in [("all", "all"), ("borrowed", "prod")] {
        let binding = json!({"apiVersion": "policy.open-cluster-management.io/v1", "kind": "PlacementBinding",
            "metadata": {"name": name, "namespace": "team-a"},
            "placementRef": {"apiGroup": "cluster.open-cluster-management.io", "kind": "Placement", "name": placement},
            "subjects": [{"apiGroup": "policy.open-cluster-management.io", "kind": "Policy", "name": "reach"}]});
        let (code, body) =
            call(Method::POST, format!("{GROUP}/v1/namespaces/team-a/placementbindings"), binding)
                .await?;
        assert_eq!(code, 201, "{body}");
    }
    // The admin's own policy in `policies` does reach c1 (the agent is working) ...
    let template = config("p", "musthave", configmap("admin", json!({})), json!({}));
    create(hub, &admin, &policies(NS), policy("admin", "enforce", vec![template])).await?;
    let (code, body) = hub.call(&admin, Method::POST, &format!("/apis/cluster.open-cluster-management.io/v1beta1/namespaces/{NS}/placements"),
        Some(&json!({"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
            "metadata": {"name": "prod", "namespace": NS},
            "spec": {"predicates": [{"requiredClusterSelector": {"labelSelector": {"matchLabels": {"env": "prod"}}}}]}})), &[]).await?;
    assert_eq!(code, 201, "{body}");
    let binding = json!({"apiVersion": "policy.open-cluster-management.io/v1", "kind": "PlacementBinding",
        "metadata": {"name": "prod", "namespace": NS},
        "placementRef": {"apiGroup": "cluster.open-cluster-management.io", "kind": "Placement", "name": "prod"},
        "subjects": [{"apiGroup": "policy.open-cluster-management.io", "kind": "Policy", "name": "admin"}]});
    create(hub, &admin, &format!("{GROUP}/v1/namespaces/{NS}/placementbindings"), binding).await?;
    eventually("the admin's policy enforced", WAIT, || async {
        Ok(cm(&fleet.clusters["c1"], "admin").await?.map(drop))
    })
    .await?;
    // ... and the team's reached nothing: no replica, no object, its root with no rows.
    let list = fleet.get(&policies("c1")).await?.context("c1 policies")?;
    let names: Vec<&str> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["policies.admin"]);
    for made in ["reached", "faked", "direct"] {
        assert!(cm(&fleet.clusters["c1"], made).await?.is_none(), "{made} reached c1");
    }
    let root = fleet.get(&format!("{}/reach", policies("team-a"))).await?.context("team root")?;
    assert!(rows(&root).is_empty(), "{root}");
    // The look-alike is still there, untouched by the propagator.
    assert!(fleet.get(&format!("{}/policies.settings", policies("team-a"))).await?.is_some());
    Ok(())
}
