//! The renew mode over hub replicas (`--replicas N`): a three-member etcd and N `ocm-hub`
//! replicas (the later ones with a copy of the first one's `pki/`), the agents joined to the
//! replicas in turn and run to `Available`, then the measured window's renewals run by worker
//! processes (`--mode renew-worker`) of at most `--per-worker` agents each, since every
//! renewing agent holds a connection and each process may open only so many files. The
//! workers warm their connections, start the window together when told, and print their
//! latencies as a serialized histogram; the hubs' CPU and RSS are the replicas' summed.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use anyhow::Context as _;
use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer as _, V2Serializer};
use ocm_agent::state::DataDir;
use ocm_conformance::etcd::EtcdServer;
use ocm_conformance::replicas::Replica;
use serde_json::{Value, json};

use super::renew::{print_renewals, renew_window, renewers, warm};
use super::{Args, TOKEN_ID, agents_root, create_token, hub_usage, join_and_run};

/// Runs the replicas' renew mode and prints its row.
pub(super) async fn run(args: &Args) -> anyhow::Result<()> {
    let etcd = tokio::task::spawn_blocking(|| EtcdServer::start_cluster(3)).await??;
    let endpoints: Vec<String> = etcd.iter().map(|m| m.endpoint.clone()).collect();
    let approve = format!("--auto-approve-identities=system:bootstrap:{TOKEN_ID}");
    let connections = format!("--max-connections={}", args.agents + 1024);
    let flags = [approve.as_str(), connections.as_str(), "--grpc-metrics-per-cluster=false"];
    let mut replicas = vec![Replica::start(&endpoints, None, &flags).await?];
    for _ in 1..args.replicas {
        replicas.push(Replica::start(&endpoints, Some(&replicas[0]), &flags).await?);
    }
    let client = ocm_apiserver::cli::admin::client(replicas[0].path()).await?;
    let token = create_token(&client).await?;
    let ca_file = replicas[0].path().join("pki/ca.crt");
    let ca = std::fs::read_to_string(&ca_file)?;
    let urls: Vec<String> = replicas.iter().map(Replica::url).collect();
    let root = agents_root(args)?;
    let pids: Vec<u32> = replicas.iter().filter_map(Replica::pid).collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (_, rss_base) = usage(&pids)?;
    join_and_run(&client, &urls, &token, &ca, args, root.path()).await?;

    let mut workers = Vec::new();
    for from in (0..args.agents).step_by(args.per_worker.max(1)) {
        let to = (from + args.per_worker).min(args.agents);
        workers.push(Worker::spawn(args, from, to, root.path(), &ca_file)?);
    }
    for w in &mut workers {
        anyhow::ensure!(w.line()? == "ready", "a renewal worker did not get ready");
    }
    let (cpu0, _) = usage(&pids)?;
    for w in &mut workers {
        writeln!(w.stdin, "go")?;
    }
    let mut hist = Histogram::<u64>::new(3)?;
    let (mut errors, mut took) = (0, 0.0_f64);
    for w in &mut workers {
        let found: Value = serde_json::from_str(&w.line()?)?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(found["histogram"].as_str().context("histogram")?)?;
        let theirs: Histogram<u64> = Deserializer::new().deserialize(&mut bytes.as_slice())?;
        hist.add(theirs)?;
        errors += found["errors"].as_u64().context("errors")? as usize;
        took = took.max(found["took"].as_f64().context("took")?);
    }
    let (cpu1, rss) = usage(&pids)?;
    let secs = took.max(args.duration as f64);
    let cores = (cpu1 - cpu0) / took;
    println!("{} replicas on a three-member etcd, {} renewal workers:", pids.len(), workers.len());
    print_renewals(args.agents, &hist, errors, secs, cores, rss, rss.saturating_sub(rss_base));
    for (r, pid) in replicas.iter().zip(&pids) {
        let (_, rss) = hub_usage(*pid)?;
        println!("replica {}: RSS {:.0} MiB", r.url(), rss as f64 / 1024.0);
    }
    drop(workers);
    drop(replicas);
    drop(etcd);
    Ok(())
}

/// The replicas' CPU seconds and RSS in KiB, summed.
fn usage(pids: &[u32]) -> anyhow::Result<(f64, u64)> {
    pids.iter().try_fold((0.0, 0), |(cpu, rss), pid| {
        let (c, r) = hub_usage(*pid)?;
        Ok((cpu + c, rss + r))
    })
}

/// A renewal worker process and its pipes; killed on drop (its connections close with it).
struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Worker {
    fn spawn(
        args: &Args,
        from: usize,
        to: usize,
        root: &Path,
        ca: &Path,
    ) -> anyhow::Result<Worker> {
        let mut child = Command::new(std::env::current_exe()?)
            .args(["--mode", "renew-worker"])
            .arg(format!("--agents={}", args.agents))
            .arg(format!("--from={from}"))
            .arg(format!("--to={to}"))
            .arg(format!("--renew-every={}", args.renew_every))
            .arg(format!("--duration={}", args.duration))
            .arg("--agents-root")
            .arg(root)
            .arg("--ca-file")
            .arg(ca)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let stdin = child.stdin.take().context("stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("stdout")?);
        Ok(Worker { child, stdin, stdout })
    }

    /// The next line it prints (blocking: the run waits on its workers in turn).
    fn line(&mut self) -> anyhow::Result<String> {
        let mut line = String::new();
        anyhow::ensure!(self.stdout.read_line(&mut line)? > 0, "a renewal worker ended early");
        Ok(line.trim_end().to_owned())
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A renewal worker: warms the connections of agents `from..to`, says `ready`, waits for `go`,
/// runs the window, prints `{"histogram", "errors", "took"}` and keeps its connections open
/// until its input closes.
pub(super) async fn worker(args: &Args) -> anyhow::Result<()> {
    let root = args.agents_root.as_ref().context("--agents-root")?;
    let ca = std::fs::read_to_string(args.ca_file.as_ref().context("--ca-file")?)?;
    let dirs: Vec<DataDir> =
        (args.from..args.to).map(|i| DataDir::new(root.join(format!("a{i}")))).collect();
    let clients = renewers(&dirs, &ca)?;
    warm(&clients).await?;
    println!("ready");
    tokio::task::spawn_blocking(|| std::io::stdin().read_line(&mut String::new())).await??;
    let period = Duration::from_secs(args.renew_every);
    let duration = Duration::from_secs(args.duration);
    let window = renew_window(clients, args.from, args.agents, period, duration).await?;
    let mut bytes = Vec::new();
    V2Serializer::new().serialize(&window.hist, &mut bytes)?;
    let histogram = base64::engine::general_purpose::STANDARD.encode(bytes);
    println!("{}", json!({"histogram": histogram, "errors": window.errors, "took": window.took}));
    // Off the runtime's threads, which keep the connections alive meanwhile.
    tokio::task::spawn_blocking(|| std::io::copy(&mut std::io::stdin(), &mut std::io::sink()))
        .await??;
    drop(window.open);
    Ok(())
}
