//! ManifestWork condition rules end to end over both transports (gRPC CloudEvents and REST): a
//! real `klusterlet` applies a work whose `manifestConfigs[].conditionRules` are CEL over the
//! applied ConfigMap to a `--profile cluster` instance, and as a user of that cluster changes the
//! ConfigMap, the manifest's rule conditions (status, reason, message, `observedGeneration`) and
//! the work-level aggregates follow it; an expression that fails says why, a removed rule's
//! conditions are pruned, and a work whose rules say `Complete` is no longer applied.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context as _;
use ocm_apiserver::machinery::scheme::Profile;
use ocm_conformance::hub::{Backend, TestHub, eventually};
use ocm_conformance::kubectl::{create, merge_patch};
use ocm_conformance::programs;
use reqwest::Method;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);
const WORKS: &str = "/apis/work.open-cluster-management.io/v1/namespaces/c1/manifestworks";
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

/// A hub that trusts one bootstrap identity (so the agent is approved and accepted at once), a
/// managed cluster, and a klusterlet joined to the hub for it over `transport`, resyncing every
/// second.
async fn joined(
    transport: &str,
) -> anyhow::Result<(TestHub, TestHub, tokio::process::Child, tempfile::TempDir)> {
    let (id, secret) = ("rules1", "0123456789abcdef");
    let hub = TestHub::start_with(Backend::Memory, |c| {
        c.registration.enabled = true;
        c.registration.auto_approve_identities = vec![format!("system:bootstrap:{id}")];
    })
    .await?;
    let token = ocm_apiserver::auth::bootstrap::bootstrap_token_object(
        id,
        secret,
        "2099-01-01T00:00:00Z",
        "condition rule tests",
    );
    create(&hub, &hub.http()?, "/api/v1/namespaces/kube-system/secrets", token).await?;
    let cluster = TestHub::start_with(Backend::Memory, |c| c.profile = Profile::Cluster).await?;
    let dir = tempfile::tempdir()?;
    let ca = hub.path().join("pki/ca.crt").display().to_string();
    let token = format!("{id}.{secret}");
    let args = [
        "join",
        "--hub",
        &hub.url,
        "--token",
        &token,
        "--cluster-name",
        "c1",
        "--ca-file",
        &ca,
        "--work-resync-seconds",
        "1",
        "--transport",
        transport,
    ];
    let agent = klusterlet(&args, dir.path(), &cluster)?;
    let http = hub.http()?;
    eventually("c1's namespace on the hub", WAIT, || async {
        let (code, _) = hub.call(&http, Method::GET, "/api/v1/namespaces/c1", None, &[]).await?;
        Ok((code == 200).then_some(()))
    })
    .await?;
    Ok((hub, cluster, agent, dir))
}

fn klusterlet(
    args: &[&str],
    dir: &Path,
    cluster: &TestHub,
) -> anyhow::Result<tokio::process::Child> {
    Ok(tokio::process::Command::new(programs::klusterlet()?)
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .arg("--cluster-kubeconfig")
        .arg(cluster.kubeconfig())
        .env("RUST_LOG", std::env::var("OCM_AGENT_LOG").unwrap_or_else(|_| "warn".into()))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?)
}

async fn get(hub: &TestHub, path: &str) -> anyhow::Result<Option<Value>> {
    let (code, body) = hub.call(&hub.http()?, Method::GET, path, None, &[]).await?;
    match code {
        200 => Ok(Some(body)),
        404 => Ok(None),
        _ => anyhow::bail!("GET {path}: {code} {body}"),
    }
}

/// A condition as the tests compare it: type, status, reason, message, observedGeneration.
type Seen = (String, String, String, String, Option<i64>);

/// The condition `type_` of a list, as [`Seen`].
fn seen(conditions: &Value, type_: &str) -> Option<Seen> {
    let c = conditions.as_array()?.iter().find(|c| c["type"] == type_)?;
    let text = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
    Some((
        text("type"),
        text("status"),
        text("reason"),
        text("message"),
        c["observedGeneration"].as_i64(),
    ))
}

/// What a work's status is expected to say of one condition type, on the manifest and on the
/// work (`None`: the condition is not there).
struct Want<'a> {
    type_: &'a str,
    manifest: Option<(&'a str, &'a str, &'a str)>,
    work: Option<(&'a str, &'a str)>,
}

