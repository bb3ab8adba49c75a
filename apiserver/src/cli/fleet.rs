//! The fleet commands of the hub binary, clusteradm's read and write verbs (ecosystem.md §1.1):
//! `get clusters|works|placements` as kubectl-style tables (`-o wide|json|yaml`), and `create
//! work` from a manifest file to a list of clusters or a placement's decisions, with `--wait`.
//! They talk to a running hub through the `kube` client, like every client command.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use ocm_proto::api::cluster::{LABEL_CLUSTER_SET, LABEL_PLACEMENT, v1, v1beta1};

use crate::cli::admin::CliError;
use crate::machinery::table::age_of_field;

const CLUSTERS: &str = "/apis/cluster.open-cluster-management.io/v1/managedclusters";
const WORK_GROUP_VERSION: &str = "/apis/work.open-cluster-management.io/v1";
const PLACEMENT_GROUP_VERSION: &str = "/apis/cluster.open-cluster-management.io/v1beta1";

/// How `get` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// The default table.
    Table,
    /// The table with more columns.
    Wide,
    /// A `v1` List in JSON.
    Json,
    /// A `v1` List in YAML.
    Yaml,
}

impl std::str::FromStr for Output {
    type Err = String;
    fn from_str(s: &str) -> Result<Output, String> {
        match s {
            "wide" => Ok(Output::Wide),
            "json" => Ok(Output::Json),
            "yaml" => Ok(Output::Yaml),
            _ => Err(format!("{s:?} is not an output format (wide, json, yaml)")),
        }
    }
}

/// GETs `path` (a JSON answer).
async fn get(client: &kube::Client, path: &str) -> Result<Value, CliError> {
    let req =
        http::Request::get(path).body(Vec::new()).map_err(|e| CliError::Usage(e.to_string()))?;
    Ok(client.request::<Value>(req).await?)
}

/// Sends `body` to `path` with `method`, as `content_type`.
async fn send(
    client: &kube::Client,
    method: http::Method,
    path: &str,
    content_type: &str,
    body: &Value,
) -> Result<Value, kube::Error> {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(serde_json::to_vec(body).unwrap_or_default())
        .expect("a path and a JSON body make a request");
    client.request::<Value>(req).await
}

/// Every object of a collection, page by page (500 at a time).
async fn list(client: &kube::Client, path: &str, selector: &str) -> Result<Vec<Value>, CliError> {
    let mut items = Vec::new();
    let mut token = String::new();
    loop {
        let mut query = form_urlencoded::Serializer::new(String::new());
        query.append_pair("limit", "500");
        if !selector.is_empty() {
            query.append_pair("labelSelector", selector);
        }
        if !token.is_empty() {
            query.append_pair("continue", &token);
        }
        let sep = if path.contains('?') { '&' } else { '?' };
        let page = get(client, &format!("{path}{sep}{}", query.finish())).await?;
        if let Some(list) = page.get("items").and_then(Value::as_array) {
            items.extend(list.iter().cloned());
        }
        token = page.pointer("/metadata/continue").and_then(Value::as_str).unwrap_or("").to_owned();
        if token.is_empty() {
            return Ok(items);
        }
    }
}

/// The path of a namespaced collection: one namespace's, or all of them.
fn collection(group_version: &str, namespace: Option<&str>, resource: &str) -> String {
    match namespace {
        Some(ns) => format!("{group_version}/namespaces/{ns}/{resource}"),
        None => format!("{group_version}/{resource}"),
    }
}

