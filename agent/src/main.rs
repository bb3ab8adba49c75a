//! `klusterlet`: the command line of the agent (design §6). Only this file reads flags or
//! installs the tracing subscriber.

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use ocm_agent::agent::{self, CaSource, JoinRequest, Options, Progress};
use ocm_agent::cluster::KubeCluster;
use ocm_agent::state::DataDir;

#[derive(Parser)]
#[command(
    name = "klusterlet",
    version,
    about = "The Open Cluster Management agent of a managed cluster."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log verbosity, as klog's -v: 0-3 info, 4 debug, 5 trace (RUST_LOG overrides it).
    #[arg(short = 'v', long = "v", global = true, default_value_t = 0,
          value_parser = clap::value_parser!(u8).range(0..=10))]
    v: u8,
    /// Log format: text (klog's) or json (Kubernetes' JSON keys), on stderr.
    #[arg(long, global = true, default_value = "text")]
    logging_format: ocm_proto::logfmt::Format,
}

/// Installs the logger: Kubernetes' text or JSON lines on stderr at `-v` verbosity.
fn init_logging(format: ocm_proto::logfmt::Format, v: u8) {
    let directives = std::env::var("RUST_LOG").ok();
    let subscriber = ocm_proto::logfmt::subscriber(format, v, directives.as_deref());
    // try_init also forwards the `log` facade's records (sled, rustls) to the subscriber.
    if tracing_subscriber::util::SubscriberInitExt::try_init(subscriber).is_err() {
        eprintln!("a logger was already installed");
    }
}

#[derive(clap::Args, Clone)]
struct Common {
    /// Where the agent keeps its identity, the hub CA and its credentials.
    #[arg(long, default_value = "./klusterlet-data")]
    data_dir: PathBuf,
    /// The managed cluster's kubeconfig (default: in-cluster, then ~/.kube/config).
    #[arg(long)]
    cluster_kubeconfig: Option<PathBuf>,
    /// How often the cluster's status is reported (seconds).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    cluster_healthcheck_period: u64,
    /// Lifetime to ask for the agent's certificate (seconds, at least 600; default: the
    /// hub's maximum).
    #[arg(long, value_parser = clap::value_parser!(u64).range(600..))]
    client_cert_expiration_seconds: Option<u64>,
    /// Serve the agent's Prometheus metrics on this address (HTTP, `GET /metrics`).
    #[arg(long)]
    metrics_listen: Option<std::net::SocketAddr>,
    /// How often every ManifestWork is applied again and its status read without a change
    /// (drift correction, status feedback), in seconds.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86400))]
    work_resync_seconds: u64,
    /// How ManifestWorks reach the agent: `grpc` (OCM's CloudEvents stream) or `kube` (a
    /// list-watch of the hub's REST API).
    #[arg(long, value_enum, default_value = "grpc")]
    transport: TransportArg,
    /// The hub's gRPC server (https://HOST:PORT; default: the one the hub publishes in
    /// `kube-public/cluster-info`).
    #[arg(long)]
    grpc_server: Option<String>,
    /// Resubscribe when the gRPC stream brought nothing, not even a heartbeat, for this many
    /// seconds (OCM's serverHealthinessTimeout).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    grpc_healthiness_seconds: u64,
    /// How long an AppliedManifestWork on the cluster whose ManifestWork the hub no longer
    /// has (or that another hub's agent made) is kept before it is deleted with the resources
    /// it owns (OCM's flag; 876000h, 100 years, or more never evicts).
    #[arg(long = "appliedmanifestwork-eviction-grace-period", default_value = "60m",
          value_parser = ocm_proto::duration::parse_duration)]
    eviction_grace: Duration,
    /// How often the cluster's add-ons are looked at (their hub credentials, Lease health),
    /// in seconds.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    addon_resync_seconds: u64,
    /// Do not evaluate or enforce the cluster's governance policies.
    #[arg(long)]
    disable_policies: bool,
    /// How often policies whose `evaluationInterval` is `watch` (the default) are evaluated,
    /// in seconds.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    policy_resync_seconds: u64,
    /// Carry the hub's proxied requests to this cluster's API server (the cluster proxy);
    /// `--enable-proxy=false` refuses them all (the hub answers 503).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    enable_proxy: bool,
    /// The prefix under which hub users and groups act on this cluster through the proxy:
    /// hub user `alice` in group `devs` is impersonated as `ocm-hub:alice` in `ocm-hub:devs`
    /// (and `system:authenticated`); the cluster's RBAC grants rights to those names.
    #[arg(long, default_value = ocm_agent::proxy::DEFAULT_PREFIX)]
    proxy_identity_prefix: String,
}

#[derive(clap::ValueEnum, Clone, Copy)]
enum TransportArg {
    Grpc,
    Kube,
}

