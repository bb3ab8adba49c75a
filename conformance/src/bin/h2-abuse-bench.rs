//! The rapid-reset benchmark: what an HTTP/2 rapid-reset flood (HEADERS then RST_STREAM pairs,
//! `ocm_conformance::flood`) costs a hub, and what a well-behaved client sees meanwhile. Each run
//! is a fresh process (this binary run again with `--one-run`) holding a memory hub and the
//! flood, so no run inherits another's allocator state: it reports the flood's time and rate,
//! the connections the hub closed, the process's RSS before and after the flood and its peak
//! (hub and flooder together: the flooder holds one HTTP/2 connection at a time), and the
//! well-behaved client's latency alone and during the flood. Prints each run and the medians
//! as Markdown for `BENCHMARKS.md`. The behaviour (the flood refused, the good client served
//! without an error) is the test `tests/h2_abuse.rs`.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use ocm_conformance::flood::{self, GoodClient};
use ocm_conformance::hub::{Backend, TestHub, proc_status_kib};
use serde::{Deserialize, Serialize};

#[derive(Parser, Debug)]
#[command(about = "Measures what an HTTP/2 rapid-reset flood costs the hub")]
struct Args {
    /// HEADERS then RST_STREAM pairs per run.
    #[arg(long, default_value_t = 50_000)]
    pairs: usize,
    /// Runs, each in a fresh process (the medians are reported).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Seconds the well-behaved client asks alone before the flood (its baseline latency).
    #[arg(long, default_value_t = 2)]
    baseline_seconds: u64,
    /// Run one measurement in this process and print it as one JSON line (used by the runs).
    #[arg(long, hide = true)]
    one_run: bool,
}

/// One run's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Run {
    pairs: usize,
    closed: usize,
    stalled: usize,
    flood_seconds: f64,
    rss_before_kib: u64,
    rss_after_kib: u64,
    rss_peak_kib: u64,
    baseline_p50_ms: f64,
    flood_p50_ms: f64,
    flood_p99_ms: f64,
    flood_max_ms: f64,
    served: usize,
    failed: usize,
}

fn quantile_ms(mut v: Vec<Duration>, q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort();
    let at = ((v.len() - 1) as f64 * q).round() as usize;
    v[at].as_secs_f64() * 1000.0
}

async fn one_run(args: &Args) -> anyhow::Result<Run> {
    let hub = TestHub::start(Backend::Memory).await?;
    hub.http()?.get(format!("{}/api/v1/namespaces", hub.url)).send().await?.error_for_status()?;
    let alone = GoodClient::start(&hub)?;
    tokio::time::sleep(Duration::from_secs(args.baseline_seconds)).await;
    let alone = alone.stop().await?;
    anyhow::ensure!(
        alone.failed.is_empty(),
        "the client failed without a flood: {:?}",
        alone.failed
    );

    let pid = std::process::id();
    let rss_before_kib = proc_status_kib(pid, "VmRSS")?;
    let good = GoodClient::start(&hub)?;
    let started = Instant::now();
    let f = flood::rapid_reset(&hub, args.pairs).await?;
    let flood_seconds = started.elapsed().as_secs_f64();
    let during = good.stop().await?;
    let rss_after_kib = proc_status_kib(pid, "VmRSS")?;
    let rss_peak_kib = proc_status_kib(pid, "VmHWM")?;
    hub.stop().await;
    Ok(Run {
        pairs: f.pairs,
        closed: f.closed,
        stalled: f.stalled,
        flood_seconds,
        rss_before_kib,
        rss_after_kib,
        rss_peak_kib,
        baseline_p50_ms: quantile_ms(alone.ok, 0.5),
        flood_p50_ms: quantile_ms(during.ok.clone(), 0.5),
        flood_p99_ms: quantile_ms(during.ok.clone(), 0.99),
        flood_max_ms: quantile_ms(during.ok.clone(), 1.0),
        served: during.ok.len(),
        failed: during.failed.len(),
    })
}

/// What the flood added to the process's RSS, in KiB.
fn growth(r: &Run) -> f64 {
    r.rss_after_kib as f64 - r.rss_before_kib as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn row(label: &str, r: &Run, growth_kib: i64) -> String {
    format!(
        "| {label} | {} | {} / {} | {:.1} | {:.0} | {} | {} | {:+} | {} | {:.2} | {:.2} / {:.2} / {:.2} | {} / {} |",
        r.pairs,
        r.closed,
        r.stalled,
        r.flood_seconds,
        r.pairs as f64 / r.flood_seconds,
        r.rss_before_kib,
        r.rss_after_kib,
        growth_kib,
        r.rss_peak_kib,
        r.baseline_p50_ms,
        r.flood_p50_ms,
        r.flood_p99_ms,
        r.flood_max_ms,
        r.served,
        r.failed,
    )
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.one_run {
        let rt =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        let run = rt.block_on(one_run(&args))?;
        println!("{}", serde_json::to_string(&run)?);
        return Ok(());
    }
    anyhow::ensure!(args.runs > 0, "--runs must be at least 1");
    let exe = std::env::current_exe()?;
    let mut runs = Vec::new();
    for i in 1..=args.runs {
        let out = std::process::Command::new(&exe)
            .args(["--one-run", "--pairs", &args.pairs.to_string()])
            .args(["--baseline-seconds", &args.baseline_seconds.to_string()])
            .stderr(std::process::Stdio::inherit())
            .output()
            .context("running one measurement")?;
        anyhow::ensure!(out.status.success(), "run {i} failed: {}", out.status);
        let text = String::from_utf8(out.stdout)?;
        let line = text.lines().last().context("run printed nothing")?;
        let run: Run = serde_json::from_str(line).with_context(|| format!("run {i}: {line}"))?;
        eprintln!("run {i}: {run:?}");
        runs.push(run);
    }
    println!(
        "| run | pairs | connections closed / stalled | flood s | pairs/s | RSS before KiB | after KiB | growth KiB | peak KiB | good p50 alone ms | good p50 / p99 / max during ms | good served / failed |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (i, r) in runs.iter().enumerate() {
        println!("{}", row(&(i + 1).to_string(), r, growth(r) as i64));
    }
    let m = |f: fn(&Run) -> f64| median(runs.iter().map(f).collect());
    let median_run = Run {
        pairs: args.pairs,
        closed: m(|r| r.closed as f64) as usize,
        stalled: m(|r| r.stalled as f64) as usize,
        flood_seconds: m(|r| r.flood_seconds),
        rss_before_kib: m(|r| r.rss_before_kib as f64) as u64,
        rss_after_kib: m(|r| r.rss_after_kib as f64) as u64,
        rss_peak_kib: m(|r| r.rss_peak_kib as f64) as u64,
        baseline_p50_ms: m(|r| r.baseline_p50_ms),
        flood_p50_ms: m(|r| r.flood_p50_ms),
        flood_p99_ms: m(|r| r.flood_p99_ms),
        flood_max_ms: m(|r| r.flood_max_ms),
        served: m(|r| r.served as f64) as usize,
        failed: m(|r| r.failed as f64) as usize,
    };
    println!("{}", row("median", &median_run, m(growth) as i64));
    Ok(())
}
