//! `ocm-hub`: the command line of the hub (design §6). Only this file reads flags and installs
//! the tracing subscriber.

use std::io::IsTerminal as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use ocm_apiserver::cli::{admin, fleet};
use ocm_apiserver::machinery::scheme::Profile;
use ocm_apiserver::serve::server::{ServeConfig, StorageChoice, run};

/// See the workspace `Cargo.toml` for why the hub does not use the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "ocm-hub",
    version,
    about = "The Open Cluster Management hub: one binary, its own API server and storage."
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

#[derive(Subcommand)]
enum Command {
    /// Runs the hub.
    Serve(Box<ServeArgs>),
    /// Bootstrap tokens for joining managed clusters (kept by the running hub).
    #[command(subcommand)]
    Token(TokenCommand),
    /// Accepts managed clusters: approves their agents' pending certificate requests and sets
    /// hubAcceptsClient.
    Accept {
        /// The clusters.
        #[arg(required = true, value_parser = parse_cluster_name)]
        clusters: Vec<String>,
        /// The hub's data directory (its admin.kubeconfig is used).
        #[arg(long, default_value = "./ocm-data")]
        data_dir: PathBuf,
    },
    /// Reads the fleet: clusters, works, placements.
    #[command(subcommand)]
    Get(GetCommand),
    /// Creates fleet objects.
    #[command(subcommand)]
    Create(CreateCommand),
    /// Manages the rollout of a ManifestWorkReplicaSet (as `kubectl rollout`).
    Rollout {
        #[command(subcommand)]
        verb: RolloutVerb,
    },
    /// Backs up the running hub: its store at one revision (an online, consistent snapshot,
    /// whatever the backend) and its identity (the data dir's pki/), into one private file.
    Backup {
        /// The file to write: mode 0600, and only once complete.
        #[arg(long)]
        to: PathBuf,
        /// The hub's data directory (its admin.kubeconfig reaches the hub; its pki/ is the
        /// identity backed up).
        #[arg(long, default_value = "./ocm-data")]
        data_dir: PathBuf,
    },
    /// Prints a kubeconfig that reaches a managed cluster's API server through the hub (the
    /// cluster proxy), with the caller's hub credentials: `kubectl --kubeconfig` it acts on
    /// that cluster.
    Kubeconfig {
        /// The managed cluster.
        #[arg(value_parser = parse_cluster_name)]
        cluster: String,
        /// The hub's data directory (its admin.kubeconfig is used).
        #[arg(long, default_value = "./ocm-data")]
        data_dir: PathBuf,
        /// A hub kubeconfig whose current context's user and hub are used instead.
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
    },
    /// Uploads the hub's certificates (a replica's pki/), sealed under a new certificate key
    /// printed once, into the shared etcd for two hours: a new replica started with
    /// `--certificate-key` and an empty data dir takes them from there.
    UploadCerts {
        /// A replica's data directory (its pki/ is the identity uploaded).
        #[arg(long, default_value = "./ocm-data")]
        data_dir: PathBuf,
        /// The hub's etcd endpoints, comma-separated.
        #[arg(long, value_delimiter = ',', required = true)]
        etcd_endpoints: Vec<String>,
    },
    /// Makes a new data dir (and store) from a backup; `ocm-hub serve` on it is the same hub,
    /// and joined clusters keep working without joining again.
    Restore {
        /// The backup file.
        #[arg(long)]
        from: PathBuf,
        /// The data dir to create (absent or empty).
        #[arg(long)]
        data_dir: PathBuf,
        /// Where the store goes: sled in the data dir, or etcd (an empty prefix).
        #[arg(long, value_enum, default_value = "sled")]
        storage: RestoreStorageArg,
        /// etcd endpoints, comma-separated (with --storage etcd).
        #[arg(long, value_delimiter = ',')]
        etcd_endpoints: Vec<String>,
        /// How many revisions past the backup's the restored store starts, so that no
        /// revision the original issued after the backup is issued again.
        #[arg(long, default_value_t = ocm_apiserver::cli::backup::DEFAULT_BUMP_REVISION)]
        bump_revision: u64,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum RestoreStorageArg {
    Sled,
    Etcd,
}

/// Which set a rollout command is about.
#[derive(clap::Args)]
struct RolloutTarget {
    /// manifestworkreplicaset/NAME (or mwrs/NAME).
    #[arg(value_parser = ocm_apiserver::cli::rollout::parse_target)]
    target: String,
    /// The set's namespace.
    #[arg(short = 'n', long, default_value = "default", value_parser = parse_namespace)]
    namespace: String,
    /// The hub's data directory (its admin.kubeconfig is used).
    #[arg(long, default_value = "./ocm-data")]
    data_dir: PathBuf,
}

#[derive(Subcommand)]
enum RolloutVerb {
    /// Follows the rollout until it completes, or until failures stop it (then the exit status
    /// is an error).
    Status {
        #[command(flatten)]
        set: RolloutTarget,
        /// Keep printing until the rollout ends (`--watch=false` prints once).
        #[arg(short = 'w', long, default_value_t = true, action = clap::ArgAction::Set)]
        watch: bool,
        /// How long to wait (1h, 5m, 30s).
        #[arg(long, default_value = "10m", value_parser = admin::parse_duration)]
        timeout: Duration,
    },
    /// Lists the set's revisions, or shows one.
    History {
        #[command(flatten)]
        set: RolloutTarget,
        /// Show this revision's template and overrides.
        #[arg(long)]
        revision: Option<i64>,
    },
    /// Stops moving clusters to another revision.
    Pause {
        #[command(flatten)]
        set: RolloutTarget,
    },
    /// Lets a paused rollout go on.
    Resume {
        #[command(flatten)]
        set: RolloutTarget,
    },
    /// Rolls the set back to an earlier revision (default: the one before the current template).
    Undo {
        #[command(flatten)]
        set: RolloutTarget,
        /// The revision to return to.
        #[arg(long)]
        to_revision: Option<i64>,
    },
}

#[derive(clap::Args)]
struct Printing {
    /// The hub's data directory (its admin.kubeconfig is used).
    #[arg(long, default_value = "./ocm-data")]
    data_dir: PathBuf,
    /// Output format: wide, json or yaml (default: a table).
    #[arg(short = 'o', long)]
    output: Option<ocm_apiserver::cli::fleet::Output>,
}

#[derive(Subcommand)]
enum GetCommand {
    /// The managed clusters: accepted, available, cluster set, CPU, memory, version.
    Clusters {
        #[command(flatten)]
        printing: Printing,
    },
    /// The ManifestWorks of every cluster (or one): manifests, applied, available.
    Works {
        /// Only this cluster's works.
        #[arg(long, value_parser = parse_cluster_name)]
        cluster: Option<String>,
        #[command(flatten)]
        printing: Printing,
    },
    /// The placements of every namespace (or one): clusters selected, satisfied, groups.
    Placements {
        /// Only this namespace's placements.
        #[arg(short = 'n', long, value_parser = parse_namespace)]
        namespace: Option<String>,
        #[command(flatten)]
        printing: Printing,
    },
}

#[derive(Subcommand)]
enum CreateCommand {
    /// Sends the objects of a manifest file to clusters as a ManifestWork.
    Work {
        /// The ManifestWork's name.
        #[arg(value_parser = parse_object_name)]
        name: String,
        /// The manifest file (YAML documents, JSON, or a List; `-` reads stdin).
        #[arg(short = 'f', long)]
        file: PathBuf,
        /// The clusters to send it to.
        #[arg(long, value_delimiter = ',', value_parser = parse_cluster_name,
              required_unless_present = "placement", conflicts_with = "placement")]
        clusters: Vec<String>,
        /// A placement (NAMESPACE/NAME) whose decided clusters get it.
        #[arg(long, value_parser = parse_placement)]
        placement: Option<(String, String)>,
        /// Replace the manifests of a work of that name that exists already.
        #[arg(long)]
        overwrite: bool,
        /// Wait until every cluster's agent has applied it.
        #[arg(long)]
        wait: bool,
        /// How long --wait waits (1h, 5m, 30s).
        #[arg(long, default_value = "5m", value_parser = admin::parse_duration)]
        timeout: Duration,
        /// The hub's data directory (its admin.kubeconfig is used).
        #[arg(long, default_value = "./ocm-data")]
        data_dir: PathBuf,
    },
}

