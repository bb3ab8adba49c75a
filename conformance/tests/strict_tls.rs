//! The hub's certificates pass the strict X.509 checks current TLS stacks make: Python's
//! `ssl` with `VERIFY_X509_STRICT` (Python 3.13's default, which urllib3 2.3+ keeps) reaches
//! the hub and reads `/version`, and `openssl verify -x509_strict` accepts the serving and
//! admin certificates (an Authority Key Identifier on each, a Subject Key Identifier on the CA).

use anyhow::ensure;
use ocm_conformance::hub::{Backend, TestHub};
use ocm_conformance::programs;

/// Connects with a default context made strict, as Python 3.13's is, presenting the admin
/// certificate; prints the status and the body of `/version`, then of `/api`.
const PYTHON_STRICT: &str = r#"
import ssl, sys, urllib.request
url, ca, cert, key = sys.argv[1:5]
ctx = ssl.create_default_context(cafile=ca)
ctx.verify_flags |= ssl.VERIFY_X509_STRICT
ctx.load_cert_chain(cert, key)
for path in ("/version", "/api"):
    with urllib.request.urlopen(url + path, context=ctx, timeout=30) as r:
        print(r.status, r.read().decode()[:60].replace("\n", " "))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_python_and_openssl_accept_the_hubs_certificates() -> anyhow::Result<()> {
    let python = programs::required("python3", "OCM_PYTHON3", "python3")?;
    let openssl = programs::required("openssl", "OCM_OPENSSL", "openssl")?;
    let hub = TestHub::start(Backend::Memory).await?;
    let pki = hub.path().join("pki");
    let out = tokio::task::block_in_place(|| {
        std::process::Command::new(&python)
            .args(["-c", PYTHON_STRICT, &hub.url])
            .args([pki.join("ca.crt"), pki.join("admin.crt"), pki.join("admin.key")])
            .output()
    })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure!(
        out.status.success(),
        "strict Python refused the hub: {}{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    ensure!(
        lines.len() == 2 && lines.iter().all(|l| l.starts_with("200 {")),
        "strict Python read {stdout:?}"
    );
    let out = tokio::task::block_in_place(|| {
        std::process::Command::new(&openssl)
            .args(["verify", "-x509_strict", "-CAfile"])
            .arg(pki.join("ca.crt"))
            .args([pki.join("serving.crt"), pki.join("admin.crt")])
            .output()
    })?;
    ensure!(
        out.status.success(),
        "openssl verify -x509_strict: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    hub.stop().await;
    Ok(())
}