/// Waits until work `name`'s first manifest and the work itself carry the conditions of
/// `wants` at the work's current generation; the work.
async fn conditions(hub: &TestHub, name: &str, wants: &[Want<'_>]) -> anyhow::Result<Value> {
    eventually(&format!("work {name}'s rule conditions"), WAIT, || async {
        let w = get(hub, &format!("{WORKS}/{name}")).await?.context("the work")?;
        let generation = w["metadata"]["generation"].as_i64();
        let manifest = &w["status"]["resourceStatus"]["manifests"][0]["conditions"];
        let work = &w["status"]["conditions"];
        let holds = wants.iter().all(|want| {
            let on_manifest = want
                .manifest
                .map(|(status, reason, message)| (want.type_, status, reason, message, generation));
            let got = seen(manifest, want.type_);
            let manifest_ok = match (&got, on_manifest) {
                (None, None) => true,
                (Some(g), Some(w)) => {
                    (g.0.as_str(), g.1.as_str(), g.2.as_str(), g.3.as_str(), g.4) == w
                }
                _ => false,
            };
            let got = seen(work, want.type_);
            let work_ok = match (&got, want.work) {
                (None, None) => true,
                (Some(g), Some((status, message))) => {
                    (g.1.as_str(), g.2.as_str(), g.3.as_str(), g.4)
                        == (status, "ConditionRulesAggregated", message, generation)
                }
                _ => false,
            };
            manifest_ok && work_ok
        });
        Ok(holds.then_some(w))
    })
    .await
}

/// Sets `data` keys of the ConfigMap `name` on the cluster, as a user of that cluster would.
async fn user_sets(cluster: &TestHub, name: &str, data: Value) -> anyhow::Result<()> {
    let path = format!("{CONFIGMAPS}/{name}");
    merge_patch(cluster, &cluster.http()?, &path, json!({"data": data})).await?;
    Ok(())
}

/// Each scenario runs on both transports: OCM's CloudEvents over gRPC (the default) and a
/// list-watch of the hub's REST API.
macro_rules! both_transports {
    ($($scenario:ident),* $(,)?) => {
        mod grpc {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() -> anyhow::Result<()> {
                    super::$scenario("grpc").await
                }
            )*
        }
        mod kube {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() -> anyhow::Result<()> {
                    super::$scenario("kube").await
                }
            )*
        }
    };
}

both_transports!(rule_conditions_follow_the_live_object, a_complete_work_is_no_longer_applied);

/// The rules of the ConfigMap `state` (matched by a wildcard name): `Progressing` while its
/// `state` is not `done`, `Degraded` when it is `broken`, `Ready` when `ready` is `yes` (an
/// expression that fails while `ready` is missing).
fn rules_work(with_ready: bool) -> Value {
    let mut rules = vec![
        json!({"condition": "Progressing", "type": "CEL",
            "celExpressions": ["!has(object.data.state) || object.data.state != 'done'"],
            "messageExpression": "result ? 'state is ' + (has(object.data.state) ? object.data.state : 'unset') : 'rolled out'"}),
        json!({"condition": "Degraded", "type": "CEL",
            "celExpressions": ["has(object.data.state)", "object.data.state == 'broken'"],
            "messageExpression": "result ? 'the ConfigMap says broken' : ''"}),
    ];
    if with_ready {
        rules.push(json!({"condition": "Ready", "type": "CEL",
            "celExpressions": ["object.data.ready == 'yes'"]}));
    }
    json!({"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": "rules", "namespace": "c1"},
        "spec": {
            "workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "state", "namespace": "default"}, "data": {"app": "demo"}}]},
            "manifestConfigs": [{
                "resourceIdentifier": {"resource": "configmaps", "name": "sta*", "namespace": "default"},
                "conditionRules": rules}]}})
}

