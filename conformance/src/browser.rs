//! The browser the console's tests drive: Debian's `chromium` (or `$CHROMIUM`), through the
//! `playwright-core` npm package installed under `conformance/console/` (`npm ci` there), run
//! by the machine's Node.js. `OCM_SKIP_BROWSER=1` skips where they are missing; otherwise a
//! missing piece fails the test naming how to install it.

use std::path::PathBuf;

use crate::programs;

/// What a browser test runs with.
pub struct Browser {
    /// The Chromium binary.
    pub chromium: PathBuf,
    /// `node`.
    pub node: PathBuf,
    /// `conformance/console/`, where the scripts and their `node_modules` live.
    pub dir: PathBuf,
}

/// The browser and its driver, `None` when this run skips browser tests (reported), or an error
/// naming what to install.
pub fn require(what: &str) -> anyhow::Result<Option<Browser>> {
    if crate::skip::requested("OCM_SKIP_BROWSER", what) {
        return Ok(None);
    }
    let chromium = programs::find("chromium", "CHROMIUM").ok_or_else(|| {
        anyhow::anyhow!("chromium not found: run `apt-get install -y chromium` (or set CHROMIUM)")
    })?;
    let node = programs::find("node", "NODE")
        .ok_or_else(|| anyhow::anyhow!("node not found: install Node.js 20 or later"))?;
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("console");
    if !dir.join("node_modules/playwright-core/package.json").is_file() {
        anyhow::bail!("playwright-core is not installed: run `npm ci --prefix {}`", dir.display());
    }
    Ok(Some(Browser { chromium, node, dir }))
}

/// Where tests keep what they leave for people to look at (screenshots):
/// `$OCM_ARTIFACTS_DIR`, else `target/test-artifacts` of the workspace.
pub fn artifacts_dir() -> PathBuf {
    match std::env::var_os("OCM_ARTIFACTS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/test-artifacts"),
    }
}
