//! The ways to run and watch the hub (`deploy/`): the alert rules pass `promtool check rules`
//! and their own `promtool test rules` cases; every dashboard query parses as PromQL (promtool)
//! and names only metrics the hub or the agent export; the container image is multi-stage and
//! runs as a non-root user; the systemd units pass `systemd-analyze verify`; and every command
//! line in them is one the binaries accept.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail, ensure};
use ocm_conformance::hub::{Backend, TestHub, eventually};
use ocm_conformance::{programs, prom};
use reqwest::Method;
use serde_json::Value;

fn deploy(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy").join(path)
}

/// Our metric prefixes: a name with one of them must be one we export.
const OURS: [&str; 4] = ["apiserver_", "ocm_", "process_", "watch_cache_"];

/// Every metric name the hub and the agent export (histograms with their series' suffixes).
async fn exported() -> anyhow::Result<BTreeSet<String>> {
    let hub = TestHub::start_with_controllers(Backend::Memory).await?;
    let admin = hub.http()?;
    // An accepted cluster (its Lease has an age) and a watch, so every family has a child.
    let mc = ocm_conformance::kubectl::cluster("c1", serde_json::json!({}));
    let (code, body) =
        hub.call(&admin, Method::POST, ocm_conformance::kubectl::MCL, Some(&mc), &[]).await?;
    ensure!(code == 201, "{code} {body}");
    let placement = serde_json::json!({"apiVersion": "cluster.open-cluster-management.io/v1beta1",
        "kind": "Placement", "metadata": {"name": "p", "namespace": "default"}, "spec": {}});
    let placements =
        "/apis/cluster.open-cluster-management.io/v1beta1/namespaces/default/placements";
    let (code, body) = hub.call(&admin, Method::POST, placements, Some(&placement), &[]).await?;
    ensure!(code == 201, "{code} {body}");
    let path =
        "/apis/cluster.open-cluster-management.io/v1/managedclusters?watch=true&timeoutSeconds=1";
    hub.call(&admin, Method::GET, path, None, &[]).await?;
    let text = eventually("c1's lease age", std::time::Duration::from_secs(10), || async {
        let (code, text) = hub.call(&admin, Method::GET, "/metrics", None, &[]).await?;
        ensure!(code == 200, "/metrics: {code}");
        let text = text.as_str().unwrap_or_default().to_owned();
        let ready = text.contains("ocm_managed_cluster_lease_age_seconds{")
            && text.contains("ocm_placement_selected_clusters{");
        Ok(ready.then_some(text))
    })
    .await?;
    let agent = ocm_agent::metrics::Metrics::new();
    agent.observe("lease", std::time::Duration::from_millis(1), true);
    let text = format!("{text}{}", agent.render());
    hub.stop().await;
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else { continue };
        let (name, kind) = rest.split_once(' ').context("TYPE line")?;
        names.insert(name.to_owned());
        if kind == "histogram" || kind == "summary" {
            for suffix in ["_bucket", "_sum", "_count"] {
                names.insert(format!("{name}{suffix}"));
            }
        }
    }
    Ok(names)
}

/// The metric names of ours a PromQL expression reads.
fn metric_names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut in_string = false;
    for c in expr.chars().chain([' ']) {
        if c == '"' {
            in_string = !in_string;
        }
        if !in_string && (c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            word.push(c);
            continue;
        }
        if OURS.iter().any(|p| word.starts_with(p)) {
            out.push(std::mem::take(&mut word));
        }
        word.clear();
    }
    out
}

/// Checks every expression parses as PromQL (as recording rules under `promtool check rules`)
/// and reads only exported metrics.
async fn check_queries(
    what: &str,
    exprs: &[String],
    names: &BTreeSet<String>,
) -> anyhow::Result<()> {
    ensure!(!exprs.is_empty(), "{what}: no queries");
    for expr in exprs {
        let used = metric_names(expr);
        ensure!(!used.is_empty(), "{what}: {expr} reads none of our metrics");
        for name in used {
            ensure!(names.contains(&name), "{what}: {expr} reads {name}, which nothing exports");
        }
    }
    if prom::skip(&format!("its promtool check of {what}'s queries")) {
        return Ok(());
    }
    let rules: Vec<Value> = exprs
        .iter()
        .enumerate()
        .map(|(i, e)| serde_json::json!({"record": format!("dashboard:query_{i}"), "expr": e}))
        .collect();
    let file = tempfile::NamedTempFile::new()?;
    let doc = serde_json::json!({"groups": [{"name": what, "rules": rules}]});
    std::fs::write(file.path(), serde_saphyr::to_string(&doc)?)?;
    prom::rules("check", &[file.path()]).await.with_context(|| format!("{what}'s queries"))?;
    Ok(())
}

