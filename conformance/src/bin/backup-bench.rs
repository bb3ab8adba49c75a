//! The backup and restore benchmark (`BENCHMARKS.md`): a store of N ConfigMaps written straight
//! into the hub's store (sled in its data dir, or its etcd prefix), an `ocm-hub serve` process
//! over it, then `ocm-hub backup` timed from spawn to exit (each run a new file), and
//! `ocm-hub restore` of that file timed likewise into a fresh sled data dir and into a fresh
//! etcd (started before the clock runs). Also reported: the file's size, the hub's peak RSS
//! growth while it streams (its peak reset before each backup) and the backup command's own
//! peak RSS (sampled). Prints each run and the medians as Markdown.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use bytes::Bytes;
use clap::Parser;
use ocm_conformance::etcd::EtcdServer;
use ocm_conformance::hub::proc_status_kib;
use ocm_storage::{Engine, EtcdOptions, SledOptions, Storage, Write};

#[derive(Parser, Debug)]
#[command(about = "Measures ocm-hub backup and restore")]
struct Args {
    /// The `ocm-hub` binary.
    #[arg(long)]
    hub: PathBuf,
    /// ConfigMaps in the store.
    #[arg(long, default_value_t = 100_000)]
    objects: usize,
    /// Bytes of data per ConfigMap (its JSON is about 250 bytes more).
    #[arg(long, default_value_t = 1024)]
    value_bytes: usize,
    /// Runs of each measurement (the medians are reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Also back up a hub on etcd (the restores into etcd run either way).
    #[arg(long)]
    etcd_source: bool,
}

/// A ConfigMap's stored JSON, as the registry writes one.
fn configmap(i: usize, ns: &str, name: &str, data: &str) -> Bytes {
    let obj = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "uid": format!("00000000-0000-4000-8000-{i:012}"),
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "data": {"v": data},
    });
    Bytes::from(serde_json::to_vec(&obj).expect("JSON"))
}

/// Writes `n` ConfigMaps (100 namespaces) into `engine`'s store, 128 to a commit.
async fn fill(engine: Engine, n: usize, value_bytes: usize) -> anyhow::Result<()> {
    let store = Storage::open(engine).await?;
    let data = ocm_conformance::data::letters(value_bytes, 11);
    let mut writes = Vec::new();
    for i in 0..n {
        let (ns, name) = (format!("bench-{:03}", i % 100), format!("cm-{i:07}"));
        let key = format!("/registry/core/configmaps/{ns}/{name}");
        writes.push(Write::Create { key, value: configmap(i, &ns, &name, &data) });
        if writes.len() == 128 || i + 1 == n {
            store.commit(std::mem::take(&mut writes)).await?;
        }
    }
    Ok(())
}

/// An `ocm-hub serve` process, stopped on drop.
struct Hub {
    child: std::process::Child,
}