fn str_at<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The status of condition `kind`, empty when absent.
fn condition<'a>(obj: &'a Value, kind: &str) -> &'a str {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c.get("type").and_then(Value::as_str) == Some(kind)))
        .and_then(|c| c.get("status"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn count(obj: &Value, pointer: &str) -> String {
    obj.pointer(pointer).and_then(Value::as_array).map_or(0, Vec::len).to_string()
}

fn age(obj: &Value) -> String {
    age_of_field(obj, "/metadata/creationTimestamp").as_str().unwrap_or_default().to_owned()
}

/// A kubectl-style table: upper-case headers, columns three spaces apart, no trailing blanks.
pub fn render_table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: &mut dyn Iterator<Item = &str>, out: &mut String| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.zip(&widths).enumerate() {
            if i > 0 {
                text.push_str("   ");
            }
            text.push_str(cell);
            text.extend(std::iter::repeat_n(' ', w - cell.chars().count()));
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&mut headers.iter().copied(), &mut out);
    for row in rows {
        line(&mut row.iter().map(String::as_str), &mut out);
    }
    out
}

/// What `get` prints for `items`: a List for json/yaml, else the table of `columns`.
fn print(
    items: Vec<Value>,
    output: Output,
    columns: &[(&str, bool)],
    row: impl Fn(&Value) -> Vec<String>,
) -> Result<String, CliError> {
    let wide = output == Output::Wide;
    match output {
        Output::Json | Output::Yaml => {
            let list = json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                              "items": items});
            if output == Output::Json {
                Ok(format!("{}\n", serde_json::to_string_pretty(&list).unwrap_or_default()))
            } else {
                serde_saphyr::to_string(&list)
                    .map_err(|e| CliError::HubState(format!("printing YAML: {e}")))
            }
        }
        Output::Table | Output::Wide => {
            if items.is_empty() {
                return Ok(String::new());
            }
            let keep: Vec<bool> = columns.iter().map(|(_, w)| wide || !w).collect();
            let headers: Vec<&str> =
                columns.iter().zip(&keep).filter(|(_, k)| **k).map(|((h, _), _)| *h).collect();
            let rows: Vec<Vec<String>> = items
                .iter()
                .map(|i| {
                    row(i).into_iter().zip(&keep).filter(|(_, k)| **k).map(|(c, _)| c).collect()
                })
                .collect();
            Ok(render_table(&headers, &rows))
        }
    }
}

/// `get clusters`: name, accepted, available, cluster set, CPU, memory, Kubernetes version,
/// age; wide adds joined, the first URL, taints and claims.
pub async fn get_clusters(client: &kube::Client, output: Output) -> Result<String, CliError> {
    let items = list(client, CLUSTERS, "").await?;
    let columns = [
        ("NAME", false),
        ("ACCEPTED", false),
        ("AVAILABLE", false),
        ("CLUSTERSET", false),
        ("CPU", false),
        ("MEMORY", false),
        ("KUBERNETES VERSION", false),
        ("JOINED", true),
        ("URL", true),
        ("TAINTS", true),
        ("CLAIMS", true),
        ("AGE", false),
    ];
    print(items, output, &columns, |mc| {
        let accepted = mc.pointer("/spec/hubAcceptsClient").and_then(Value::as_bool) == Some(true);
        vec![
            str_at(mc, "/metadata/name").to_owned(),
            accepted.to_string(),
            condition(mc, v1::CONDITION_AVAILABLE).to_owned(),
            mc.pointer("/metadata/labels")
                .and_then(|l| l.get(LABEL_CLUSTER_SET))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            str_at(mc, "/status/capacity/cpu").to_owned(),
            str_at(mc, "/status/capacity/memory").to_owned(),
            str_at(mc, "/status/version/kubernetes").to_owned(),
            condition(mc, v1::CONDITION_JOINED).to_owned(),
            str_at(mc, "/spec/managedClusterClientConfigs/0/url").to_owned(),
            count(mc, "/spec/taints"),
            count(mc, "/status/clusterClaims"),
            age(mc),
        ]
    })
}

