//! The writer process of the crash-kill test: writes to a sled store and reports on stdout.
//!
//! Protocol, one line each (the parent kills this process at random moments):
//! * `READY <revision>`: the store opened; its current revision.
//! * `TRY <writer> <key> PUT <value>` / `TRY <writer> <key> DEL`: printed before the write starts.
//!   Writer 0 appends [`large_suffix`] to every other value it stores (not to the line; which:
//!   [`crash_value_is_large`]), so large
//!   values, stored by content and sharing their chunks, are crashed and compacted too.
//! * `ACK <writer> <revision>`: printed only after that writer's last TRY returned success.
//! * `COMPACTING <revision>`: printed just before an explicit compaction starts.
//!
//! Each writer owns its own keys (`/crash/ns<w>/k<i>`) and writes them one at a time, so the
//! parent knows, for every key, the last acknowledged state and the one write that may be in
//! flight. The writers learn the current state from the store at start, so runs continue each
//! other's history across kills.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use ocm_conformance::data::{crash_value_is_large, large_suffix};
use ocm_storage::{
    Engine, HistoryWindow, ListOptions, LocalOptions, Preconditions, Revision, SledOptions, Storage,
};
use rand::Rng;

#[derive(Parser, Debug)]
#[command(about = "Writes to a sled store until killed (crash-kill test child)")]
struct Args {
    /// The sled store directory.
    #[arg(long)]
    dir: PathBuf,
    /// Concurrent writer tasks, each owning its own namespace.
    #[arg(long, default_value_t = 4)]
    writers: usize,
    /// Keys per writer.
    #[arg(long, default_value_t = 50)]
    keys: usize,
    /// A tag put into every value, so values of different runs differ.
    #[arg(long)]
    run: u64,
    /// Compact explicitly every this many milliseconds (0 = never), keeping this many revisions.
    #[arg(long, default_value_t = 100)]
    compact_every_ms: u64,
    /// How many revisions an explicit compaction keeps.
    #[arg(long, default_value_t = 64)]
    keep: u64,
    /// The negative control: acknowledge writes before they are flushed.
    #[arg(long)]
    unsafe_ack_before_flush: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(3)
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let options = SledOptions {
        local: LocalOptions {
            history: HistoryWindow {
                max_events: 500,
                max_age: Duration::from_secs(3600),
                check_every: Duration::from_millis(50),
            },
            ..LocalOptions::default()
        },
        unsafe_ack_before_flush: args.unsafe_ack_before_flush,
        ..SledOptions::new(&args.dir)
    };
    let store = Storage::open(Engine::Sled(options)).await?;
    println!("READY {}", store.current_revision().await?);

    let mut tasks = Vec::new();
    for writer in 0..args.writers {
        let store = store.clone();
        let (keys, run) = (args.keys, args.run);
        tasks.push(tokio::spawn(async move { write_loop(store, writer, keys, run).await }));
    }
    if args.compact_every_ms > 0 {
        let store = store.clone();
        let (every, keep) = (args.compact_every_ms, args.keep);
        tasks.push(tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(every)).await;
                let current = store.current_revision().await?;
                if current.0 > keep {
                    let at = Revision(current.0 - keep);
                    println!("COMPACTING {at}");
                    store.compact(at).await?;
                }
            }
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(())
}

async fn write_loop(store: Storage, writer: usize, keys: usize, run: u64) -> anyhow::Result<()> {
    let prefix = format!("/crash/ns{writer}/");
    let mut state: BTreeMap<String, Revision> = BTreeMap::new();
    for kv in store.list(&prefix, &ListOptions::default()).await?.items {
        state.insert(kv.key, kv.mod_revision);
    }
    let mut seq = 0u64;
    loop {
        seq += 1;
        let (key, roll) = {
            let mut rng = rand::rng();
            (format!("{prefix}k{}", rng.random_range(0..keys)), rng.random_range(0..10))
        };
        let value = format!("r{run}-w{writer}-s{seq}");
        // Writer 0's every other value is large (stored by content), the rest inline.
        let stored = match crash_value_is_large(&value) {
            true => format!("{value}{}", large_suffix()),
            false => value.clone(),
        };
        match state.get(&key).copied() {
            None => {
                println!("TRY {writer} {key} PUT {value}");
                let revision = store.create(&key, stored).await?.mod_revision;
                println!("ACK {writer} {revision}");
                state.insert(key, revision);
            }
            Some(current) if roll < 3 => {
                println!("TRY {writer} {key} DEL");
                let pre = Preconditions { mod_revision: Some(current), create_revision: None };
                let revision = store.delete(&key, &pre).await?.revision;
                println!("ACK {writer} {revision}");
                state.remove(&key);
            }
            Some(current) => {
                println!("TRY {writer} {key} PUT {value}");
                let revision = store.update(&key, stored, current).await?.mod_revision;
                println!("ACK {writer} {revision}");
                state.insert(key, revision);
            }
        }
    }
}