#[tokio::test]
async fn alert_rules_pass_promtool_and_their_tests_and_read_exported_metrics() -> anyhow::Result<()>
{
    let rules = deploy("prometheus/alerts.yaml");
    let doc: Value = serde_saphyr::from_str(&std::fs::read_to_string(&rules)?)?;
    let mut exprs = Vec::new();
    let mut alerts = BTreeSet::new();
    for group in doc["groups"].as_array().context("groups")? {
        for rule in group["rules"].as_array().context("rules")? {
            let name = rule["alert"].as_str().context("every rule is an alert")?;
            ensure!(alerts.insert(name.to_owned()), "alert {name} twice");
            ensure!(rule["labels"]["severity"].is_string(), "{name} has no severity");
            ensure!(
                rule["annotations"]["summary"].is_string()
                    && rule["annotations"]["description"].is_string(),
                "{name}'s annotations"
            );
            exprs.push(rule["expr"].as_str().context("expr")?.to_owned());
        }
    }
    // The alerts the operations issue asks for.
    for wanted in [
        "OCMManagedClusterUnavailable",
        "OCMManagedClusterLeaseStale",
        "OCMManifestWorkDegraded",
        "OCMHubAPIErrorRatioHigh",
        "OCMHubWatchersTerminated",
    ] {
        ensure!(alerts.contains(wanted), "no {wanted} alert");
    }
    let names = exported().await?;
    for expr in &exprs {
        for name in metric_names(expr) {
            ensure!(names.contains(&name), "{expr} reads {name}, which nothing exports");
        }
    }
    if prom::skip("its promtool check and test of the alert rules") {
        return Ok(());
    }
    let checked = prom::rules("check", &[&rules]).await?;
    ensure!(checked.contains(&format!("SUCCESS: {} rules found", exprs.len())), "{checked}");
    // Every alert has a unit test that makes it fire.
    let tests = deploy("prometheus/alerts-test.yaml");
    let cases: Value = serde_saphyr::from_str(&std::fs::read_to_string(&tests)?)?;
    let fired: BTreeSet<String> = cases["tests"]
        .as_array()
        .context("tests")?
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_array().cloned().unwrap_or_default())
        .filter(|c| c["exp_alerts"].as_array().is_some_and(|a| !a.is_empty()))
        .filter_map(|c| c["alertname"].as_str().map(str::to_owned))
        .collect();
    let untested: Vec<&String> = alerts.difference(&fired).collect();
    ensure!(untested.is_empty(), "alerts no test makes fire: {untested:?}");
    prom::rules("test", &[&tests]).await?;
    Ok(())
}

#[tokio::test]
async fn dashboards_parse_and_query_exported_metrics() -> anyhow::Result<()> {
    let names = exported().await?;
    let mut uids = BTreeSet::new();
    let dir = deploy("grafana");
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(&dir)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    files.sort();
    let titles: Vec<String> =
        files.iter().filter_map(|f| f.file_name()?.to_str().map(str::to_owned)).collect();
    ensure!(titles == ["agents.json", "fleet.json", "hub-api.json"], "{titles:?}");
    for file in &files {
        let what = file.display().to_string();
        let d: Value =
            serde_json::from_str(&std::fs::read_to_string(file)?).with_context(|| what.clone())?;
        ensure!(d["title"].is_string() && d["schemaVersion"].is_u64(), "{what}");
        ensure!(uids.insert(d["uid"].as_str().context("uid")?.to_owned()), "{what}: uid twice");
        let vars: BTreeSet<&str> = d["templating"]["list"]
            .as_array()
            .context("templating")?
            .iter()
            .filter_map(|v| v["name"].as_str())
            .collect();
        let mut exprs = Vec::new();
        let mut ids = BTreeSet::new();
        for panel in d["panels"].as_array().context("panels")? {
            ensure!(
                ids.insert(panel["id"].as_u64().context("panel id")?),
                "{what}: panel id twice"
            );
            ensure!(
                panel["title"].is_string() && panel["gridPos"]["w"].is_u64(),
                "{what}: {panel}"
            );
            let ds = panel["datasource"]["uid"].as_str().unwrap_or("");
            ensure!(
                ds.strip_prefix("${")
                    .and_then(|v| v.strip_suffix('}'))
                    .is_some_and(|v| vars.contains(v)),
                "{what}: datasource {ds}"
            );
            for target in panel["targets"].as_array().context("targets")? {
                let expr = target["expr"].as_str().context("expr")?;
                // Every variable a query uses is defined.
                for (i, _) in expr.match_indices('$') {
                    let var: String = expr[i + 1..]
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    ensure!(vars.contains(var.as_str()), "{what}: ${var} is not a variable");
                }
                exprs.push(expr.to_owned());
            }
        }
        check_queries(&what, &exprs, &names).await?;
    }
    Ok(())
}

/// The instructions of a Dockerfile, one per logical line (continuations joined).
fn instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || (line.is_empty() && current.is_empty()) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(part) => current.push_str(part),
            None => {
                current.push_str(line);
                if let Some((op, rest)) = current.trim().split_once(char::is_whitespace) {
                    out.push((op.to_ascii_uppercase(), rest.trim().to_owned()));
                }
                current.clear();
            }
        }
    }
    out
}