/// `get works`: per cluster namespace (all clusters, or one): name, cluster, manifests,
/// applied, available, age; wide adds degraded, progressing and the resources reported.
pub async fn get_works(
    client: &kube::Client,
    cluster: Option<&str>,
    output: Output,
) -> Result<String, CliError> {
    let items = list(client, &collection(WORK_GROUP_VERSION, cluster, "manifestworks"), "").await?;
    let columns = [
        ("NAME", false),
        ("CLUSTER", false),
        ("MANIFESTS", false),
        ("APPLIED", false),
        ("AVAILABLE", false),
        ("DEGRADED", true),
        ("PROGRESSING", true),
        ("RESOURCES", true),
        ("AGE", false),
    ];
    print(items, output, &columns, |w| {
        vec![
            str_at(w, "/metadata/name").to_owned(),
            str_at(w, "/metadata/namespace").to_owned(),
            count(w, "/spec/workload/manifests"),
            condition(w, "Applied").to_owned(),
            condition(w, "Available").to_owned(),
            condition(w, "Degraded").to_owned(),
            condition(w, "Progressing").to_owned(),
            count(w, "/status/resourceStatus/manifests"),
            age(w),
        ]
    })
}

/// `get placements`: namespace, name, clusters selected, satisfied, decision groups, age; wide
/// adds the cluster sets and the misconfiguration.
pub async fn get_placements(
    client: &kube::Client,
    namespace: Option<&str>,
    output: Output,
) -> Result<String, CliError> {
    let items =
        list(client, &collection(PLACEMENT_GROUP_VERSION, namespace, "placements"), "").await?;
    let columns = [
        ("NAMESPACE", false),
        ("NAME", false),
        ("SELECTED", false),
        ("SATISFIED", false),
        ("GROUPS", false),
        ("CLUSTERSETS", true),
        ("MISCONFIGURED", true),
        ("AGE", false),
    ];
    print(items, output, &columns, |p| {
        let sets = p
            .pointer("/spec/clusterSets")
            .and_then(Value::as_array)
            .map(|s| s.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(","))
            .unwrap_or_default();
        let selected = p.pointer("/status/numberOfSelectedClusters").and_then(Value::as_i64);
        vec![
            str_at(p, "/metadata/namespace").to_owned(),
            str_at(p, "/metadata/name").to_owned(),
            selected.map(|n| n.to_string()).unwrap_or_default(),
            condition(p, v1beta1::CONDITION_PLACEMENT_SATISFIED).to_owned(),
            count(p, "/status/decisionGroups"),
            sets,
            condition(p, v1beta1::CONDITION_PLACEMENT_MISCONFIGURED).to_owned(),
            age(p),
        ]
    })
}

/// The objects of a manifest file: YAML documents or JSON, a `List` spread into its items.
/// Each must name its `apiVersion`, `kind` and `metadata.name`.
pub fn read_manifests(text: &str) -> Result<Vec<Value>, CliError> {
    let bad = |why: String| CliError::Usage(format!("the manifest file: {why}"));
    let docs: Vec<Value> = match serde_json::from_str::<Value>(text) {
        Ok(v) => vec![v],
        Err(_) => serde_saphyr::from_multiple::<Value>(text).map_err(|e| bad(e.to_string()))?,
    };
    let mut out = Vec::new();
    for doc in docs.into_iter().filter(|d| !d.is_null()) {
        let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
        let items = match doc.get("items").and_then(Value::as_array) {
            Some(items) if kind.ends_with("List") => items.clone(),
            _ => vec![doc],
        };
        for (i, item) in items.into_iter().enumerate() {
            for field in ["/apiVersion", "/kind", "/metadata/name"] {
                if str_at(&item, field).is_empty() {
                    return Err(bad(format!(
                        "object {} has no {}",
                        out.len() + i + 1,
                        &field[1..].replace('/', ".")
                    )));
                }
            }
            out.push(item);
        }
    }
    if out.is_empty() {
        return Err(bad("no objects in it".into()));
    }
    Ok(out)
}

