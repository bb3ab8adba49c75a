//! ManifestWorkReplicaSets end to end: a hub, three `--profile cluster` stand-ins and a real
//! `klusterlet` for each, a Placement and a set over it. `All` puts the work on every selected
//! cluster and follows the placement; `Progressive` updates one cluster at a time in name
//! order; a change that fails on one cluster stops the rollout and `RollbackAll` returns the
//! updated clusters to the last good revision; `ProgressivePerGroup` follows the decision
//! groups; per-cluster values land as `render` says; both cascade deletion policies.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::ensure;
use ocm_conformance::hub::eventually;
use ocm_conformance::kubectl::{Kubectl, Printed, create, merge_patch};
use ocm_conformance::programs;
use reqwest::Method;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(90);
const NS: &str = "apps";
const SETS: &str =
    "/apis/work.open-cluster-management.io/v1alpha1/namespaces/apps/manifestworkreplicasets";
const WORKS: &str = "/apis/work.open-cluster-management.io/v1/manifestworks";
const MCL: &str = "/apis/cluster.open-cluster-management.io/v1/managedclusters";
const PLACEMENTS: &str =
    "/apis/cluster.open-cluster-management.io/v1beta1/namespaces/apps/placements";
const OWNER: &str = "work.open-cluster-management.io/manifestworkreplicaset";
const HASH: &str = "work.open-cluster-management.io/controller-hash";

/// A hub with three joined clusters, each a `--profile cluster` instance with its klusterlet.
struct Fleet {
    inner: ocm_conformance::fleet::Fleet,
}

impl Fleet {
    async fn start(names: &[&str]) -> anyhow::Result<Fleet> {
        let inner =
            ocm_conformance::fleet::Fleet::start(names, &["--work-resync-seconds", "2"]).await?;
        inner.bind_namespace(NS).await?;
        Ok(Fleet { inner })
    }

    /// Runs `ocm-hub rollout ARGS` against the hub: exit code and stdout + stderr.
    async fn rollout(&self, args: &[&str]) -> anyhow::Result<(i32, String)> {
        let out = tokio::process::Command::new(programs::ocm_hub()?)
            .arg("rollout")
            .args(args)
            .arg("--data-dir")
            .arg(self.inner.hub.path())
            .output()
            .await?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok((out.status.code().unwrap_or(-1), text))
    }

    async fn label(&self, cluster: &str, labels: Value) -> anyhow::Result<()> {
        let http = self.inner.hub.http()?;
        merge_patch(
            &self.inner.hub,
            &http,
            &format!("{MCL}/{cluster}"),
            json!({"metadata": {"labels": labels}}),
        )
        .await?;
        // A consistent read returns once the hub's cache holds the change, so what follows
        // (admission, render) sees the new labels.
        self.get(&format!("{MCL}/{cluster}")).await?;
        Ok(())
    }

    async fn get(&self, path: &str) -> anyhow::Result<Option<Value>> {
        ocm_conformance::fleet::get(&self.inner.hub, path).await
    }