fn parse_namespace(text: &str) -> Result<String, String> {
    ocm_apiserver::machinery::object::check_dns_label(text)
        .map(|()| text.to_owned())
        .map_err(|e| format!("{text:?} is not a namespace name: {e}"))
}

fn parse_object_name(text: &str) -> Result<String, String> {
    ocm_apiserver::machinery::object::check_dns_subdomain(text)
        .map(|()| text.to_owned())
        .map_err(|e| format!("{text:?} is not an object name: {e}"))
}

fn parse_placement(text: &str) -> Result<(String, String), String> {
    let (ns, name) =
        text.split_once('/').ok_or_else(|| format!("{text:?} is not NAMESPACE/NAME"))?;
    Ok((parse_cluster_name(ns)?, parse_object_name(name)?))
}

fn parse_cluster_name(text: &str) -> Result<String, String> {
    ocm_apiserver::machinery::object::check_dns_label(text)
        .map(|()| text.to_owned())
        .map_err(|e| format!("{text:?} is not a cluster name: {e}"))
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Creates a bootstrap token and prints it.
    Create {
        /// The hub's data directory (its admin.kubeconfig is used).
        #[arg(long, default_value = "./ocm-data")]
        data_dir: PathBuf,
        /// How long the token works (1h, 30m, 1h30m; at most 168h).
        #[arg(long, default_value = "1h", value_parser = parse_ttl)]
        ttl: Duration,
    },
    /// Lists the bootstrap tokens (ids and expiry; never the secrets).
    List {
        /// The hub's data directory.
        #[arg(long, default_value = "./ocm-data")]
        data_dir: PathBuf,
    },
    /// Revokes a bootstrap token at once.
    Revoke {
        /// The token, or its id (the part before the dot).
        token: String,
        /// The hub's data directory.
        #[arg(long, default_value = "./ocm-data")]
        data_dir: PathBuf,
    },
}