impl Drop for Hub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn serve(hub: &Path, dir: &Path, etcd: Option<&str>) -> anyhow::Result<Hub> {
    let mut cmd = std::process::Command::new(hub);
    cmd.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--grpc-listen",
        "127.0.0.1:0",
        "--controllers=-*",
    ])
    .arg("--data-dir")
    .arg(dir)
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(dir.with_extension("log"))?);
    if let Some(endpoint) = etcd {
        cmd.args(["--storage", "etcd", "--etcd-endpoints", endpoint]);
    }
    let child = cmd.spawn()?;
    let mut hub = Hub { child };
    let endpoints = dir.join("endpoints.json");
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut http = None;
    loop {
        let log = || std::fs::read_to_string(dir.with_extension("log")).unwrap_or_default();
        ensure!(Instant::now() < deadline, "the hub did not serve within 300 s: {}", log());
        if let Some(status) = hub.child.try_wait()? {
            anyhow::bail!("the hub exited with {status}: {}", log());
        }
        if http.is_none() && dir.join("pki/ca.crt").is_file() {
            http = Some(client_trusting(&dir.join("pki/ca.crt"))?);
        }
        if let (Some(http), Ok(text)) = (&http, std::fs::read_to_string(&endpoints)) {
            let url: serde_json::Value = serde_json::from_str(&text)?;
            let url = url["https"].as_str().context("https")?;
            if let Ok(r) = http.get(format!("{url}/readyz")).send().await {
                if r.status() == 200 {
                    return Ok(hub);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An HTTPS client trusting the CA in `ca` only.
fn client_trusting(ca: &Path) -> anyhow::Result<reqwest::Client> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca)? {
        roots.add(cert?)?;
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(reqwest::Client::builder().use_preconfigured_tls(config).build()?)
}

/// Runs `ocm-hub args`: its wall time and its peak RSS (KiB) as last sampled.
async fn timed(hub: &Path, args: &[&str]) -> anyhow::Result<(f64, u64)> {
    let start = Instant::now();
    let mut child = tokio::process::Command::new(hub)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let pid = child.id().context("pid")?;
    let mut peak = 0;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status?,
            () = tokio::time::sleep(Duration::from_millis(20)) => {
                if let Ok(kib) = proc_status_kib(pid, "VmHWM") {
                    peak = kib;
                }
            }
        }
    };
    let elapsed = start.elapsed().as_secs_f64();
    if !status.success() {
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            tokio::io::AsyncReadExt::read_to_string(&mut e, &mut err).await?;
        }
        anyhow::bail!("ocm-hub {}: {status}: {err}", args.join(" "));
    }
    Ok((elapsed, peak))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn runs(v: &[f64]) -> String {
    v.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>().join(", ")
}

/// Backs up the hub serving `dir` `n` times: the last file, and the rows' figures.
async fn backups(
    args: &Args,
    dir: &Path,
    hub: &Hub,
    out: &Path,
) -> anyhow::Result<(PathBuf, Vec<f64>, Vec<u64>, Vec<u64>)> {
    let (mut secs, mut hub_growth, mut cli_peak) = (Vec::new(), Vec::new(), Vec::new());
    let file = out.join("hub.backup");
    for _ in 0..args.runs {
        let _ = std::fs::remove_file(&file);
        let pid = hub.child.id();
        // Linux: writing 5 to clear_refs sets the peak (VmHWM) back to the current RSS.
        std::fs::write(format!("/proc/{pid}/clear_refs"), "5").context("reset peak RSS")?;
        let before = proc_status_kib(pid, "VmRSS")?;
        let (to, data_dir) = (file.display().to_string(), dir.display().to_string());
        let (t, peak) = timed(&args.hub, &["backup", "--to", &to, "--data-dir", &data_dir]).await?;
        secs.push(t);
        hub_growth.push(proc_status_kib(pid, "VmHWM")?.saturating_sub(before));
        cli_peak.push(peak);
    }
    Ok((file, secs, hub_growth, cli_peak))
}

/// Restores `file` `runs` times into fresh sled data dirs, or fresh etcds.
async fn restores(args: &Args, file: &Path, into_etcd: bool) -> anyhow::Result<Vec<f64>> {
    let mut secs = Vec::new();
    for _ in 0..args.runs {
        let dir = tempfile::tempdir()?;
        let target = dir.path().join("restored");
        let (from, to) = (file.display().to_string(), target.display().to_string());
        let mut argv = vec!["restore", "--from", &from, "--data-dir", &to];
        let etcd = if into_etcd {
            Some(tokio::task::spawn_blocking(EtcdServer::start).await??)
        } else {
            None
        };
        let endpoint = etcd.as_ref().map(|e| e.endpoint.clone()).unwrap_or_default();
        if into_etcd {
            argv.extend(["--storage", "etcd", "--etcd-endpoints", &endpoint]);
        }
        let (t, _) = timed(&args.hub, &argv).await?;
        secs.push(t);
    }
    Ok(secs)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    println!(
        "{} ConfigMaps of {} bytes of data; {} runs each; times from spawning the command to its exit\n",
        args.objects, args.value_bytes, args.runs
    );
    println!(
        "| source | what | runs (s) | median (s) | file | hub peak RSS growth | command peak RSS |"
    );
    println!("|---|---|---|---:|---:|---:|---:|");
    let mut sources = vec![false];
    if args.etcd_source {
        sources.push(true);
    }
    for on_etcd in sources {
        let dir = tempfile::tempdir()?;
        let data_dir = dir.path().join("hub");
        let out = dir.path().join("out");
        std::fs::create_dir_all(&out)?;
        let etcd = if on_etcd {
            Some(tokio::task::spawn_blocking(EtcdServer::start).await??)
        } else {
            None
        };
        let endpoint = etcd.as_ref().map(|e| e.endpoint.clone());
        let engine = match &endpoint {
            Some(e) => Engine::Etcd(EtcdOptions::new(
                vec![e.clone()],
                ocm_apiserver::serve::server::ETCD_PREFIX,
            )),
            None => Engine::Sled(SledOptions::new(data_dir.join("db"))),
        };
        fill(engine, args.objects, args.value_bytes).await?;
        // Let go of the sled store's lock before the hub opens it.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let hub = serve(&args.hub, &data_dir, endpoint.as_deref()).await?;
        let source = if on_etcd { "etcd hub" } else { "sled hub" };
        let (file, secs, growth, peak) = backups(&args, &data_dir, &hub, &out).await?;
        drop(hub);
        let size = std::fs::metadata(&file)?.len();
        let mib = |kib: &[u64]| format!("{} MiB", kib.iter().copied().max().unwrap_or(0) / 1024);
        println!(
            "| {source} | backup | {} | **{:.2}** | {:.0} MiB | {} | {} |",
            runs(&secs),
            median(secs.clone()),
            size as f64 / (1 << 20) as f64,
            mib(&growth),
            mib(&peak)
        );
        for (into_etcd, what) in [(false, "restore into sled"), (true, "restore into etcd")] {
            let secs = restores(&args, &file, into_etcd).await?;
            println!(
                "| {source} | {what} | {} | **{:.2}** | | | |",
                runs(&secs),
                median(secs.clone())
            );
        }
    }
    Ok(())
}
