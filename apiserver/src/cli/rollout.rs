//! `ocm-hub rollout status|history|pause|resume|undo manifestworkreplicaset/NAME -n NS`, shaped
//! like `kubectl rollout`: the set's progress until it completes or stops, its revisions (the
//! ControllerRevisions it owns), pausing, and undo (an older revision's template and overrides
//! copied back into the spec, so a normal rollout follows).

use std::time::Duration;

use serde_json::{Value, json};

use ocm_proto::api::work::{LABEL_CONTROLLER_HASH, LABEL_MANIFEST_WORK_REPLICA_SET_NAME};

use crate::cli::admin::CliError;
use crate::cli::fleet::render_table;
use crate::machinery::table::age_of_field;

const SETS: &str = "/apis/work.open-cluster-management.io/v1alpha1";
const REVISIONS: &str = "/apis/apps/v1";
/// What the commands print for the set, as kubectl names a resource.
const RESOURCE: &str = "manifestworkreplicaset.work.open-cluster-management.io";

/// `manifestworkreplicaset/NAME` (also `manifestworkreplicasets/`, `mwrs/`): the set's name.
pub fn parse_target(text: &str) -> Result<String, String> {
    let (kind, name) = text
        .split_once('/')
        .ok_or_else(|| format!("{text:?} is not manifestworkreplicaset/NAME"))?;
    if !matches!(kind, "manifestworkreplicaset" | "manifestworkreplicasets" | "mwrs") {
        return Err(format!("{kind:?}: rollout works on manifestworkreplicaset/NAME"));
    }
    crate::machinery::object::check_dns_subdomain(name)
        .map_err(|e| format!("{name:?} is not an object name: {e}"))?;
    Ok(name.to_owned())
}

async fn get(client: &kube::Client, path: &str) -> Result<Value, CliError> {
    let req =
        http::Request::get(path).body(Vec::new()).map_err(|e| CliError::Usage(e.to_string()))?;
    Ok(client.request::<Value>(req).await?)
}

async fn patch(
    client: &kube::Client,
    path: &str,
    content_type: &str,
    body: &Value,
) -> Result<Value, CliError> {
    let req = http::Request::patch(path)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(serde_json::to_vec(body).unwrap_or_default())
        .map_err(|e| CliError::Usage(e.to_string()))?;
    Ok(client.request::<Value>(req).await?)
}

fn set_path(ns: &str, name: &str) -> String {
    format!("{SETS}/namespaces/{ns}/manifestworkreplicasets/{name}")
}

fn condition<'a>(set: &'a Value, type_: &str) -> Option<&'a Value> {
    set.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == type_)
}

/// Where a set's rollout stands, as one line; `Some(Ok)` once it is complete, `Some(Err)` once
/// it stopped on failures.
fn progress(name: &str, set: &Value) -> (String, Option<Result<(), String>>) {
    let s = &set["status"];
    let generation = set.pointer("/metadata/generation").and_then(Value::as_i64);
    let update = s["updateRevision"].as_str().unwrap_or_default();
    let updated = s.pointer("/summary/updated").and_then(Value::as_i64).unwrap_or(0);
    let desired = s.pointer("/summary/desiredTotal").and_then(Value::as_i64).unwrap_or(0);
    let progressing = condition(set, "Progressing");
    let reason = progressing.and_then(|c| c["reason"].as_str()).unwrap_or_default();
    let observed = progressing.and_then(|c| c["observedGeneration"].as_i64());
    if update.is_empty() || observed.is_some_and(|o| Some(o) != generation) {
        return (format!("Waiting for {name}'s rollout to be observed..."), None);
    }
    match reason {
        "NewManifestWorkAvailable" => {
            (format!("{RESOURCE}/{name} successfully rolled out"), Some(Ok(())))
        }
        "RolloutAborted" | "RolledBack" => {
            let msg = progressing.and_then(|c| c["message"].as_str()).unwrap_or_default();
            let current = s["currentRevision"].as_str().unwrap_or("none");
            let line = format!(
                "{RESOURCE}/{name}: revision {update} stopped ({reason}): {msg}; \
                 current revision {current}"
            );
            (line.clone(), Some(Err(line)))
        }
        "RolloutPaused" => {
            (format!("{RESOURCE}/{name} is paused ({updated} of {desired} clusters updated)"), None)
        }
        _ => (
            format!(
                "Waiting for rollout of {RESOURCE}/{name} to finish: {updated} of {desired} \
                 clusters updated to revision {update}..."
            ),
            None,
        ),
    }
}

/// `rollout status`: prints progress lines until the rollout completes (`Ok`), stops on
/// failures (an error), or `timeout` passes; with `watch` false, prints once.
pub async fn status(
    client: &kube::Client,
    ns: &str,
    name: &str,
    watch: bool,
    timeout: Duration,
    mut out: impl FnMut(&str),
) -> Result<(), CliError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = String::new();
    loop {
        let set = get(client, &set_path(ns, name)).await?;
        let (line, done) = progress(name, &set);
        if line != last {
            out(&line);
            last = line;
        }
        match done {
            Some(Ok(())) => return Ok(()),
            Some(Err(why)) => return Err(CliError::HubState(why)),
            None if !watch => return Ok(()),
            None if tokio::time::Instant::now() >= deadline => {
                return Err(CliError::HubState(format!(
                    "timed out waiting for {RESOURCE}/{name} to roll out"
                )));
            }
            None => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// The set's revisions, oldest first: (number, hash, object).
async fn revisions(
    client: &kube::Client,
    ns: &str,
    name: &str,
) -> Result<Vec<(i64, String, Value)>, CliError> {
    let selector = format!("{LABEL_MANIFEST_WORK_REPLICA_SET_NAME}={name}");
    let path = format!(
        "{REVISIONS}/namespaces/{ns}/controllerrevisions?labelSelector={}",
        form_urlencoded::byte_serialize(selector.as_bytes()).collect::<String>()
    );
    let list = get(client, &path).await?;
    let mut revs: Vec<(i64, String, Value)> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let hash = r.pointer("/metadata/labels").and_then(|l| l.get(LABEL_CONTROLLER_HASH));
            let hash = hash.and_then(Value::as_str).unwrap_or_default().to_owned();
            (r["revision"].as_i64().unwrap_or(0), hash, r.clone())
        })
        .collect();
    revs.sort_by_key(|(n, _, _)| *n);
    Ok(revs)
}