    /// The set's works, by cluster.
    async fn works(&self, set: &str) -> anyhow::Result<BTreeMap<String, Value>> {
        let path = format!("{WORKS}?labelSelector={OWNER}%3D{NS}.{set}");
        let list = self.get(&path).await?.unwrap_or_default();
        Ok(list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|w| {
                (w["metadata"]["namespace"].as_str().unwrap_or_default().to_owned(), w.clone())
            })
            .collect())
    }

    /// The `cfg` ConfigMap on a cluster, if there.
    async fn config(&self, cluster: &str) -> anyhow::Result<Option<Value>> {
        let c = &self.inner.clusters[cluster];
        let (code, body) = c
            .call(&c.http()?, Method::GET, "/api/v1/namespaces/default/configmaps/cfg", None, &[])
            .await?;
        Ok((code == 200).then_some(body))
    }

    /// Every value of `data.v` the `cfg` ConfigMap on `cluster` takes from now on, as a watch
    /// sees it: a change undone at once (a rollback that follows within milliseconds) is seen
    /// too, where polling can miss it.
    async fn values_from_now(&self, cluster: &str) -> anyhow::Result<Arc<Mutex<Vec<String>>>> {
        let c = &self.inner.clusters[cluster];
        let cms = "/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Dcfg";
        let (code, list) = c.call(&c.http()?, Method::GET, cms, None, &[]).await?;
        ensure!(code == 200, "{code} {list}");
        let rv = list["metadata"]["resourceVersion"].as_str().unwrap_or("0").to_owned();
        let url = format!("{}{cms}&watch=true&resourceVersion={rv}", c.url);
        let mut resp = c.http()?.get(url).send().await?;
        ensure!(resp.status() == 200, "watch: {}", resp.status());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let out = Arc::clone(&seen);
        tokio::spawn(async move {
            let mut buf = Vec::new();
            while let Ok(Some(chunk)) = resp.chunk().await {
                buf.extend_from_slice(&chunk);
                while let Some(end) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=end).collect();
                    let event: Value = serde_json::from_slice(&line).unwrap_or_default();
                    if let Some(v) = event["object"]["data"]["v"].as_str() {
                        out.lock().unwrap_or_else(PoisonError::into_inner).push(v.to_owned());
                    }
                }
            }
        });
        Ok(seen)
    }

    /// Waits until every named cluster's `cfg` holds `v`.
    async fn holds(&self, clusters: &[&str], v: &str) -> anyhow::Result<()> {
        for c in clusters {
            eventually(&format!("cfg v={v} on {c}"), WAIT, || async {
                Ok(self.config(c).await?.filter(|cm| cm["data"]["v"] == v).map(|_| ()))
            })
            .await?;
        }
        Ok(())
    }

    async fn set(&self, name: &str) -> anyhow::Result<Value> {
        self.get(&format!("{SETS}/{name}")).await?.ok_or_else(|| anyhow::anyhow!("no set {name}"))
    }

    /// Waits until the set's condition `type_` has `status` and `reason`.
    async fn until_condition(
        &self,
        set: &str,
        type_: &str,
        status: &str,
        reason: &str,
    ) -> anyhow::Result<Value> {
        eventually(&format!("{set}: {type_}={status}/{reason}"), WAIT, || async {
            let s = self.set(set).await?;
            Ok(condition(&s, type_)
                .filter(|c| c["status"] == status && c["reason"] == reason)
                .map(|_| s.clone()))
        })
        .await
    }
}

/// Waits until `seen` (from [`Fleet::values_from_now`] on `cluster`) holds `v`.
async fn until_seen(cluster: &str, seen: &Mutex<Vec<String>>, v: &str) -> anyhow::Result<()> {
    eventually(&format!("{cluster} took cfg v={v}"), WAIT, || async {
        let seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(seen.iter().any(|s| s == v).then_some(()))
    })
    .await
}

fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == type_)
}

fn configmap(v: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "cfg", "namespace": "default"},
           "data": {"v": v, "who": "{{ .clusterName }}", "region": "{{ .labels[\"region\"] }}"}})
}

fn placement(name: &str, extra: Value) -> Value {
    let mut p = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"predicates": [{"requiredClusterSelector": {"labelSelector": {"matchLabels": {"env": "prod"}}}}],
                 "tolerations": [{"key": "cluster.open-cluster-management.io/unreachable", "operator": "Exists"},
                                 {"key": "cluster.open-cluster-management.io/unavailable", "operator": "Exists"}]},
    });
    for (k, v) in extra.get("spec").and_then(Value::as_object).into_iter().flatten() {
        p["spec"][k] = v.clone();
    }
    p
}

fn replica_set(name: &str, strategy: Value, manifests: Value) -> Value {
    json!({
        "apiVersion": "work.open-cluster-management.io/v1alpha1", "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"placementRefs": [{"name": "prod", "rolloutStrategy": strategy}],
                 "manifestWorkTemplate": {"workload": {"manifests": manifests}}},
    })
}

