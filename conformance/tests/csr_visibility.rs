//! A cluster's agent sees only its own cluster's CertificateSigningRequests (stricter than
//! OCM, whose RBAC lets every agent read every CSR): lists, watches and gets by name, with the
//! agents' real RBAC. A CSR belongs to the cluster whose agent identity requested it (the
//! server-set `spec.username`), whatever its cluster-name label says.

use anyhow::{Context as _, ensure};
use futures::StreamExt as _;
use ocm_apiserver::auth::cluster_rbac::{agent_group, agent_user, cluster_objects, shared_roles};
use ocm_conformance::hub::{Backend, TestHub};
use serde_json::{Value, json};

const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";

/// A CSR labelled for `label`, its request naming `cn` (what the approver would check; here only
/// who creates it matters).
fn csr(label: &str, cn: &str) -> anyhow::Result<Value> {
    ocm_conformance::csr::client_csr(None, label, cn, &[])
}

/// Creates `body` as `client`; its name.
async fn create(hub: &TestHub, client: &reqwest::Client, body: &Value) -> anyhow::Result<String> {
    let (code, created) = hub.call(client, reqwest::Method::POST, CSRS, Some(body), &[]).await?;
    ensure!(code == 201, "{code} {created}");
    Ok(created["metadata"]["name"].as_str().context("no name")?.to_owned())
}

/// The names a list by `client` answers (`query` appended).
async fn listed(
    hub: &TestHub,
    client: &reqwest::Client,
    query: &str,
) -> anyhow::Result<Vec<String>> {
    let (code, list) =
        hub.call(client, reqwest::Method::GET, &format!("{CSRS}{query}"), None, &[]).await?;
    ensure!(code == 200, "{code} {list}");
    let mut names: Vec<String> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    names.sort();
    Ok(names)
}

/// A watch by `client` from now on: its events, (type, name), as they come.
async fn watch(
    hub: &TestHub,
    client: &reqwest::Client,
) -> anyhow::Result<tokio::sync::mpsc::UnboundedReceiver<(String, String)>> {
    let (_, list) = hub.call(client, reqwest::Method::GET, CSRS, None, &[]).await?;
    let rv = list["metadata"]["resourceVersion"].as_str().context("no resourceVersion")?;
    let resp =
        client.get(format!("{}{CSRS}?watch=true&resourceVersion={rv}", hub.url)).send().await?;
    ensure!(resp.status() == 200, "watch: {}", resp.status());
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut body = resp.bytes_stream();
        let mut buf = Vec::new();
        while let Some(Ok(chunk)) = body.next().await {
            buf.extend_from_slice(&chunk);
            while let Some(at) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=at).collect();
                let Ok(ev) = serde_json::from_slice::<Value>(&line) else { continue };
                let name = ev["object"]["metadata"]["name"].as_str().unwrap_or("").to_owned();
                let kind = ev["type"].as_str().unwrap_or("").to_owned();
                if tx.send((kind, name)).is_err() {
                    return;
                }
            }
        }
    });
    Ok(rx)
}

