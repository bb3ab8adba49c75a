//! The real kubectl (`kubectl` on the `PATH`, or `$OCM_KUBECTL_BIN`) run against a test hub
//! with the hub's own `admin.kubeconfig` and a private `HOME` (so its discovery cache is the
//! test's own), and a reader for the tables it prints.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use tokio::io::AsyncWriteExt as _;

use crate::hub::TestHub;

/// Set to `1` to skip the kubectl suite where kubectl is missing (CI never sets it).
pub const SKIP_KUBECTL_ENV: &str = "OCM_SKIP_KUBECTL";

/// Whether the kubectl suite was told to skip.
pub fn skip_requested() -> bool {
    std::env::var(SKIP_KUBECTL_ENV).is_ok_and(|v| v == "1")
}

/// What one kubectl run did.
#[derive(Debug)]
pub struct Run {
    /// Exit status (-1 when killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// kubectl bound to one hub.
#[derive(Debug)]
pub struct Kubectl {
    binary: PathBuf,
    kubeconfig: PathBuf,
    home: tempfile::TempDir,
}

impl Kubectl {
    /// kubectl for `hub`; an error naming what to install when kubectl is missing.
    pub fn new(hub: &TestHub) -> anyhow::Result<Kubectl> {
        let binary = crate::programs::find("kubectl", "OCM_KUBECTL_BIN").with_context(|| {
            format!(
                "kubectl not found on PATH: install kubectl 1.32, set OCM_KUBECTL_BIN, or set \
                 {SKIP_KUBECTL_ENV}=1 to skip the kubectl suite"
            )
        })?;
        Ok(Kubectl { binary, kubeconfig: hub.kubeconfig(), home: tempfile::tempdir()? })
    }

    /// Runs `kubectl ARGS` with `stdin` (if any); at most 60 s.
    pub async fn run_with(&self, args: &[&str], stdin: Option<&str>) -> anyhow::Result<Run> {
        let mut cmd = tokio::process::Command::new(&self.binary);
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .env("HOME", self.home.path())
            .env_remove("KUBECONFIG")
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().with_context(|| format!("starting kubectl {args:?}"))?;
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(text.as_bytes()).await?;
        }
        let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .with_context(|| format!("kubectl {args:?} did not finish in 60 s"))??;
        Ok(Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }

    /// Runs `kubectl ARGS`.
    pub async fn run(&self, args: &[&str]) -> anyhow::Result<Run> {
        self.run_with(args, None).await
    }

    /// Runs `kubectl ARGS`, which must succeed; its standard output.
    pub async fn ok(&self, args: &[&str]) -> anyhow::Result<String> {
        let r = self.run(args).await?;
        ensure!(r.code == 0, "kubectl {args:?} exited {}: {}{}", r.code, r.stdout, r.stderr);
        Ok(r.stdout)
    }
}

/// A table kubectl printed: its header cells and rows, cut at the header's column starts (a
/// column starts where a header word follows two or more spaces), so empty cells stay empty.
#[derive(Debug, PartialEq, Eq)]
pub struct Printed {
    /// Column headers.
    pub header: Vec<String>,
    /// Cells per row.
    pub rows: Vec<Vec<String>>,
}

impl Printed {
    /// Reads kubectl's table output.
    pub fn parse(text: &str) -> anyhow::Result<Printed> {
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let Some(head) = lines.next() else { bail!("no table in {text:?}") };
        let bytes = head.as_bytes();
        let mut starts = vec![0];
        for i in 2..bytes.len() {
            if bytes[i] != b' ' && bytes[i - 1] == b' ' && bytes[i - 2] == b' ' {
                starts.push(i);
            }
        }
        let cut = |line: &str| -> Vec<String> {
            starts
                .iter()
                .enumerate()
                .map(|(k, &s)| {
                    let end = starts.get(k + 1).copied().unwrap_or(usize::MAX).min(line.len());
                    line.get(s.min(line.len())..end).unwrap_or("").trim().to_owned()
                })
                .collect()
        };
        Ok(Printed { header: cut(head), rows: lines.map(cut).collect() })
    }

    /// The cell of `row` under `column`.
    pub fn cell(&self, row: usize, column: &str) -> anyhow::Result<&str> {
        let at = self
            .header
            .iter()
            .position(|h| h == column)
            .with_context(|| format!("no column {column:?} in {:?}", self.header))?;
        let r = self.rows.get(row).with_context(|| format!("no row {row}: {self:?}"))?;
        Ok(r.get(at).map(String::as_str).unwrap_or(""))
    }

    /// The first cell of every row (the names).
    pub fn names(&self) -> Vec<&str> {
        self.rows.iter().map(|r| r.first().map(String::as_str).unwrap_or("")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_cells_stay_in_their_column() {
        let text = "NAME   HUB ACCEPTED   MANAGED CLUSTER URLS   JOINED   AVAILABLE   AGE\n\
                    c1     true           https://c1:6443                             5s\n";
        let t = Printed::parse(text).unwrap();
        assert_eq!(
            t.header,
            ["NAME", "HUB ACCEPTED", "MANAGED CLUSTER URLS", "JOINED", "AVAILABLE", "AGE"]
        );
        assert_eq!(t.cell(0, "JOINED").unwrap(), "");
        assert_eq!(t.cell(0, "AGE").unwrap(), "5s");
        assert_eq!(t.names(), ["c1"]);
    }
}