#[test]
fn the_container_image_is_multi_stage_non_root_and_runs_accepted_flags() -> anyhow::Result<()> {
    let text = std::fs::read_to_string(deploy("container/Dockerfile"))?;
    let ins = instructions(&text);
    let stages: Vec<&String> = ins.iter().filter(|(op, _)| op == "FROM").map(|(_, a)| a).collect();
    ensure!(stages.len() >= 2 && stages[0].contains(" AS build"), "{stages:?}");
    let last = ins.iter().rposition(|(op, _)| op == "FROM").context("FROM")?;
    let fin = &ins[last..];
    let build = ins[..last]
        .iter()
        .find(|(op, a)| op == "RUN" && a.contains("cargo build"))
        .context("no cargo build")?;
    ensure!(
        build.1.contains("--release")
            && build.1.contains("--locked")
            && build.1.contains("ocm-hub")
            && build.1.contains("klusterlet"),
        "{}",
        build.1
    );
    ensure!(
        fin.iter().any(|(op, a)| op == "COPY" && a.starts_with("--from=build")),
        "the final stage copies the build's binaries"
    );
    ensure!(
        !fin.iter().any(|(op, a)| op == "RUN" && a.contains("cargo")),
        "the final stage has no toolchain"
    );
    let user = fin
        .iter()
        .rev()
        .find(|(op, _)| op == "USER")
        .map(|(_, a)| a.as_str())
        .context("no USER in the final stage")?;
    let uid = user.split(':').next().unwrap_or("");
    ensure!(!matches!(uid, "" | "0" | "root"), "runs as {user}");
    let json_array = |op: &str| -> anyhow::Result<Vec<String>> {
        let (_, a) = fin.iter().find(|(o, _)| o == op).with_context(|| format!("no {op}"))?;
        serde_json::from_str(a).with_context(|| format!("{op} is not exec form: {a}"))
    };
    ensure!(json_array("ENTRYPOINT")? == ["ocm-hub"]);
    let cmd = json_array("CMD")?;
    ensure!(cmd.first().map(String::as_str) == Some("serve"), "{cmd:?}");
    let args: Vec<&str> = cmd[1..].iter().map(String::as_str).collect();
    programs::check_flags(&programs::ocm_hub()?, &["serve"], &args)?;
    ensure!(
        args.windows(2).any(|w| w == ["--listen", "0.0.0.0:6443"]),
        "the hub must listen beyond the container: {args:?}"
    );
    Ok(())
}

/// `systemd-analyze verify` on a unit whose binary path points at this build's binary.
fn verify_unit(unit: &Path, installed: &str, built: &Path) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(unit)?;
    let exec = text.lines().find_map(|l| l.strip_prefix("ExecStart=")).context("no ExecStart")?;
    let words: Vec<String> = exec.split_whitespace().map(str::to_owned).collect();
    ensure!(
        words.first().map(String::as_str) == Some(installed),
        "ExecStart runs {:?}",
        words.first()
    );
    let Some(analyze) = programs::find("systemd-analyze", "OCM_SYSTEMD_ANALYZE_BIN") else {
        bail!(
            "systemd-analyze not found: run `apt-get install -y systemd`, or set OCM_SYSTEMD_ANALYZE_BIN"
        );
    };
    let dir = tempfile::tempdir()?;
    let copy = dir.path().join(unit.file_name().context("name")?);
    std::fs::write(&copy, text.replace(installed, &built.display().to_string()))?;
    let out = std::process::Command::new(analyze).arg("verify").arg(&copy).output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.success() && stderr.trim().is_empty(),
        "systemd-analyze verify {}: {stderr}",
        unit.display()
    );
    Ok(words)
}

#[test]
fn systemd_units_verify_and_run_accepted_flags() -> anyhow::Result<()> {
    let hub = verify_unit(
        &deploy("systemd/ocm-hub.service"),
        "/usr/local/bin/ocm-hub",
        &programs::ocm_hub()?,
    )?;
    ensure!(hub[1] == "serve", "{hub:?}");
    let args: Vec<&str> = hub[2..].iter().map(String::as_str).collect();
    programs::check_flags(&programs::ocm_hub()?, &["serve"], &args)?;
    let agent = verify_unit(
        &deploy("systemd/klusterlet.service"),
        "/usr/local/bin/klusterlet",
        &programs::klusterlet()?,
    )?;
    ensure!(agent[1] == "run", "{agent:?}");
    let args: Vec<&str> = agent[2..].iter().map(String::as_str).collect();
    programs::check_flags(&programs::klusterlet()?, &["run"], &args)?;
    for unit in ["systemd/ocm-hub.service", "systemd/klusterlet.service"] {
        let text = std::fs::read_to_string(deploy(unit))?;
        let user = text.lines().find_map(|l| l.strip_prefix("User="));
        let dynamic = text.lines().any(|l| l == "DynamicUser=yes");
        ensure!(dynamic || user.is_some_and(|u| !matches!(u, "root" | "0")), "{unit} runs as root");
        ensure!(
            text.contains("NoNewPrivileges=yes") && text.contains("KillSignal=SIGTERM"),
            "{unit}"
        );
    }
    Ok(())
}