/// `rollout history`: a table of revisions (number, hash, clusters running it, role, age), or
/// with `revision` that revision's template and overrides as JSON.
pub async fn history(
    client: &kube::Client,
    ns: &str,
    name: &str,
    revision: Option<i64>,
) -> Result<String, CliError> {
    let set = get(client, &set_path(ns, name)).await?;
    let revs = revisions(client, ns, name).await?;
    if let Some(n) = revision {
        let (_, _, r) = revs
            .iter()
            .find(|(m, _, _)| *m == n)
            .ok_or_else(|| CliError::HubState(format!("{RESOURCE}/{name} has no revision {n}")))?;
        let text = serde_json::to_string_pretty(&r["data"]).unwrap_or_default();
        return Ok(format!("{RESOURCE}/{name} with revision #{n}\n{text}\n"));
    }
    let s = &set["status"];
    let running = |hash: &str| {
        s["clusterRevisions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["revision"] == hash)
            .and_then(|r| r["clusters"].as_array())
            .map_or(0, Vec::len)
    };
    let rows: Vec<Vec<String>> = revs
        .iter()
        .map(|(n, hash, r)| {
            let mut role = Vec::new();
            if s["currentRevision"] == hash.as_str() {
                role.push("current");
            }
            if s["updateRevision"] == hash.as_str() {
                role.push(if s["abortedTime"].is_string() { "update (aborted)" } else { "update" });
            }
            let age = age_of_field(r, "/metadata/creationTimestamp");
            vec![
                n.to_string(),
                hash.clone(),
                running(hash).to_string(),
                if role.is_empty() { "-".to_owned() } else { role.join(", ") },
                age.as_str().unwrap_or_default().to_owned(),
            ]
        })
        .collect();
    let table = render_table(&["REVISION", "HASH", "CLUSTERS", "ROLE", "AGE"], &rows);
    Ok(format!("{RESOURCE}/{name}\n{table}"))
}

/// `rollout pause` / `resume`: sets or clears `spec.paused`.
pub async fn pause(
    client: &kube::Client,
    ns: &str,
    name: &str,
    paused: bool,
) -> Result<String, CliError> {
    let body = json!({"spec": {"paused": if paused { json!(true) } else { Value::Null }}});
    patch(client, &set_path(ns, name), "application/merge-patch+json", &body).await?;
    Ok(format!("{RESOURCE}/{name} {}", if paused { "paused" } else { "resumed" }))
}

/// `rollout undo`: copies revision `to` (default: the newest before the update revision) back
/// into the spec.
pub async fn undo(
    client: &kube::Client,
    ns: &str,
    name: &str,
    to: Option<i64>,
) -> Result<String, CliError> {
    let set = get(client, &set_path(ns, name)).await?;
    let update = set.pointer("/status/updateRevision").and_then(Value::as_str).unwrap_or_default();
    let revs = revisions(client, ns, name).await?;
    let target = match to {
        Some(n) => revs.iter().find(|(m, _, _)| *m == n),
        None => revs.iter().rev().find(|(_, h, _)| h != update),
    };
    let Some((n, _, r)) = target else {
        let which = to.map_or_else(|| "earlier revision".to_owned(), |n| format!("revision {n}"));
        return Err(CliError::HubState(format!(
            "{RESOURCE}/{name} has no {which} to roll back to"
        )));
    };
    let ops = json!([
        {"op": "add", "path": "/spec/manifestWorkTemplate", "value": r["data"]["manifestWorkTemplate"]},
        {"op": "add", "path": "/spec/overrides", "value": r["data"]["overrides"]},
    ]);
    patch(client, &set_path(ns, name), "application/json-patch+json", &ops).await?;
    Ok(format!("{RESOURCE}/{name} rolled back to revision {n}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_name_the_kind_and_the_set() {
        assert_eq!(parse_target("manifestworkreplicaset/app").unwrap(), "app");
        assert_eq!(parse_target("mwrs/app").unwrap(), "app");
        assert!(parse_target("deployment/app").is_err());
        assert!(parse_target("app").is_err());
        assert!(parse_target("mwrs/Bad_Name").is_err());
    }

    #[test]
    fn progress_says_done_stopped_or_waiting() {
        let set = |reason: &str| {
            json!({"metadata": {"generation": 2}, "status": {
                "updateRevision": "abc", "currentRevision": "xyz",
                "summary": {"updated": 1, "desiredTotal": 3},
                "conditions": [{"type": "Progressing", "reason": reason, "message": "m"}]}})
        };
        assert!(matches!(progress("app", &set("NewManifestWorkAvailable")).1, Some(Ok(()))));
        assert!(matches!(progress("app", &set("RolledBack")).1, Some(Err(_))));
        let (line, done) = progress("app", &set("NewRevisionCreated"));
        assert!(done.is_none() && line.contains("1 of 3"), "{line}");
    }
}