/// As the user changes the ConfigMap on the cluster, the manifest's conditions and the work's
/// aggregates follow at each resync; a failing expression says why; removing a rule (a new
/// generation) prunes its conditions.
async fn rule_conditions_follow_the_live_object(transport: &str) -> anyhow::Result<()> {
    let (hub, cluster, _agent, _dir) = joined(transport).await?;
    create(&hub, &hub.http()?, WORKS, rules_work(true)).await?;
    let evaluated = "ConditionRuleEvaluated";
    let w = conditions(
        &hub,
        "rules",
        &[
            Want {
                type_: "Progressing",
                manifest: Some(("True", evaluated, "state is unset")),
                work: Some(("True", "state is unset")),
            },
            Want {
                type_: "Degraded",
                manifest: Some(("False", evaluated, "Manifest is not Degraded")),
                work: Some(("False", "Manifest is not Degraded")),
            },
        ],
    )
    .await?;
    // `ready` is missing: the expression fails, False, with the error as the message.
    let ready = seen(&w["status"]["resourceStatus"]["manifests"][0]["conditions"], "Ready")
        .context("the manifest's Ready")?;
    assert_eq!((ready.1.as_str(), ready.2.as_str()), ("False", "ConditionRuleExpressionError"));
    assert!(ready.3.contains("ready"), "{ready:?}");
    let work_ready = seen(&w["status"]["conditions"], "Ready").context("the work's Ready")?;
    assert_eq!((work_ready.1.as_str(), work_ready.3.as_str()), ("False", ready.3.as_str()));

    user_sets(&cluster, "state", json!({"state": "done", "ready": "yes"})).await?;
    conditions(
        &hub,
        "rules",
        &[
            Want {
                type_: "Progressing",
                manifest: Some(("False", evaluated, "rolled out")),
                work: Some(("False", "rolled out")),
            },
            Want {
                type_: "Degraded",
                manifest: Some(("False", evaluated, "Manifest is not Degraded")),
                work: Some(("False", "Manifest is not Degraded")),
            },
            Want {
                type_: "Ready",
                manifest: Some(("True", evaluated, "Manifest is Ready")),
                work: Some(("True", "Manifest is Ready")),
            },
        ],
    )
    .await?;

    user_sets(&cluster, "state", json!({"state": "broken"})).await?;
    conditions(
        &hub,
        "rules",
        &[
            Want {
                type_: "Progressing",
                manifest: Some(("True", evaluated, "state is broken")),
                work: Some(("True", "state is broken")),
            },
            Want {
                type_: "Degraded",
                manifest: Some(("True", evaluated, "the ConfigMap says broken")),
                work: Some(("True", "the ConfigMap says broken")),
            },
        ],
    )
    .await?;

    // The Ready rule removed: a new generation, and its conditions are pruned.
    let patch = json!({"spec": rules_work(false)["spec"]});
    merge_patch(&hub, &hub.http()?, &format!("{WORKS}/rules"), patch).await?;
    let w = conditions(
        &hub,
        "rules",
        &[
            Want { type_: "Ready", manifest: None, work: None },
            Want {
                type_: "Degraded",
                manifest: Some(("True", evaluated, "the ConfigMap says broken")),
                work: Some(("True", "the ConfigMap says broken")),
            },
        ],
    )
    .await?;
    assert_eq!(w["metadata"]["generation"], 2);
    Ok(())
}

/// A work whose rules say `Complete` is True is left alone: a later change of its manifests is
/// not applied, while its status still follows the live object.
async fn a_complete_work_is_no_longer_applied(transport: &str) -> anyhow::Result<()> {
    let (hub, cluster, _agent, _dir) = joined(transport).await?;
    let work = |value: &str| {
        json!({"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
            "metadata": {"name": "once", "namespace": "c1"},
            "spec": {
                "workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "job", "namespace": "default"}, "data": {"v": value}}]},
                "manifestConfigs": [{
                    "resourceIdentifier": {"resource": "configmaps", "name": "job", "namespace": "default"},
                    "conditionRules": [{"condition": "Complete", "type": "CEL",
                        "celExpressions": ["has(object.data.finished)"],
                        "message": "the job says whether it is finished"}]}]}})
    };
    create(&hub, &hub.http()?, WORKS, work("1")).await?;
    let message = "the job says whether it is finished";
    let evaluated = "ConditionRuleEvaluated";
    conditions(
        &hub,
        "once",
        &[Want {
            type_: "Complete",
            manifest: Some(("False", evaluated, message)),
            work: Some(("False", message)),
        }],
    )
    .await?;
    user_sets(&cluster, "job", json!({"finished": "yes"})).await?;
    conditions(
        &hub,
        "once",
        &[Want {
            type_: "Complete",
            manifest: Some(("True", evaluated, message)),
            work: Some(("True", message)),
        }],
    )
    .await?;
    // A new generation: its rules are evaluated at it (the status follows), nothing is applied.
    let patch = json!({"spec": work("2")["spec"]});
    merge_patch(&hub, &hub.http()?, &format!("{WORKS}/once"), patch).await?;
    let w = conditions(
        &hub,
        "once",
        &[Want {
            type_: "Complete",
            manifest: Some(("True", evaluated, message)),
            work: Some(("True", message)),
        }],
    )
    .await?;
    assert_eq!(w["metadata"]["generation"], 2);
    let applied = seen(&w["status"]["conditions"], "Applied").context("Applied")?;
    assert_eq!(applied.4, Some(1), "Applied is not recomputed for a complete work: {applied:?}");
    let live = get(&cluster, &format!("{CONFIGMAPS}/job")).await?.context("the ConfigMap")?;
    assert_eq!(live["data"]["v"], "1", "the complete work's change is not applied");
    // Once the object no longer says so, the work is applied again.
    let path = format!("{CONFIGMAPS}/job");
    merge_patch(&cluster, &cluster.http()?, &path, json!({"data": {"finished": null}})).await?;
    eventually("the work applied again", WAIT, || async {
        let live = get(&cluster, &path).await?.context("the ConfigMap")?;
        Ok((live["data"]["v"] == "2").then_some(()))
    })
    .await?;
    Ok(())
}
