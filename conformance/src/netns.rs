//! A network namespace of a test's own, joined to the host by two veth links: the store link,
//! over which a process inside reaches etcd, and the client link, over which the test reaches
//! that process. Cutting the store link (its host end set down) partitions the process from the
//! store while the test still sees it; setting it up again heals the partition, and TCP
//! delivers whatever was sent meanwhile. Creating one needs root and `ip` (iproute2); without
//! root the test fails saying so, unless the run is told to do without (`OCM_SKIP_NETNS=1`,
//! reported as a skip).

use std::net::Ipv4Addr;
use std::process::Command;

use anyhow::Context as _;

/// Whether this run skips the tests that make a network namespace (`OCM_SKIP_NETNS=1`, for a
/// run without root); if it does, the running test is reported as skipping `what`.
pub fn skip(what: &str) -> bool {
    crate::skip::requested("OCM_SKIP_NETNS", what)
}

/// A network namespace and its two links, deleted on drop (its veth ends go with it).
#[derive(Debug)]
pub struct Netns {
    name: String,
    /// The third octet of the links' addresses, and the suffix of every name here.
    tag: u8,
}

impl Netns {
    /// Makes the namespace `ocm-test-<tag>` (the first tag free), its loopback, and the two
    /// links: the store link `10.201.<tag>.0/30` and the client link `10.202.<tag>.0/30`, the
    /// host at `.1` and the namespace at `.2` of each.
    pub fn create() -> anyhow::Result<Netns> {
        let start = std::process::id() % 250;
        for offset in 0..250 {
            let tag = ((start + offset) % 250 + 1) as u8;
            let name = format!("ocm-test-{tag}");
            let out = Command::new("ip")
                .args(["netns", "add", &name])
                .output()
                .context("running ip (this test needs iproute2 and root)")?;
            if out.status.success() {
                let netns = Netns { name, tag };
                netns.link("s", 201)?;
                netns.link("c", 202)?;
                netns.inside(&["link", "set", "lo", "up"])?;
                return Ok(netns);
            }
            let err = String::from_utf8_lossy(&out.stderr);
            anyhow::ensure!(
                err.contains("File exists"),
                "cannot make a network namespace: {}; this test needs root, to partition a \
                 process from etcd (OCM_SKIP_NETNS=1 skips it)",
                err.trim()
            );
        }
        anyhow::bail!("no free network namespace name ocm-test-1 to ocm-test-250")
    }

    /// The namespace's name, for `ip netns exec`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The host's end of the store link: where a process inside reaches what the host serves
    /// there.
    pub fn store_host(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 201, self.tag, 1)
    }

    /// The namespace's end of the client link: where a process inside listens for the test.
    pub fn client_inside(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 202, self.tag, 2)
    }

    /// Cuts the store link: nothing passes either way until [`Netns::heal`].
    pub fn cut(&self) -> anyhow::Result<()> {
        ip(&["link", "set", &self.host_end("s"), "down"])
    }

    /// Heals the store link.
    pub fn heal(&self) -> anyhow::Result<()> {
        ip(&["link", "set", &self.host_end("s"), "up"])
    }

    /// A veth pair `ocm<kind><tag>` (host) and `ocm<kind><tag>n` (inside), addressed in
    /// `10.<octet>.<tag>.0/30` and up.
    fn link(&self, kind: &str, octet: u8) -> anyhow::Result<()> {
        let host = self.host_end(kind);
        let inner = format!("{host}n");
        ip(&["link", "add", &host, "type", "veth", "peer", "name", &inner])?;
        ip(&["link", "set", &inner, "netns", &self.name])?;
        ip(&["addr", "add", &format!("10.{octet}.{}.1/30", self.tag), "dev", &host])?;
        ip(&["link", "set", &host, "up"])?;
        self.inside(&["addr", "add", &format!("10.{octet}.{}.2/30", self.tag), "dev", &inner])?;
        self.inside(&["link", "set", &inner, "up"])
    }

    fn host_end(&self, kind: &str) -> String {
        format!("ocm{kind}{}", self.tag)
    }

    /// `ip` run inside the namespace.
    fn inside(&self, args: &[&str]) -> anyhow::Result<()> {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        ip(&all)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).output();
        let _ = Command::new("ip").args(["link", "del", &self.host_end("s")]).output();
        let _ = Command::new("ip").args(["link", "del", &self.host_end("c")]).output();
    }
}

fn ip(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip").args(args).output().context("running ip")?;
    anyhow::ensure!(
        out.status.success(),
        "ip {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}