#[derive(Subcommand)]
enum Command {
    /// Joins the cluster to a hub, then keeps running as its agent.
    Join {
        /// The hub's URL (https://HOST:PORT).
        #[arg(long)]
        hub: String,
        /// A bootstrap token from the hub (`ocm-hub token create`).
        #[arg(long)]
        token: String,
        /// The name the cluster gets on the hub (a DNS label).
        #[arg(long)]
        cluster_name: String,
        /// The hub's CA certificate (PEM).
        #[arg(long, conflicts_with = "ca_hash", required_unless_present = "ca_hash")]
        ca_file: Option<PathBuf>,
        /// The hub CA's public key pin (sha256:HEX, as `ocm-hub serve` prints it).
        #[arg(long)]
        ca_hash: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Runs a joined agent from its data dir.
    Run {
        #[command(flatten)]
        common: Common,
    },
}

fn usage_error(message: &str) -> ExitCode {
    eprintln!("klusterlet: {message}");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // Without its subcommand clap would print the help; a usage error names what is missing.
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            return usage_error("a subcommand is missing (see --help)");
        }
        Err(e) if e.use_stderr() => {
            let text = e.to_string();
            let line = text.lines().next().unwrap_or("invalid arguments");
            return usage_error(line.trim_start_matches("error: "));
        }
        Err(e) => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
    };
    let logging = (cli.logging_format, cli.v);
    let (join, common) = match cli.command {
        Command::Join { hub, token, cluster_name, ca_file, ca_hash, common } => {
            if !ocm_proto::validation::is_dns_label(&cluster_name) {
                return usage_error(&format!(
                    "--cluster-name {cluster_name:?} is not a DNS label (a-z, 0-9, '-', at most 63)"
                ));
            }
            if ocm_proto::validation::parse_bootstrap_token(&token).is_none() {
                return usage_error(
                    "--token is not a bootstrap token (6 + 16 characters a-z, 0-9: abcdef.0123456789abcdef)",
                );
            }
            if !hub.starts_with("https://") {
                return usage_error(&format!("--hub {hub:?} must be an https:// URL"));
            }
            let ca = match (ca_file, ca_hash) {
                (Some(path), _) => match std::fs::read_to_string(&path) {
                    Ok(pem) if ocm_agent::hub::ca_hash(&pem).is_some() => CaSource::Pem(pem),
                    Ok(_) => {
                        return usage_error(&format!(
                            "--ca-file {} holds no PEM certificate",
                            path.display()
                        ));
                    }
                    Err(e) => return usage_error(&format!("--ca-file {}: {e}", path.display())),
                },
                (None, Some(pin)) => {
                    let hex = pin.strip_prefix("sha256:").unwrap_or("");
                    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                        return usage_error("--ca-hash must be sha256: followed by 64 hex digits");
                    }
                    CaSource::Pin(pin)
                }
                (None, None) => return usage_error("give --ca-file or --ca-hash"),
            };
            (
                Some(JoinRequest {
                    hub: hub.trim_end_matches('/').to_owned(),
                    token,
                    cluster_name,
                    ca,
                }),
                common,
            )
        }
        Command::Run { common } => (None, common),
    };
    if let Some(path) = &common.cluster_kubeconfig {
        if !path.is_file() {
            return usage_error(&format!(
                "--cluster-kubeconfig {} is not a readable file",
                path.display()
            ));
        }
    }
    if let Err(why) = ocm_agent::proxy::check_prefix(&common.proxy_identity_prefix) {
        return usage_error(&format!(
            "--proxy-identity-prefix {:?} {why}",
            common.proxy_identity_prefix
        ));
    }
    init_logging(logging.0, logging.1);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("klusterlet: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut opts = Options::new(DataDir::new(common.data_dir.clone()));
    opts.healthcheck_period = Duration::from_secs(common.cluster_healthcheck_period);
    opts.cert_expiration = common.client_cert_expiration_seconds.map(Duration::from_secs);
    opts.work_resync = Duration::from_secs(common.work_resync_seconds);
    opts.eviction_grace = common.eviction_grace;
    opts.addon_resync = Duration::from_secs(common.addon_resync_seconds);
    opts.policies = !common.disable_policies;
    opts.policy_resync = Duration::from_secs(common.policy_resync_seconds);
    opts.proxy_prefix = common.enable_proxy.then(|| common.proxy_identity_prefix.clone());
    opts.transport = match common.transport {
        TransportArg::Grpc => ocm_agent::agent::Transport::Grpc {
            server: common.grpc_server.clone(),
            healthiness: Duration::from_secs(common.grpc_healthiness_seconds),
        },
        TransportArg::Kube => ocm_agent::agent::Transport::Kube,
    };
    let result = runtime.block_on(async {
        if let Some(addr) = common.metrics_listen {
            let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
                ocm_agent::error::AgentError::Invalid(format!("--metrics-listen {addr}: {e}"))
            })?;
            let metrics = Arc::new(ocm_agent::metrics::Metrics::new());
            opts.metrics = Some(Arc::clone(&metrics));
            tokio::spawn(ocm_agent::metrics::serve(listener, metrics));
        }
        let cluster = Arc::new(KubeCluster::connect(common.cluster_kubeconfig.as_deref()).await?);
        if let Some(req) = &join {
            let terminal = std::io::stderr().is_terminal();
            let mut waiting = false;
            agent::join(req, &opts, |p| match p {
                Progress::Step(line) => {
                    if waiting && terminal {
                        eprintln!();
                    }
                    waiting = false;
                    println!("{line}");
                }
                // One line, rewritten in place on a terminal; said once otherwise.
                Progress::Waiting { what, seconds } if terminal => {
                    waiting = true;
                    eprint!("\rwaiting for {what} ({seconds}s)");
                }
                Progress::Waiting { what, .. } if !waiting => {
                    waiting = true;
                    eprintln!("waiting for {what}");
                }
                Progress::Waiting { .. } => {}
            })
            .await?;
            println!("joined; running as the cluster's agent (restart with `klusterlet run --data-dir {}`)", common.data_dir.display());
        }
        agent::run(opts, cluster, shutdown_signal()).await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("klusterlet: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
