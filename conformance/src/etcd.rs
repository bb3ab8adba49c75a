//! A real etcd for tests and benchmarks: Debian's `etcd` binary started on free loopback ports
//! with a temporary data dir, stopped (and its data removed) when the handle is dropped; it can
//! be stopped and started again on the same ports and data (an outage).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::ports::free_ports;

/// The environment variable that lets a local run skip the etcd suites. CI never sets it.
pub const SKIP_ETCD_ENV: &str = "OCM_SKIP_ETCD";

/// A running etcd member.
#[derive(Debug)]
pub struct EtcdServer {
    child: Child,
    dir: tempfile::TempDir,
    /// The client and peer ports.
    ports: (u16, u16),
    /// The member's name and the cluster it belongs to (`name=peerURL,...`).
    member: Member,
    /// The client URL, `http://127.0.0.1:PORT`.
    pub endpoint: String,
}

/// A member's name and the initial cluster it was started in.
#[derive(Debug, Clone)]
struct Member {
    name: String,
    initial_cluster: String,
    /// A further address it serves clients on (besides loopback), if any.
    also_on: Option<Ipv4Addr>,
}

/// Whether this run skips etcd (`OCM_SKIP_ETCD=1`); if it does, the running test is reported as
/// skipping `what` ([`crate::skip::requested`]).
pub fn skip(what: &str) -> bool {
    crate::skip::requested(SKIP_ETCD_ENV, what)
}

/// The etcd binary: `$OCM_ETCD_BIN`, or `etcd` on the `PATH`.
pub fn find_binary() -> anyhow::Result<PathBuf> {
    if let Some(found) = crate::programs::find("etcd", "OCM_ETCD_BIN") {
        return Ok(found);
    }
    bail!(
        "etcd not found on PATH: install Debian's etcd-server (`apt-get install -y etcd-server`), \
         set OCM_ETCD_BIN, or set {SKIP_ETCD_ENV}=1 to skip the etcd suites"
    )
}

/// Tries at a start on fresh ports when the ones picked were taken before etcd bound them.
const START_ATTEMPTS: usize = 5;