/// Where `create work` sends a work.
#[derive(Debug, Clone)]
pub enum Targets {
    /// These clusters.
    Clusters(Vec<String>),
    /// The clusters a placement decided on.
    Placement {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

/// The clusters `targets` name, each checked to be a ManagedCluster of the hub.
pub async fn resolve_targets(
    client: &kube::Client,
    targets: &Targets,
) -> Result<Vec<String>, CliError> {
    let clusters = match targets {
        Targets::Clusters(c) => c.clone(),
        Targets::Placement { namespace, name } => {
            let placement =
                format!("{PLACEMENT_GROUP_VERSION}/namespaces/{namespace}/placements/{name}");
            if let Err(e) = get(client, &placement).await {
                return Err(not_found_as(
                    e,
                    format!("placement {namespace}/{name} does not exist"),
                ));
            }
            let path = collection(PLACEMENT_GROUP_VERSION, Some(namespace), "placementdecisions");
            let mut names: Vec<String> = list(client, &path, &format!("{LABEL_PLACEMENT}={name}"))
                .await?
                .iter()
                .flat_map(|d| {
                    d.pointer("/status/decisions")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default()
                })
                .filter_map(|d| d.get("clusterName").and_then(Value::as_str).map(str::to_owned))
                .collect();
            names.sort();
            names.dedup();
            if names.is_empty() {
                return Err(CliError::HubState(format!(
                    "placement {namespace}/{name} selects no clusters yet (see `kubectl get --raw {PLACEMENT_GROUP_VERSION}/namespaces/{namespace}/placements/{name}/explain`)"
                )));
            }
            names
        }
    };
    let mut clusters = clusters;
    clusters.sort();
    clusters.dedup();
    // Two lists, whatever the number of clusters: known clusters, and their namespaces (which
    // acceptance creates; works live there).
    let known: std::collections::BTreeSet<String> = list(client, CLUSTERS, "")
        .await?
        .iter()
        .map(|mc| str_at(mc, "/metadata/name").to_owned())
        .collect();
    if let Some(c) = clusters.iter().find(|c| !known.contains(*c)) {
        return Err(CliError::HubState(format!("cluster {c} is not a ManagedCluster of this hub")));
    }
    let namespaces: std::collections::BTreeSet<String> = list(client, "/api/v1/namespaces", "")
        .await?
        .iter()
        .map(|ns| str_at(ns, "/metadata/name").to_owned())
        .collect();
    if let Some(c) = clusters.iter().find(|c| !namespaces.contains(*c)) {
        return Err(CliError::HubState(format!(
            "cluster {c} is not accepted yet: it has no namespace (run `ocm-hub accept {c}`)"
        )));
    }
    Ok(clusters)
}

/// `e` as `message` when it is a 404, else as it is.
fn not_found_as(e: CliError, message: String) -> CliError {
    match e {
        CliError::Hub(kube::Error::Api(s)) if s.code == 404 => CliError::HubState(message),
        e => e,
    }
}

/// Creates ManifestWork `name` of `manifests` in each cluster's namespace; with `overwrite`, an
/// existing one gets the new manifests (the rest of its spec is kept), otherwise it is an
/// error. `step` hears one line per cluster. Returns each work's `metadata.generation`.
pub async fn create_work(
    client: &kube::Client,
    name: &str,
    manifests: &[Value],
    clusters: &[String],
    overwrite: bool,
    mut step: impl FnMut(String),
) -> Result<BTreeMap<String, i64>, CliError> {
    let mut generations = BTreeMap::new();
    for c in clusters {
        let works = collection(WORK_GROUP_VERSION, Some(c), "manifestworks");
        let work = json!({"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
                          "metadata": {"name": name, "namespace": c},
                          "spec": {"workload": {"manifests": manifests}}});
        let written = match send(client, http::Method::POST, &works, JSON, &work).await {
            Ok(w) => {
                step(format!("manifestwork {c}/{name} created"));
                w
            }
            Err(kube::Error::Api(s)) if s.code == 409 && overwrite => {
                // A merge patch of the manifests alone: no resourceVersion to lose a race with
                // the agent's status writes, and the delete option and configs stay.
                let patch = json!({"spec": {"workload": {"manifests": manifests}}});
                let w =
                    send(client, http::Method::PATCH, &format!("{works}/{name}"), MERGE, &patch)
                        .await?;
                step(format!("manifestwork {c}/{name} updated"));
                w
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                return Err(CliError::HubState(format!(
                    "manifestwork {c}/{name} already exists (--overwrite replaces its manifests)"
                )));
            }
            Err(e) => return Err(e.into()),
        };
        let generation =
            written.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0);
        generations.insert(c.clone(), generation);
    }
    Ok(generations)
}

const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";

/// Whether a work's agent applied its generation `generation`: `Applied` is True and observed
/// at least that generation.
fn applied(work: &Value, generation: i64) -> bool {
    work.pointer("/status/conditions").and_then(Value::as_array).is_some_and(|cs| {
        cs.iter().any(|c| {
            c.get("type").and_then(Value::as_str) == Some("Applied")
                && c.get("status").and_then(Value::as_str) == Some("True")
                && c.get("observedGeneration").and_then(Value::as_i64).unwrap_or(0) >= generation
        })
    })
}

/// Waits until work `name` is applied at the generation written to each cluster, telling
/// `progress` how many are, until `timeout`. One list per poll, whatever the number of clusters.
pub async fn wait_applied(
    client: &kube::Client,
    name: &str,
    generations: &BTreeMap<String, i64>,
    timeout: Duration,
    mut progress: impl FnMut(usize, usize),
) -> Result<(), CliError> {
    let until = tokio::time::Instant::now() + timeout;
    let path = collection(WORK_GROUP_VERSION, None, "manifestworks");
    let mut query = form_urlencoded::Serializer::new(String::new());
    query.append_pair("fieldSelector", &format!("metadata.name={name}"));
    let path = format!("{path}?{}", query.finish());
    loop {
        let done: std::collections::BTreeSet<String> = list(client, &path, "")
            .await?
            .iter()
            .filter(|w| {
                let ns = str_at(w, "/metadata/namespace");
                generations.get(ns).is_some_and(|g| applied(w, *g))
            })
            .map(|w| str_at(w, "/metadata/namespace").to_owned())
            .collect();
        progress(done.len(), generations.len());
        if done.len() == generations.len() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= until {
            let waiting: Vec<&str> =
                generations.keys().filter(|c| !done.contains(*c)).map(String::as_str).collect();
            return Err(CliError::HubState(format!(
                "timed out after {}s: manifestwork {name} not applied yet on {} (is each cluster's agent running? `ocm-hub get works -o wide` shows the conditions)",
                timeout.as_secs(),
                waiting.join(", ")
            )));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_like_kubectl() {
        let t = render_table(
            &["NAME", "ACCEPTED", "AGE"],
            &[
                vec!["c1".into(), "true".into(), "5s".into()],
                vec!["cluster-2".into(), "".into(), "".into()],
            ],
        );
        assert_eq!(t, "NAME        ACCEPTED   AGE\nc1          true       5s\ncluster-2\n");
    }

    #[test]
    fn manifests_are_read_from_yaml_json_and_lists() {
        let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: b}}\n";
        let objs = read_manifests(yaml).unwrap();
        assert_eq!(objs.len(), 2);
        assert_eq!(objs[1]["kind"], "Secret");
        let json = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"}}"#;
        assert_eq!(read_manifests(json).unwrap().len(), 1);
        let err = read_manifests("apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n").unwrap_err();
        assert_eq!(err.to_string(), "the manifest file: object 1 has no metadata.name");
        assert!(read_manifests("").is_err());
        assert!(read_manifests("a: [").is_err());
    }

    #[test]
    fn outputs_parse() {
        assert_eq!("wide".parse::<Output>().unwrap(), Output::Wide);
        assert!("table".parse::<Output>().is_err());
    }
}