fn parse_signing_duration(text: &str) -> Result<Duration, String> {
    let d = admin::parse_duration(text)?;
    if d < Duration::from_secs(600) {
        return Err("--cluster-signing-duration must be at least 10m".into());
    }
    Ok(d)
}

fn parse_queue_wait(text: &str) -> Result<Duration, String> {
    let d = admin::parse_duration(text)?;
    if d > Duration::from_secs(60) {
        return Err(
            "--request-queue-wait must be at most 60s (kube-apiserver's request timeout)".into()
        );
    }
    Ok(d)
}

fn parse_ttl(text: &str) -> Result<Duration, String> {
    admin::parse_duration(text).and_then(admin::check_ttl)
}

#[derive(Clone, Copy, ValueEnum)]
enum StorageArg {
    Sled,
    Etcd,
    Memory,
}

#[derive(Clone, Copy, ValueEnum)]
enum ProfileArg {
    Hub,
    Cluster,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Data directory: PKI, admin.kubeconfig, endpoints.json and the embedded database.
    #[arg(long, default_value = "./ocm-data")]
    data_dir: PathBuf,
    /// HTTPS listen address (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// gRPC listen address of the CloudEvents server agents stream works over (port 0 picks a
    /// free port; the hub profile only).
    #[arg(long, default_value = "127.0.0.1:8090")]
    grpc_listen: SocketAddr,
    /// The IP address or DNS name agents reach the hub at: the join command, cluster-info (HTTPS
    /// and gRPC URLs) and admin.kubeconfig name it, and the serving certificate covers it
    /// (default: the listen address; 127.0.0.1 when listening on every address).
    #[arg(long, value_parser = ocm_apiserver::serve::server::parse_host)]
    advertise_address: Option<String>,
    /// Another DNS name or IP address the hub's own serving certificate covers (repeatable or
    /// comma-separated), for clients that reach it by other names (a load balancer, an alias).
    #[arg(long, value_delimiter = ',', value_parser = ocm_apiserver::serve::server::parse_host)]
    tls_san: Vec<String>,
    /// Seconds between the heartbeats every gRPC subscriber gets (OCM's default, at least 1).
    #[arg(long, default_value_t = 10,
          value_parser = clap::builder::RangedU64ValueParser::<u64>::new().range(1..=3600))]
    grpc_heartbeat_seconds: u64,
    /// Whether the gRPC server's `grpc_server_ce_*` metrics carry OCM's per-cluster `consumer`
    /// label (false: one series per data type, method and code, for fleets where a series per
    /// cluster is unwanted).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    grpc_metrics_per_cluster: bool,
    /// Serve the web console at `/ui/` (users sign in with their own bearer token; it shows
    /// and does only what their RBAC allows).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    enable_console: bool,
    /// Storage backend.
    #[arg(long, value_enum, default_value = "sled")]
    storage: StorageArg,
    /// sled's page cache in MiB (with --storage sled); the watch cache serves reads.
    #[arg(long, default_value_t = ocm_apiserver::serve::server::DEFAULT_SLED_CACHE_MB,
          value_parser = clap::builder::RangedU64ValueParser::<u64>::new().range(8..=65536))]
    sled_cache_mb: u64,
    /// Free space in MiB the sled store keeps on its disk (with --storage sled): with less, it
    /// refuses writes (serving reads) until there is more again. 0 keeps none.
    #[arg(long, default_value_t = ocm_storage::DEFAULT_MIN_FREE_BYTES >> 20)]
    sled_min_free_mb: u64,
    /// etcd endpoints, comma-separated (with --storage etcd). Every hub started on the same
    /// etcd is a replica of one hub: they elect a leader that runs the controllers.
    #[arg(long, value_delimiter = ',')]
    etcd_endpoints: Vec<String>,
    /// How long a replica waits, after it last saw the leader's Lease change, before it takes
    /// over (client-go's and kube-controller-manager's flag).
    #[arg(long, default_value = "15s", value_parser = admin::parse_duration)]
    leader_elect_lease_duration: Duration,
    /// How long the leader keeps trying to renew before it stops its controllers; shorter
    /// than the lease duration.
    #[arg(long, default_value = "10s", value_parser = admin::parse_duration)]
    leader_elect_renew_deadline: Duration,
    /// How often replicas try to take or renew the Lease.
    #[arg(long, default_value = "2s", value_parser = admin::parse_duration)]
    leader_elect_retry_period: Duration,
    /// Joins this replica with the hub's certificates uploaded by `ocm-hub upload-certs`
    /// (64 hexadecimal digits), when the data dir holds no pki/ yet (with --storage etcd).
    #[arg(long, value_parser = parse_certificate_key)]
    certificate_key: Option<ocm_apiserver::auth::sealed::CertificateKey>,
    /// What to serve: the OCM hub, or a plain Kubernetes API for agent tests.
    #[arg(long, value_enum, default_value = "hub")]
    profile: ProfileArg,
    /// Most non-watch read requests served at once; more wait in line (kube-apiserver's flag).
    #[arg(long, default_value_t = ocm_apiserver::auth::limits::DEFAULT_READONLY,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_requests_inflight: usize,
    /// Most mutating requests served at once; more wait in line (kube-apiserver's flag).
    #[arg(long, default_value_t = ocm_apiserver::auth::limits::DEFAULT_MUTATING,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_mutating_requests_inflight: usize,
    /// Most requests one identity (other than system:masters) may have in flight at once.
    #[arg(long, default_value_t = ocm_apiserver::auth::limits::DEFAULT_PER_IDENTITY,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_requests_inflight_per_user: usize,
    /// Seats reserved for Lease reads and renewals, so agents' heartbeats get through floods.
    #[arg(long, default_value_t = ocm_apiserver::auth::limits::DEFAULT_LEASE_LANE,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    lease_requests_inflight: usize,
    /// Longest a request over a limit waits in line for a seat before it is answered 429, as
    /// API Priority and Fairness queues; 0s answers 429 at once.
    #[arg(long, default_value = "5s", value_parser = parse_queue_wait)]
    request_queue_wait: Duration,
    /// Serving certificate (PEM) instead of the one the hub issues itself; re-read on change.
    #[arg(long, requires = "tls_private_key_file")]
    tls_cert_file: Option<PathBuf>,
    /// Key of --tls-cert-file.
    #[arg(long, requires = "tls_cert_file")]
    tls_private_key_file: Option<PathBuf>,
    /// A CA bundle trusted for client certificates besides the hub CA (repeatable).
    #[arg(long)]
    client_ca_file: Vec<PathBuf>,
    /// The front-proxy CA: connections with a client certificate from it may name the user in
    /// X-Remote-User / X-Remote-Group / X-Remote-Extra-* (aggregation behind kube-apiserver).
    #[arg(long)]
    requestheader_client_ca_file: Option<PathBuf>,
    /// Common names a front-proxy certificate may carry, comma-separated (any when empty).
    #[arg(long, value_delimiter = ',')]
    requestheader_allowed_names: Vec<String>,
    /// The issuer written into and required of service-account tokens.
    #[arg(long, default_value = ocm_apiserver::auth::tokens::DEFAULT_ISSUER)]
    service_account_issuer: String,
    /// Ask this kube-apiserver (`in-cluster` or a kubeconfig path) about bearer tokens the hub
    /// did not issue (TokenReview), for aggregated mode.
    #[arg(long)]
    authentication_kubeconfig: Option<String>,
    /// Connections served at once; more are closed on accept (a running agent holds up to three).
    #[arg(long, default_value_t = ocm_apiserver::serve::server::DEFAULT_MAX_CONNECTIONS,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_connections: usize,
    /// Which controllers run: `*` (all, the default) or `-*` (none: an API server alone, as
    /// kube-apiserver without kube-controller-manager).
    #[arg(long, default_value = "*", value_parser = ["*", "-*"])]
    controllers: String,
    /// Requesters (a CSR's spec.username, comma-separated) whose agents' bootstrap certificate
    /// requests are approved, and whose clusters are accepted, without an admin.
    #[arg(long, value_delimiter = ',')]
    auto_approve_identities: Vec<String>,
    /// The longest client certificate the CSR signer issues (a request's expirationSeconds may
    /// ask for less; at least 10m).
    #[arg(long, default_value = "8760h", value_parser = parse_signing_duration)]
    cluster_signing_duration: Duration,
    /// Ask this kube-apiserver (`in-cluster` or a kubeconfig path) about requests the hub's own
    /// RBAC denies (SubjectAccessReview), for aggregated mode.
    #[arg(long)]
    authorization_kubeconfig: Option<String>,
}

