//! The console benchmark (`BENCHMARKS.md`): a hub as an `ocm-hub serve` process on sled with
//! `--clusters` accepted ManagedClusters, all Available, whose Leases are renewed every 60 s
//! (OCM's default) spread evenly, as their agents would. Signed in as a user would be (a
//! service account's token), it times the fleet page's requests the way a browser makes them
//! (the shell, its script and style, and the clusters' Table gzipped): server time to first
//! byte and the bytes on the wire, `--samples` times each. Then, with `--browser`, headless
//! Chromium opens the page (`conformance/console/fleet-bench.mjs`): the time until every tile is
//! drawn, the page's weight as the browser counts it, and how long availability changes made
//! at `--rates` per second take to show in the open page, all while the renewals run.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use ocm_conformance::hub::anonymous_http;
use ocm_conformance::replicas::Replica;
use ocm_conformance::simfleet::{MANAGED_CLUSTERS as MC, make_fleet, renew};
use serde_json::{Value, json};

#[derive(Parser)]
struct Args {
    /// Clusters in the fleet.
    #[arg(long, default_value_t = 10_000)]
    clusters: usize,
    /// Timed fetches of each of the page's requests.
    #[arg(long, default_value_t = 20)]
    samples: usize,
    /// Run the browser part (Chromium through playwright-core).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    browser: bool,
    /// Availability changes per second made while the page is open, one run each.
    #[arg(long, default_value = "10,100,500")]
    rates: String,
    /// How long each rate runs, in seconds.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
}

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io, application/json";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    ocm_apiserver::serve::server::raise_open_file_limit();
    let hub = Replica::start_sled(&[]).await?;
    let admin = hub.http()?;
    let base = hub.url();
    println!("console-bench: {} clusters, {} samples", args.clusters, args.samples);

    let started = Instant::now();
    make_fleet(&admin, &base, args.clusters).await?;
    println!("fleet made in {:.1} s", started.elapsed().as_secs_f64());
    let stop = Arc::new(AtomicBool::new(false));
    let renewals =
        tokio::spawn(renew(admin.clone(), base.clone(), args.clusters, Arc::clone(&stop)));

    let token = token(&admin, &base).await?;
    let browser = anonymous_http(hub.path())?;
    let cookie = sign_in(&browser, &base, &token).await?;
    page_requests(&browser, &base, &cookie, args.samples).await?;

    if args.browser {
        in_browser(&hub, &token, &args).await?;
    }
    stop.store(true, Ordering::Relaxed);
    let (renewed, lasted) = renewals.await??;
    println!(
        "lease renewals during the run: {renewed} in {:.0} s ({:.0}/s)",
        lasted.as_secs_f64(),
        renewed as f64 / lasted.as_secs_f64()
    );
    Ok(())
}

/// A service account `console-bench` bound to cluster-admin, and a token for it (what
/// `kubectl create token` asks for).
async fn token(admin: &reqwest::Client, base: &str) -> anyhow::Result<String> {
    let sa = json!({"metadata": {"name": "console-bench", "namespace": "default"}});
    admin
        .post(format!("{base}/api/v1/namespaces/default/serviceaccounts"))
        .json(&sa)
        .send()
        .await?;
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "console-bench"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "console-bench", "namespace": "default"}]});
    admin
        .post(format!("{base}/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"))
        .json(&binding)
        .send()
        .await?
        .bytes()
        .await?;
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600}});
    let r = admin
        .post(format!("{base}/api/v1/namespaces/default/serviceaccounts/console-bench/token"))
        .json(&request)
        .send()
        .await?;
    let body: Value = r.json().await?;
    body.pointer("/status/token")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .with_context(|| format!("no token: {body}"))
}

/// Signs in as a browser's form does; returns the `Cookie` header value of the session.
async fn sign_in(http: &reqwest::Client, base: &str, token: &str) -> anyhow::Result<String> {
    let form: String =
        form_urlencoded::Serializer::new(String::new()).append_pair("token", token).finish();
    let r = http
        .post(format!("{base}/ui/login"))
        .header("origin", base)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await?;
    anyhow::ensure!(r.status() == 303, "sign-in answered {}", r.status());
    let cookie = r
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .context("no session cookie")?;
    Ok(cookie.to_owned())
}

/// One timed request: time to the answer's head, time to its end, bytes on the wire.
async fn timed(
    http: &reqwest::Client,
    url: &str,
    cookie: &str,
    accept: &str,
) -> anyhow::Result<(Duration, Duration, usize)> {
    let t = Instant::now();
    let r = http
        .get(url)
        .header("cookie", cookie)
        .header("accept", accept)
        .header("accept-encoding", "gzip")
        .header("sec-fetch-site", "same-origin")
        .send()
        .await?;
    let head = t.elapsed();
    anyhow::ensure!(r.status().is_success(), "GET {url}: {}", r.status());
    let bytes = r.bytes().await?.len();
    Ok((head, t.elapsed(), bytes))
}

fn median(v: &mut [Duration]) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1000.0
}

/// The fleet page's four requests, each timed `samples` times: medians and the largest.
async fn page_requests(
    http: &reqwest::Client,
    base: &str,
    cookie: &str,
    samples: usize,
) -> anyhow::Result<()> {
    let requests = [
        ("page /ui/", "/ui/".to_owned(), "text/html"),
        ("script", "/ui/static/console.js".to_owned(), "*/*"),
        ("style", "/ui/static/console.css".to_owned(), "text/css"),
        ("clusters Table", format!("/ui/api{MC}?includeObject=None"), TABLE),
    ];
    let mut total_bytes = 0;
    let mut total_server = 0.0;
    for (what, path, accept) in requests {
        let (mut heads, mut ends, mut bytes) = (Vec::new(), Vec::new(), 0);
        for _ in 0..samples {
            let (head, end, b) = timed(http, &format!("{base}{path}"), cookie, accept).await?;
            heads.push(head);
            ends.push(end);
            bytes = b;
        }
        let worst = ends.iter().max().copied().unwrap_or_default().as_secs_f64() * 1000.0;
        let (head, end) = (median(&mut heads), median(&mut ends));
        println!(
            "{what:<15} first byte {head:>7.1} ms  whole {end:>7.1} ms (max {worst:.1})  {bytes:>9} bytes on the wire"
        );
        total_bytes += bytes;
        total_server += end;
    }
    println!(
        "fleet page total: {:.1} ms of server time (medians, in turn), {:.2} MiB transferred",
        total_server,
        total_bytes as f64 / (1024.0 * 1024.0)
    );
    Ok(())
}

/// The browser part: `fleet-bench.mjs` in headless Chromium; its lines printed as they are.
async fn in_browser(hub: &Replica, token: &str, args: &Args) -> anyhow::Result<()> {
    let b = ocm_conformance::browser::require("the browser part")?
        .context("the browser part was skipped (OCM_SKIP_BROWSER=1): run with --browser false")?;
    let out = tokio::process::Command::new(&b.node)
        .arg("fleet-bench.mjs")
        .current_dir(&b.dir)
        .env("HUB", hub.url())
        .env("TOKEN", token)
        .env("CHROMIUM", &b.chromium)
        .env("CLUSTERS", args.clusters.to_string())
        .env("PREFIX", "cl-")
        .env("RATES", &args.rates)
        .env("SECONDS", args.seconds.to_string())
        .env("NODE_EXTRA_CA_CERTS", hub.path().join("pki/ca.crt"))
        .kill_on_drop(true)
        .output()
        .await?;
    print!("{}", String::from_utf8_lossy(&out.stdout));
    anyhow::ensure!(
        out.status.success(),
        "fleet-bench.mjs failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}