/// The events of `rx` up to and including `marker`'s ADDED (events come in revision order, so
/// everything written before the marker has been sent by then).
async fn events_until(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<(String, String)>,
    marker: &str,
) -> anyhow::Result<Vec<(String, String)>> {
    let mut seen = Vec::new();
    loop {
        let ev = tokio::time::timeout(std::time::Duration::from_secs(30), rx.recv())
            .await
            .context("the watch did not send the marker")?
            .context("the watch ended")?;
        let done = ev.0 == "ADDED" && ev.1 == marker;
        seen.push(ev);
        if done {
            return Ok(seen);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_lists_watches_and_gets_only_its_own_clusters_requests() -> anyhow::Result<()> {
    let hub = TestHub::start(Backend::Memory).await?;
    let admin = hub.http()?;
    for ns in ["c1", "c2"] {
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        let (code, _) =
            hub.call(&admin, reqwest::Method::POST, "/api/v1/namespaces", Some(&body), &[]).await?;
        ensure!(code == 201, "namespace {ns}: {code}");
    }
    // The agents' real RBAC: every agent may list and watch CSRs cluster-wide.
    let rbac = shared_roles()
        .into_iter()
        .chain(["c1", "c2"].iter().flat_map(|c| cluster_objects(c, true)));
    hub.create_rbac(rbac).await?;
    let c1 = hub.http_as(&agent_user("c1", "agent-a"), Some(&agent_group("c1")))?;
    let c2 = hub.http_as(&agent_user("c2", "agent-b"), Some(&agent_group("c2")))?;
    let mut c1_events = watch(&hub, &c1).await?;
    let mut c2_events = watch(&hub, &c2).await?;

    let c1_own = create(&hub, &c1, &csr("c1", &agent_user("c1", "agent-a"))?).await?;
    // c2 labels a request c1's: it is still c2's (its requester).
    let c2_forged = create(&hub, &c2, &csr("c1", &agent_user("c1", "agent-a"))?).await?;
    let c2_own = create(&hub, &c2, &csr("c2", &agent_user("c2", "agent-b"))?).await?;
    // An admin's request for c1 is not c1's agents' either.
    let by_admin = create(&hub, &admin, &csr("c1", &agent_user("c1", "agent-a"))?).await?;
    // A change to c1's request is not sent to c2 either.
    let label = json!({"metadata": {"labels": {"touched": "yes"}}});
    let (code, _) = hub
        .call(
            &admin,
            reqwest::Method::PATCH,
            &format!("{CSRS}/{c1_own}"),
            Some(&label),
            &[("content-type", "application/merge-patch+json")],
        )
        .await?;
    ensure!(code == 200, "patch: {code}");
    let c2_marker = create(&hub, &c2, &csr("c2", &agent_user("c2", "agent-b"))?).await?;
    let c1_marker = create(&hub, &c1, &csr("c1", &agent_user("c1", "agent-a"))?).await?;

    let mut want_c2 = vec![c2_forged.clone(), c2_own.clone(), c2_marker.clone()];
    want_c2.sort();
    ensure!(listed(&hub, &c2, "").await? == want_c2, "c2 lists {:?}", listed(&hub, &c2, "").await?);
    let mut want_c1 = vec![c1_own.clone(), c1_marker.clone()];
    want_c1.sort();
    ensure!(listed(&hub, &c1, "").await? == want_c1, "c1 lists {:?}", listed(&hub, &c1, "").await?);
    // Selecting by the label gives c2 only its own forged request.
    let by_label =
        listed(&hub, &c2, "?labelSelector=open-cluster-management.io/cluster-name%3Dc1").await?;
    ensure!(by_label == [c2_forged.clone()], "{by_label:?}");
    ensure!(listed(&hub, &admin, "").await?.len() == 6, "the admin sees every request");
    // Pages hold only visible items (possibly fewer than their limit), and together all of them.
    let (mut paged, mut cont) = (Vec::new(), String::new());
    loop {
        let path = format!("{CSRS}?limit=1&continue={cont}");
        let (code, page) = hub.call(&c2, reqwest::Method::GET, &path, None, &[]).await?;
        ensure!(code == 200, "{code} {page}");
        for item in page["items"].as_array().into_iter().flatten() {
            paged.push(item["metadata"]["name"].as_str().unwrap_or("").to_owned());
        }
        match page["metadata"]["continue"].as_str().filter(|c| !c.is_empty()) {
            Some(c) => cont = c.to_owned(),
            None => break,
        }
    }
    paged.sort();
    ensure!(paged == want_c2, "c2's pages hold {paged:?}");

    let seen = events_until(&mut c2_events, &c2_marker).await?;
    let names: Vec<&str> = seen.iter().map(|(_, n)| n.as_str()).collect();
    ensure!(names == [&c2_forged, &c2_own, &c2_marker], "c2's watch sent {seen:?}");
    let seen = events_until(&mut c1_events, &c1_marker).await?;
    let expected = [
        ("ADDED".to_owned(), c1_own.clone()),
        ("MODIFIED".to_owned(), c1_own.clone()),
        ("ADDED".to_owned(), c1_marker.clone()),
    ];
    ensure!(seen == expected, "c1's watch sent {seen:?}");

    // Another cluster's request by name does not exist for an agent.
    for name in [&c1_own, &by_admin] {
        let (code, body) =
            hub.call(&c2, reqwest::Method::GET, &format!("{CSRS}/{name}"), None, &[]).await?;
        ensure!(code == 404 && body["reason"] == "NotFound", "c2 got {name}: {code} {body}");
    }
    let (code, _) =
        hub.call(&c1, reqwest::Method::GET, &format!("{CSRS}/{c1_own}"), None, &[]).await?;
    ensure!(code == 200, "c1 reads its own request: {code}");
    hub.stop().await;
    Ok(())
}