impl EtcdServer {
    /// Starts a single-member etcd and waits until it reports healthy. A free port is picked
    /// and then handed to etcd, so another process may take it in between (tests run in
    /// parallel): etcd then exits with "address already in use", and the start is tried again
    /// on new ports.
    pub fn start() -> anyhow::Result<EtcdServer> {
        let mut attempt = 1;
        loop {
            match EtcdServer::start_once() {
                Err(e)
                    if attempt < START_ATTEMPTS
                        && format!("{e:#}").contains("address already in use") =>
                {
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    fn start_once() -> anyhow::Result<EtcdServer> {
        let dir = tempfile::tempdir().context("creating etcd data dir")?;
        let picked = free_ports(2)?;
        let ports = (picked[0], picked[1]);
        let member = Member {
            name: "test".into(),
            initial_cluster: format!("test=http://127.0.0.1:{}", ports.1),
            also_on: None,
        };
        let child = spawn(dir.path(), ports, &member)?;
        let endpoint = format!("http://127.0.0.1:{}", ports.0);
        let mut server = EtcdServer { child, dir, ports, member, endpoint };
        server.wait_healthy(ports.0)?;
        Ok(server)
    }

    /// Starts a cluster of `members` members on loopback and waits until each is healthy
    /// (a member is healthy once the cluster has a leader). Ports taken meanwhile are retried
    /// as for one member.
    pub fn start_cluster(members: usize) -> anyhow::Result<Vec<EtcdServer>> {
        EtcdServer::start_cluster_also_on(members, None)
    }

    /// [`EtcdServer::start_cluster`] with every member also serving clients on `also_on` (an
    /// address of this host other than loopback, such as a network namespace's link).
    pub fn start_cluster_also_on(
        members: usize,
        also_on: Option<Ipv4Addr>,
    ) -> anyhow::Result<Vec<EtcdServer>> {
        let mut attempt = 1;
        loop {
            match EtcdServer::start_cluster_once(members, also_on) {
                Err(e)
                    if attempt < START_ATTEMPTS
                        && format!("{e:#}").contains("address already in use") =>
                {
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    fn start_cluster_once(
        members: usize,
        also_on: Option<Ipv4Addr>,
    ) -> anyhow::Result<Vec<EtcdServer>> {
        let ports: Vec<(u16, u16)> =
            free_ports(2 * members)?.chunks(2).map(|pair| (pair[0], pair[1])).collect();
        let initial_cluster = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer))| format!("m{i}=http://127.0.0.1:{peer}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut servers = Vec::with_capacity(members);
        for (i, ports) in ports.into_iter().enumerate() {
            let dir = tempfile::tempdir().context("creating etcd data dir")?;
            let member =
                Member { name: format!("m{i}"), initial_cluster: initial_cluster.clone(), also_on };
            let child = spawn(dir.path(), ports, &member)?;
            let endpoint = format!("http://127.0.0.1:{}", ports.0);
            servers.push(EtcdServer { child, dir, ports, member, endpoint });
        }
        for server in &mut servers {
            server.wait_healthy(server.ports.0)?;
        }
        Ok(servers)
    }

    /// Kills the member (as a crash would), keeping its data and ports for [`EtcdServer::restart`].
    pub fn stop(&mut self) -> anyhow::Result<()> {
        let _ = self.child.kill();
        self.child.wait()?;
        Ok(())
    }

    /// Starts the stopped member again on its ports with its data, and waits until it is
    /// healthy.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.child = spawn(self.dir.path(), self.ports, &self.member)?;
        self.wait_healthy(self.ports.0)
    }

    fn wait_healthy(&mut self, port: u16) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                bail!("etcd exited early with {status}; log:\n{}", self.log());
            }
            if health(port).unwrap_or(false) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!("etcd did not become healthy within 30 s; log:\n{}", self.log())
    }

    /// What etcd logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default()
    }

    /// The client URL at `host` (loopback, or the address it also serves on).
    pub fn endpoint_at(&self, host: Ipv4Addr) -> String {
        format!("http://{host}:{}", self.ports.0)
    }

    /// The member's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// Loopback's client URL, and the member's further address's if it has one.
fn listen_client_urls(endpoint: &str, member: &Member, client_port: u16) -> String {
    match member.also_on {
        Some(host) => format!("{endpoint},http://{host}:{client_port}"),
        None => endpoint.to_owned(),
    }
}

/// etcd as `member` on `ports` (client, peer) with its data and log under `dir`.
fn spawn(
    dir: &std::path::Path,
    (client_port, peer_port): (u16, u16),
    member: &Member,
) -> anyhow::Result<Child> {
    let binary = find_binary()?;
    let endpoint = format!("http://127.0.0.1:{client_port}");
    let peer = format!("http://127.0.0.1:{peer_port}");
    let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("etcd.log"))?;
    Command::new(&binary)
        .arg(format!("--name={}", member.name))
        .arg(format!("--data-dir={}", dir.join("data").display()))
        .arg(format!("--listen-client-urls={}", listen_client_urls(&endpoint, member, client_port)))
        .arg(format!("--advertise-client-urls={endpoint}"))
        .arg(format!("--listen-peer-urls={peer}"))
        .arg(format!("--initial-advertise-peer-urls={peer}"))
        .arg(format!("--initial-cluster={}", member.initial_cluster))
        // Our values may be 1.5 MiB; etcd's default request limit is exactly that, so leave
        // room for the key and the transaction around it.
        .arg("--max-request-bytes=2097152")
        .arg("--quota-backend-bytes=8589934592")
        .arg("--logger=zap")
        .arg("--log-level=error")
        .stdin(Stdio::null())
        .stdout(Stdio::from(log.try_clone()?))
        .stderr(Stdio::from(log))
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))
}

fn health(port: u16) -> std::io::Result<bool> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(1)))?;
    stream.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut body = String::new();
    stream.read_to_string(&mut body)?;
    Ok(body.contains("\"health\":\"true\""))
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