/// Records, as it happens, the order in which clusters' works first carry a revision, and
/// whether every earlier cluster's work was Applied at that moment.
async fn watch_order(
    f: &Fleet,
    set: &str,
    revision: &str,
    count: usize,
) -> anyhow::Result<Vec<(String, bool)>> {
    let mut order: Vec<(String, bool)> = Vec::new();
    let until = tokio::time::Instant::now() + WAIT;
    while order.len() < count {
        ensure!(tokio::time::Instant::now() < until, "{count} works at {revision}: only {order:?}");
        let works = f.works(set).await?;
        let applied = |w: &Value| {
            condition(w, "Applied").is_some_and(|c| {
                c["status"] == "True" && c["observedGeneration"] == w["metadata"]["generation"]
            })
        };
        let before_all_applied = order.iter().all(|(c, _)| works.get(c).is_some_and(&applied));
        for (cluster, w) in &works {
            let at = w["metadata"]["labels"][HASH].as_str() == Some(revision);
            if at && !order.iter().any(|(c, _)| c == cluster) {
                order.push((cluster.clone(), before_all_applied));
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(order)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_places_a_rendered_work_on_every_selected_cluster_and_follows_the_placement()
-> anyhow::Result<()> {
    let f = Fleet::start(&["c1", "c2", "c3"]).await?;
    let http = f.inner.hub.http()?;
    for (c, region) in [("c1", "east"), ("c2", "west"), ("c3", "east")] {
        f.label(c, json!({"env": "prod", "region": region})).await?;
    }
    create(&f.inner.hub, &http, PLACEMENTS, placement("prod", json!({}))).await?;
    let all = json!({"type": "All"});
    create(&f.inner.hub, &http, SETS, replica_set("app", all, json!([configmap("1")]))).await?;
    f.holds(&["c1", "c2", "c3"], "1").await?;
    for (c, region) in [("c1", "east"), ("c2", "west"), ("c3", "east")] {
        let cm = f.config(c).await?.unwrap_or_default();
        ensure!(cm["data"]["who"] == c && cm["data"]["region"] == region, "{c}: {cm}");
    }
    let s = f.until_condition("app", "PlacementRolledOut", "True", "Complete").await?;
    f.until_condition("app", "ManifestworkApplied", "True", "AsExpected").await?;
    ensure!(s["status"]["summary"]["total"] == 3, "{}", s["status"]);
    ensure!(condition(&s, "PlacementVerified").is_some_and(|c| c["reason"] == "AsExpected"));
    // Works carry OCM's labels and names, and `render` answers the work a cluster got.
    let works = f.works("app").await?;
    for (c, w) in &works {
        let name = w["metadata"]["name"].as_str().unwrap_or_default();
        ensure!(name.starts_with("app") && name.len() == 8, "{name}");
        ensure!(w["metadata"]["labels"]["work.open-cluster-management.io/placementname"] == "prod");
        let rendered = f.get(&format!("{SETS}/app/render?cluster={c}")).await?.unwrap_or_default();
        ensure!(rendered["spec"] == w["spec"], "render for {c}: {rendered} vs {}", w["spec"]);
    }
    // kubectl prints the CRD's columns.
    let k = Kubectl::new(&f.inner.hub)?;
    let table = Printed::parse(&k.ok(&["get", "mwrs", "-n", NS]).await?)?;
    ensure!(table.cell(0, "PLACEMENT")? == "AsExpected" && table.cell(0, "FOUND")? == "True");
    ensure!(table.cell(0, "MANIFESTWORKS")? == "AsExpected" && table.cell(0, "APPLIED")? == "True");
    // A cluster leaving the placement loses its work; coming back gets it again.
    f.label("c3", json!({"env": "dev"})).await?;
    eventually("c3's work deleted and cfg gone", WAIT, || async {
        let gone = !f.works("app").await?.contains_key("c3") && f.config("c3").await?.is_none();
        Ok(gone.then_some(()))
    })
    .await?;
    f.label("c3", json!({"env": "prod"})).await?;
    f.holds(&["c3"], "1").await?;
    // A template change reaches every cluster at once.
    let patch =
        json!({"spec": {"manifestWorkTemplate": {"workload": {"manifests": [configmap("2")]}}}});
    merge_patch(&f.inner.hub, &http, &format!("{SETS}/app"), patch).await?;
    f.holds(&["c1", "c2", "c3"], "2").await?;
    // Foreground deletion keeps the set until its works (and what they applied) are gone: the
    // set is never seen gone while a work remains.
    let patch = json!({"spec": {"cascadeDeletionPolicy": "Foreground"}});
    merge_patch(&f.inner.hub, &http, &format!("{SETS}/app"), patch).await?;
    let (code, _) =
        f.inner.hub.call(&http, Method::DELETE, &format!("{SETS}/app"), None, &[]).await?;
    ensure!(code == 200, "delete: {code}");
    eventually("set, works and configmaps gone", WAIT, || async {
        let set_gone = f.get(&format!("{SETS}/app")).await?.is_none();
        let works_gone = f.works("app").await?.is_empty();
        ensure!(!set_gone || works_gone, "the set went before its works");
        let mut cms_gone = true;
        for c in ["c1", "c2", "c3"] {
            cms_gone &= f.config(c).await?.is_none();
        }
        Ok((set_gone && works_gone && cms_gone).then_some(()))
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progressive_goes_one_cluster_at_a_time_and_a_failing_change_is_rolled_back()
-> anyhow::Result<()> {
    let f = Fleet::start(&["c1", "c2", "c3"]).await?;
    let http = f.inner.hub.http()?;
    for c in ["c1", "c2", "c3"] {
        f.label(c, json!({"env": "prod", "region": "east"})).await?;
    }
    f.label("c2", json!({"broken": "yes"})).await?;
    create(&f.inner.hub, &http, PLACEMENTS, placement("prod", json!({}))).await?;
    let progressive = json!({"type": "Progressive", "failureStrategy": "RollbackAll",
        "progressive": {"maxConcurrency": 1, "minSuccessTime": "2s", "maxFailures": 0}});
    create(&f.inner.hub, &http, SETS, replica_set("app", progressive, json!([configmap("1")])))
        .await?;
    let s = eventually("update revision", WAIT, || async {
        Ok(f.set("app").await?["status"]["updateRevision"].as_str().map(str::to_owned))
    })
    .await?;
    let order = watch_order(&f, "app", &s, 3).await?;
    let names: Vec<&str> = order.iter().map(|(c, _)| c.as_str()).collect();
    ensure!(names == ["c1", "c2", "c3"], "order {order:?}");
    ensure!(
        order.iter().all(|(_, earlier_applied)| *earlier_applied),
        "a cluster started before the previous one was applied: {order:?}"
    );
    let good = f.until_condition("app", "PlacementRolledOut", "True", "Complete").await?;
    ensure!(good["status"]["currentRevision"] == good["status"]["updateRevision"]);
    let good_revision = s;
    // Revision 2 fails on c2 only: an override gives c2 a manifest of a kind it does not serve.
    let bogus = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "default"}});
    let patch = json!({"spec": {
        "manifestWorkTemplate": {"workload": {"manifests": [configmap("2")]}},
        "overrides": [{"name": "break-c2", "clusterSelector": {"matchLabels": {"broken": "yes"}},
                       "mergePatch": {"workload": {"manifests": [configmap("2"), bogus]}}}],
    }});
    let c1 = f.values_from_now("c1").await?;
    merge_patch(&f.inner.hub, &http, &format!("{SETS}/app"), patch).await?;
    // c1 takes revision 2 first; c2's override then breaks it, and the rollback may undo c1's
    // change before a poll would see it.
    until_seen("c1", &c1, "2").await?;
    let rolled = f.until_condition("app", "Progressing", "False", "RolledBack").await?;
    ensure!(rolled["status"]["abortedTime"].is_string(), "{}", rolled["status"]);
    f.holds(&["c1", "c2"], "1").await?;
    eventually("every work back at the good revision", WAIT, || async {
        let works = f.works("app").await?;
        let back = works.len() == 3
            && works.values().all(|w| w["metadata"]["labels"][HASH] == good_revision.as_str());
        Ok(back.then_some(()))
    })
    .await?;
    let s = f.set("app").await?;
    ensure!(s["status"]["currentRevision"] == good_revision.as_str(), "{}", s["status"]);
    let revs = &s["status"]["clusterRevisions"];
    ensure!(
        revs.as_array()
            .is_some_and(|r| r.len() == 1 && r[0]["clusters"] == json!(["c1", "c2", "c3"])),
        "{revs}"
    );
    // c3 never ran the failing revision.
    ensure!(f.config("c3").await?.is_some_and(|cm| cm["data"]["v"] == "1"));
    // The revisions are ControllerRevisions kubectl lists.
    let k = Kubectl::new(&f.inner.hub)?;
    let table = Printed::parse(&k.ok(&["get", "controllerrevisions", "-n", NS]).await?)?;
    ensure!(table.names().len() == 2, "{:?}", table.names());
    ensure!(
        table
            .cell(0, "CONTROLLER")?
            .starts_with("manifestworkreplicaset.work.open-cluster-management.io/app")
    );
    // `ocm-hub rollout` as a user runs it: status says it stopped, history lists both
    // revisions, undo to the first makes it the update revision again and the rollout completes.
    let (code, out) = f.rollout(&["status", "manifestworkreplicaset/app", "-n", NS]).await?;
    ensure!(code == 1 && out.contains("RolledBack"), "{code}: {out}");
    let (code, out) = f.rollout(&["history", "mwrs/app", "-n", NS]).await?;
    ensure!(code == 0 && out.contains("update (aborted)") && out.contains("current"), "{out}");
    let (code, out) = f.rollout(&["undo", "mwrs/app", "-n", NS, "--to-revision", "1"]).await?;
    ensure!(code == 0 && out.contains("rolled back to revision 1"), "{code}: {out}");
    let (code, out) = f.rollout(&["status", "mwrs/app", "-n", NS, "--timeout", "60s"]).await?;
    ensure!(code == 0 && out.contains("successfully rolled out"), "{code}: {out}");
    // Paused, a template change moves no cluster; resumed, it rolls out.
    let (code, out) = f.rollout(&["pause", "mwrs/app", "-n", NS]).await?;
    ensure!(code == 0 && out.ends_with("paused\n"), "{out}");
    let patch = json!({"spec": {"manifestWorkTemplate": {"workload": {"manifests": [configmap("3")]}}, "overrides": null}});
    merge_patch(&f.inner.hub, &http, &format!("{SETS}/app"), patch).await?;
    f.until_condition("app", "Progressing", "False", "RolloutPaused").await?;
    ensure!(
        f.config("c1").await?.is_some_and(|cm| cm["data"]["v"] == "1"),
        "a paused set moved c1"
    );
    f.rollout(&["resume", "mwrs/app", "-n", NS]).await?;
    f.holds(&["c1", "c2", "c3"], "3").await?;
    let (code, out) = f.rollout(&["status", "mwrs/app", "-n", NS, "--timeout", "60s"]).await?;
    ensure!(code == 0, "{code}: {out}");
    // Background deletion drops the set at once; its works follow.
    let (code, _) =
        f.inner.hub.call(&http, Method::DELETE, &format!("{SETS}/app"), None, &[]).await?;
    ensure!(code == 200, "delete: {code}");
    eventually("works gone", WAIT, || async { Ok(f.works("app").await?.is_empty().then_some(())) })
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progressive_per_group_follows_the_decision_groups() -> anyhow::Result<()> {
    let f = Fleet::start(&["c1", "c2", "c3"]).await?;
    let http = f.inner.hub.http()?;
    for c in ["c1", "c2", "c3"] {
        f.label(c, json!({"env": "prod", "region": "east"})).await?;
    }
    f.label("c3", json!({"canary": "true"})).await?;
    let groups = json!({"spec": {"decisionStrategy": {"groupStrategy": {"decisionGroups": [
        {"groupName": "canary", "groupClusterSelector": {"labelSelector": {"matchLabels": {"canary": "true"}}}}
    ]}}}});
    create(&f.inner.hub, &http, PLACEMENTS, placement("prod", groups)).await?;
    let per_group =
        json!({"type": "ProgressivePerGroup", "progressivePerGroup": {"minSuccessTime": "2s"}});
    create(&f.inner.hub, &http, SETS, replica_set("app", per_group, json!([configmap("1")])))
        .await?;
    let revision = eventually("update revision", WAIT, || async {
        Ok(f.set("app").await?["status"]["updateRevision"].as_str().map(str::to_owned))
    })
    .await?;
    let order = watch_order(&f, "app", &revision, 3).await?;
    ensure!(order[0].0 == "c3", "the canary group first: {order:?}");
    ensure!(order[1..].iter().all(|(_, earlier_applied)| *earlier_applied), "{order:?}");
    f.holds(&["c1", "c2", "c3"], "1").await?;
    f.until_condition("app", "PlacementRolledOut", "True", "Complete").await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_that_cannot_be_rendered_is_refused_or_reported() -> anyhow::Result<()> {
    let f = Fleet::start(&["c1"]).await?;
    let http = f.inner.hub.http()?;
    f.label("c1", json!({"env": "prod"})).await?;
    create(&f.inner.hub, &http, PLACEMENTS, placement("prod", json!({}))).await?;
    // A reference that is not one of the three is a 422 naming the field.
    let mut bad = replica_set("bad", json!({"type": "All"}), json!([configmap("1")]));
    bad["spec"]["manifestWorkTemplate"]["workload"]["manifests"][0]["data"]["x"] =
        json!("{{ .Values.x }}");
    let (code, body) = f.inner.hub.call(&http, Method::POST, SETS, Some(&bad), &[]).await?;
    ensure!(code == 422, "{code} {body}");
    let field = body["details"]["causes"][0]["field"].as_str().unwrap_or_default();
    ensure!(field == "spec.manifestWorkTemplate.workload.manifests[0].data.x", "{body}");
    eventually("the placement decides c1", WAIT, || async {
        let p = f.get(&format!("{PLACEMENTS}/prod")).await?.unwrap_or_default();
        Ok((p["status"]["numberOfSelectedClusters"] == 1).then_some(()))
    })
    .await?;
    // c1 has no `region` label: creating the set is refused, naming the field and the cluster.
    let set = replica_set("app", json!({"type": "All"}), json!([configmap("1")]));
    let (code, body) = f.inner.hub.call(&http, Method::POST, SETS, Some(&set), &[]).await?;
    ensure!(code == 422, "{code} {body}");
    let cause = &body["details"]["causes"][0];
    ensure!(
        cause["field"] == "spec.manifestWorkTemplate.workload.manifests[0].data.region",
        "{body}"
    );
    ensure!(cause["message"].as_str().is_some_and(|m| m.contains("\"c1\"")), "{body}");
    // With the label it is accepted; once the label goes, render answers 422 for c1 and the
    // set's status says which cluster cannot be rendered.
    f.label("c1", json!({"region": "east"})).await?;
    create(&f.inner.hub, &http, SETS, set).await?;
    f.holds(&["c1"], "1").await?;
    f.label("c1", json!({"region": null})).await?;
    let render = format!("{SETS}/app/render?cluster=c1");
    eventually("render refuses c1", WAIT, || async {
        let (code, _) = f.inner.hub.call(&http, Method::GET, &render, None, &[]).await?;
        Ok((code == 422).then_some(()))
    })
    .await?;
    let s = f.until_condition("app", "ManifestworkApplied", "False", "RenderFailed").await?;
    let msg =
        condition(&s, "ManifestworkApplied").map(|c| c["message"].to_string()).unwrap_or_default();
    ensure!(msg.contains("c1") && msg.contains("region"), "{msg}");
    // An update that would not render is refused too.
    f.label("c1", json!({"region": "east"})).await?;
    f.until_condition("app", "ManifestworkApplied", "True", "AsExpected").await?;
    let patch = json!({"spec": {"overrides": [{"mergePatch": {"x": "{{ .claims[\"nope\"] }}"}}]}});
    let (code, body) = f
        .inner
        .hub
        .call(
            &http,
            Method::PATCH,
            &format!("{SETS}/app"),
            Some(&patch),
            &[("content-type", "application/merge-patch+json")],
        )
        .await?;
    ensure!(
        code == 422 && body["details"]["causes"][0]["message"].to_string().contains("nope"),
        "{code} {body}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_condition_rule_stops_the_rollout_and_rolls_back() -> anyhow::Result<()> {
    let f = Fleet::start(&["c1", "c2", "c3"]).await?;
    let http = f.inner.hub.http()?;
    for (c, state) in [("c1", "done"), ("c2", "broken"), ("c3", "done")] {
        f.label(c, json!({"env": "prod", "region": "east", "state": state})).await?;
    }
    create(&f.inner.hub, &http, PLACEMENTS, placement("prod", json!({}))).await?;
    let progressive = json!({"type": "Progressive", "failureStrategy": "RollbackAll",
        "progressive": {"maxConcurrency": 1, "maxFailures": 0, "progressDeadline": "5m"}});
    create(&f.inner.hub, &http, SETS, replica_set("app", progressive, json!([configmap("1")])))
        .await?;
    f.until_condition("app", "PlacementRolledOut", "True", "Complete").await?;
    let good = f.set("app").await?["status"]["currentRevision"].clone();
    // Revision 2 carries the cluster's state and OCM v1.1 condition rules over it: done is
    // Progressing False (succeeded); broken is Progressing and Degraded (failed).
    let mut cm = configmap("2");
    cm["data"]["state"] = json!("{{ .labels[\"state\"] }}");
    let rules = json!([{
        "resourceIdentifier": {"group": "", "resource": "configmaps", "name": "cfg", "namespace": "default"},
        "conditionRules": [
            {"condition": "Progressing", "type": "CEL", "celExpressions": ["object.data.state != 'done'"]},
            {"condition": "Degraded", "type": "CEL", "celExpressions": ["object.data.state == 'broken'"],
             "messageExpression": "result ? 'state is broken' : 'state is fine'"},
        ],
    }]);
    let patch = json!({"spec": {"manifestWorkTemplate": {
        "workload": {"manifests": [cm]}, "manifestConfigs": rules}}});
    let (c1, c2) = (f.values_from_now("c1").await?, f.values_from_now("c2").await?);
    merge_patch(&f.inner.hub, &http, &format!("{SETS}/app"), patch).await?;
    // c1 (done) takes revision 2 and succeeds, so c2 (broken) takes it next and fails it; the
    // rollback may undo both changes before a poll would see them. c2 is reached only if c1's
    // rule said it succeeded (one cluster at a time, no failure allowed).
    until_seen("c1", &c1, "2").await?;
    until_seen("c2", &c2, "2").await?;
    let rolled = f.until_condition("app", "Progressing", "False", "RolledBack").await?;
    ensure!(rolled["status"]["currentRevision"] == good, "{}", rolled["status"]);
    f.holds(&["c1", "c2", "c3"], "1").await?;
    eventually("every work back at the good revision", WAIT, || async {
        let works = f.works("app").await?;
        let back =
            works.len() == 3 && works.values().all(|w| w["metadata"]["labels"][HASH] == good);
        Ok(back.then_some(()))
    })
    .await?;
    Ok(())
}