fn usage_error(message: &str) -> ExitCode {
    eprintln!("ocm-hub: {message}");
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
    let args = match cli.command {
        Command::Serve(args) => *args,
        Command::Token(command) => return token(command),
        Command::Accept { clusters, data_dir } => return accept(&clusters, &data_dir),
        Command::Get(what) => return get(what),
        Command::Rollout { verb } => return rollout(verb),
        Command::Backup { to, data_dir } => return backup(&to, &data_dir),
        Command::Kubeconfig { cluster, data_dir, kubeconfig } => {
            let source = kubeconfig.unwrap_or_else(|| data_dir.join("admin.kubeconfig"));
            return match ocm_apiserver::cli::kubeconfig::for_cluster(&source, &cluster) {
                Ok(yaml) => {
                    print!("{yaml}");
                    ExitCode::SUCCESS
                }
                Err(e) => usage_error(&e.to_string()),
            };
        }
        Command::UploadCerts { data_dir, etcd_endpoints } => {
            return upload_certs(&data_dir, etcd_endpoints);
        }
        Command::Restore { from, data_dir, storage, etcd_endpoints, bump_revision } => {
            let target = match storage {
                RestoreStorageArg::Sled => ocm_apiserver::cli::backup::Target::Sled,
                RestoreStorageArg::Etcd if etcd_endpoints.is_empty() => {
                    return usage_error("--storage etcd needs --etcd-endpoints");
                }
                RestoreStorageArg::Etcd => ocm_apiserver::cli::backup::Target::Etcd(etcd_endpoints),
            };
            return restore(&from, &data_dir, &target, bump_revision);
        }
        Command::Create(CreateCommand::Work {
            name,
            file,
            clusters,
            placement,
            overwrite,
            wait,
            timeout,
            data_dir,
        }) => {
            let targets = match placement {
                Some((namespace, name)) => fleet::Targets::Placement { namespace, name },
                None => fleet::Targets::Clusters(clusters),
            };
            let work = WorkCommand { name, file, targets, overwrite, wait, timeout };
            return create_work(work, &data_dir);
        }
    };
    let kubeconfigs = [&args.authentication_kubeconfig, &args.authorization_kubeconfig];
    for source in kubeconfigs.into_iter().flatten() {
        if source != "in-cluster" && !Path::new(source).is_file() {
            return usage_error(&format!(
                "{source} is neither \"in-cluster\" nor a readable kubeconfig file"
            ));
        }
    }
    for path in args.client_ca_file.iter().chain(&args.requestheader_client_ca_file) {
        if !path.is_file() {
            return usage_error(&format!("{} is not a readable file", path.display()));
        }
    }
    let storage = match args.storage {
        StorageArg::Sled => StorageChoice::Sled,
        StorageArg::Memory => StorageChoice::Memory,
        StorageArg::Etcd if args.etcd_endpoints.is_empty() => {
            return usage_error("--storage etcd needs --etcd-endpoints");
        }
        StorageArg::Etcd => StorageChoice::Etcd(args.etcd_endpoints),
    };
    let election = ocm_apiserver::controllers::leader::Timings {
        lease: args.leader_elect_lease_duration,
        renew_deadline: args.leader_elect_renew_deadline,
        retry: args.leader_elect_retry_period,
    };
    if let Err(e) = election.check() {
        return usage_error(&e);
    }
    if args.certificate_key.is_some() && !matches!(storage, StorageChoice::Etcd(_)) {
        return usage_error("--certificate-key joins a replica over etcd: it needs --storage etcd");
    }
    let mut config = ServeConfig::new(args.data_dir);
    config.leader_election = election;
    config.certificate_key = args.certificate_key;
    config.listen = args.listen;
    config.grpc_listen = Some(args.grpc_listen);
    config.advertise_address = args.advertise_address;
    config.tls_sans = args.tls_san;
    config.grpc_heartbeat = std::time::Duration::from_secs(args.grpc_heartbeat_seconds);
    config.grpc_metrics_per_cluster = args.grpc_metrics_per_cluster;
    if args.enable_console {
        config.routes = Some(ocm_apiserver::console::routes);
    }
    config.storage = storage;
    config.sled_cache_bytes = args.sled_cache_mb << 20;
    config.sled_min_free_bytes = args.sled_min_free_mb.saturating_mul(1 << 20);
    config.max_requests_inflight = args.max_requests_inflight;
    config.max_mutating_requests_inflight = args.max_mutating_requests_inflight;
    config.max_requests_inflight_per_user = args.max_requests_inflight_per_user;
    config.lease_requests_inflight = args.lease_requests_inflight;
    config.request_queue_wait = args.request_queue_wait;
    config.tls_cert = args.tls_cert_file.zip(args.tls_private_key_file);
    config.client_ca_files = args.client_ca_file;
    config.requestheader_ca = args.requestheader_client_ca_file;
    config.requestheader_allowed_names = args.requestheader_allowed_names;
    config.service_account_issuer = args.service_account_issuer;
    config.authentication_kubeconfig = args.authentication_kubeconfig;
    config.authorization_kubeconfig = args.authorization_kubeconfig;
    config.registration.enabled = args.controllers == "*";
    config.max_connections = args.max_connections;
    config.registration.auto_approve_identities = args.auto_approve_identities;
    config.registration.signing_duration = args.cluster_signing_duration;
    config.profile = match args.profile {
        ProfileArg::Hub => Profile::Hub,
        ProfileArg::Cluster => Profile::Cluster,
    };
    init_logging(logging.0, logging.1);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ocm-hub: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let hub = run(config, shutdown_signal(), |running| {
        tracing::info!(https = %running.https, grpc = ?running.grpc, "ready");
        if let Some(join) = &running.join_command {
            println!(
                "The hub is ready. To join a cluster, run this where the cluster's kubeconfig is \
                 (the token works for {}h; `ocm-hub token create` makes more):\n\n  {join}\n",
                ocm_apiserver::serve::server::FIRST_TOKEN_TTL.as_secs() / 3600
            );
        }
    });
    // The hub runs on the runtime's workers, not on this thread, which only waits: memory one
    // thread frees that another allocated returns to the allocator when its owner allocates
    // again, so what the start allocates here (every object of the watch cache) would never be
    // reused once freed.
    match runtime.block_on(runtime.spawn(hub)) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("ocm-hub: {e}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("ocm-hub: the hub's task failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `accept` against the running hub, a line per step.
fn accept(clusters: &[String], data_dir: &Path) -> ExitCode {
    client_command(async {
        let client = admin::client(data_dir).await?;
        admin::accept(client, clusters, |line| println!("{line}")).await?;
        println!(
            "accepted: {} (check with `kubectl --kubeconfig {} get managedclusters`)",
            clusters.join(", "),
            data_dir.join("admin.kubeconfig").display()
        );
        Ok(())
    })
}

/// Runs `backup` against the running hub: one line saying what the file holds.
fn backup(to: &Path, data_dir: &Path) -> ExitCode {
    client_command(async {
        let w = ocm_apiserver::cli::backup::backup(data_dir, to).await?;
        println!(
            "backed up {} objects at revision {} ({}) and {} identity files to {} ({} bytes)",
            w.objects,
            w.revision,
            w.backend,
            w.files,
            to.display(),
            w.bytes
        );
        Ok(())
    })
}

fn parse_certificate_key(s: &str) -> Result<ocm_apiserver::auth::sealed::CertificateKey, String> {
    ocm_apiserver::auth::sealed::CertificateKey::parse(s).map_err(|e| e.to_string())
}

/// Runs `upload-certs`: the key, and the command that starts a replica with it.
fn upload_certs(data_dir: &Path, endpoints: Vec<String>) -> ExitCode {
    client_command(async {
        let joined = endpoints.join(",");
        let up = ocm_apiserver::cli::certs::upload(data_dir, endpoints).await?;
        let expires = time::OffsetDateTime::from_unix_timestamp(up.expires as i64)
            .map(ocm_apiserver::machinery::object::rfc3339)
            .unwrap_or_else(|_| up.expires.to_string());
        println!("uploaded the hub's certificates, sealed, until {expires}; the certificate key:");
        println!("{}", up.key.to_hex());
        println!(
            "start a replica on another machine with: ocm-hub serve --storage etcd \
             --etcd-endpoints {joined} --certificate-key <the key> --data-dir ./ocm-data"
        );
        Ok(())
    })
}

/// Runs `restore`: one line saying what was made and how to serve it.
fn restore(
    from: &Path,
    data_dir: &Path,
    target: &ocm_apiserver::cli::backup::Target,
    bump: u64,
) -> ExitCode {
    client_command(async {
        let r = ocm_apiserver::cli::backup::restore(from, data_dir, target, bump).await?;
        let storage = match target {
            ocm_apiserver::cli::backup::Target::Sled => String::new(),
            ocm_apiserver::cli::backup::Target::Etcd(endpoints) => {
                format!(" --storage etcd --etcd-endpoints {}", endpoints.join(","))
            }
        };
        println!(
            "restored {} objects (backup revision {}, now revision {}) and {} identity files into \
             {}: serve it with `ocm-hub serve --data-dir {}{storage}` on the original hub's \
             addresses",
            r.objects,
            r.backup_revision,
            r.revision,
            r.files,
            data_dir.display(),
            data_dir.display()
        );
        Ok(())
    })
}

/// Runs a `get` command against the running hub.
fn get(what: GetCommand) -> ExitCode {
    client_command(async {
        let printed = match what {
            GetCommand::Clusters { printing } => {
                let client = admin::client(&printing.data_dir).await?;
                fleet::get_clusters(&client, output(&printing)).await?
            }
            GetCommand::Works { cluster, printing } => {
                let client = admin::client(&printing.data_dir).await?;
                fleet::get_works(&client, cluster.as_deref(), output(&printing)).await?
            }
            GetCommand::Placements { namespace, printing } => {
                let client = admin::client(&printing.data_dir).await?;
                fleet::get_placements(&client, namespace.as_deref(), output(&printing)).await?
            }
        };
        if printed.is_empty() {
            eprintln!("No resources found");
        }
        print!("{printed}");
        Ok(())
    })
}

/// Runs a `rollout` command against the running hub.
fn rollout(verb: RolloutVerb) -> ExitCode {
    use ocm_apiserver::cli::rollout as r;
    client_command(async {
        let printed = match verb {
            RolloutVerb::Status { set, watch, timeout } => {
                let client = admin::client(&set.data_dir).await?;
                let out = |line: &str| println!("{line}");
                r::status(&client, &set.namespace, &set.target, watch, timeout, out).await?;
                return Ok(());
            }
            RolloutVerb::History { set, revision } => {
                let client = admin::client(&set.data_dir).await?;
                r::history(&client, &set.namespace, &set.target, revision).await?
            }
            RolloutVerb::Pause { set } => {
                let client = admin::client(&set.data_dir).await?;
                r::pause(&client, &set.namespace, &set.target, true).await?
            }
            RolloutVerb::Resume { set } => {
                let client = admin::client(&set.data_dir).await?;
                r::pause(&client, &set.namespace, &set.target, false).await?
            }
            RolloutVerb::Undo { set, to_revision } => {
                let client = admin::client(&set.data_dir).await?;
                r::undo(&client, &set.namespace, &set.target, to_revision).await?
            }
        };
        println!("{}", printed.trim_end());
        Ok(())
    })
}

fn output(printing: &Printing) -> fleet::Output {
    printing.output.unwrap_or(fleet::Output::Table)
}

/// What `create work` was asked.
struct WorkCommand {
    name: String,
    file: PathBuf,
    targets: fleet::Targets,
    overwrite: bool,
    wait: bool,
    timeout: Duration,
}

/// Runs `create work`: one line per cluster, then (with --wait) a progress line on terminals.
fn create_work(work: WorkCommand, data_dir: &Path) -> ExitCode {
    let text = if work.file.as_os_str() == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).map(|_| text)
    } else {
        std::fs::read_to_string(&work.file)
    };
    let text = match text {
        Ok(t) => t,
        Err(e) => return usage_error(&format!("reading {}: {e}", work.file.display())),
    };
    let manifests = match fleet::read_manifests(&text) {
        Ok(m) => m,
        // One line: a YAML error's rendering may quote the source below it.
        Err(e) => {
            return usage_error(e.to_string().lines().next().unwrap_or("invalid manifest file"));
        }
    };
    client_command(async move {
        let client = admin::client(data_dir).await?;
        let clusters = fleet::resolve_targets(&client, &work.targets).await?;
        let generations = fleet::create_work(
            &client,
            &work.name,
            &manifests,
            &clusters,
            work.overwrite,
            |line| println!("{line}"),
        )
        .await?;
        if work.wait {
            let terminal = std::io::stderr().is_terminal();
            fleet::wait_applied(&client, &work.name, &generations, work.timeout, |done, all| {
                if terminal {
                    eprint!("\r{done}/{all} applied");
                }
            })
            .await
            .inspect_err(|_| {
                if terminal {
                    eprintln!();
                }
            })?;
            if terminal {
                eprintln!();
            }
            println!("manifestwork {} applied on {} cluster(s)", work.name, clusters.len());
        }
        Ok(())
    })
}

/// Runs a `token` command against the running hub.
fn token(command: TokenCommand) -> ExitCode {
    client_command(async {
        match command {
            TokenCommand::Create { data_dir, ttl } => {
                let token = admin::token_create(admin::client(&data_dir).await?, ttl).await?;
                println!("{token}");
            }
            TokenCommand::List { data_dir } => {
                let tokens = admin::token_list(admin::client(&data_dir).await?).await?;
                println!("{:<8} {:<22} GROUPS", "ID", "EXPIRES");
                for t in tokens {
                    println!("{:<8} {:<22} {}", t.id, t.expiration, t.groups);
                }
            }
            TokenCommand::Revoke { token, data_dir } => {
                let id = admin::token_revoke(admin::client(&data_dir).await?, &token).await?;
                println!("bootstrap token {id} revoked");
            }
        }
        Ok(())
    })
}

/// Runs a client command on a small runtime: a usage error exits 2, any other failure 1.
fn client_command(
    command: impl std::future::Future<Output = Result<(), admin::CliError>>,
) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ocm-hub: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(admin::CliError::Usage(message)) => usage_error(&message),
        Err(e) => {
            eprintln!("ocm-hub: {e}");
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
