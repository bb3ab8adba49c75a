//! The real kubectl (`kubectl` on the `PATH`, or `$OCM_KUBECTL_BIN`) run against a test hub
//! with the hub's own `admin.kubeconfig` and a private `HOME` (so its discovery cache is the
//! test's own), run in the foreground or in the background while a test changes objects, a
//! reader for the tables it prints, and the REST set-up and read-back the kubectl suites share.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use serde_json::{Value, json};

use crate::hub::TestHub;

/// Set to `1` to skip the kubectl suite where kubectl is missing (CI never sets it).
pub const SKIP_KUBECTL_ENV: &str = "OCM_SKIP_KUBECTL";

/// Whether the run was told to skip kubectl (`OCM_SKIP_KUBECTL=1`); when so, reported as the
/// running test skipping `what` ([`crate::skip::requested`]).
pub fn skip(what: &str) -> bool {
    crate::skip::requested(SKIP_KUBECTL_ENV, what)
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
        Kubectl::with_kubeconfig(hub.kubeconfig())
    }

    /// kubectl with another kubeconfig (another user: [`TestHub::kubeconfig_as`]).
    pub fn with_kubeconfig(kubeconfig: PathBuf) -> anyhow::Result<Kubectl> {
        let binary = crate::programs::find("kubectl", "OCM_KUBECTL_BIN").with_context(|| {
            format!(
                "kubectl not found on PATH: install kubectl 1.32, set OCM_KUBECTL_BIN, or set \
                 {SKIP_KUBECTL_ENV}=1 to skip the kubectl suite"
            )
        })?;
        Ok(Kubectl { binary, kubeconfig, home: tempfile::tempdir()? })
    }

    /// The command for `kubectl ARGS` with extra environment variables; `TMPDIR` is the private
    /// `HOME` too, so files kubectl leaves behind (`kubectl edit`'s copies) go with it.
    fn command(&self, args: &[&str], env: &[(&str, &str)]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.binary);
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .env("HOME", self.home.path())
            .env("TMPDIR", self.home.path())
            .env_remove("KUBECONFIG")
            .env_remove("KUBE_EDITOR")
            .env_remove("EDITOR")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }

    /// Runs `kubectl ARGS` with `stdin` (if any); at most 60 s.
    pub async fn run_with(&self, args: &[&str], stdin: Option<&str>) -> anyhow::Result<Run> {
        self.run_full(args, &[], stdin).await
    }

    /// Runs `kubectl ARGS` with extra environment variables (`KUBE_EDITOR`, ...).
    pub async fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<Run> {
        self.run_full(args, env, None).await
    }

    async fn run_full(
        &self,
        args: &[&str],
        env: &[(&str, &str)],
        stdin: Option<&str>,
    ) -> anyhow::Result<Run> {
        let mut cmd = self.command(args, env);
        cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
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

    /// Starts `kubectl ARGS` in the background, so the test can change objects while it runs
    /// (`get -w`, `wait`, a `delete` held by a finalizer).
    pub fn spawn(&self, args: &[&str]) -> anyhow::Result<Background> {
        let mut cmd = self.command(args, &[]);
        cmd.stdin(Stdio::null());
        let mut child = cmd.spawn().with_context(|| format!("starting kubectl {args:?}"))?;
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let readers = vec![
            collect(child.stdout.take().context("stdout pipe")?, Arc::clone(&stdout)),
            collect(child.stderr.take().context("stderr pipe")?, Arc::clone(&stderr)),
        ];
        let args = args.iter().map(|a| (*a).to_owned()).collect();
        Ok(Background { args, child, stdout, stderr, readers })
    }

    /// Starts `kubectl ARGS -v=6` in the background and returns once it has opened its watch
    /// (its log shows the `watch=true` request answered), so whatever the test changes next
    /// reaches kubectl through the watch, not through its first read.
    pub async fn spawn_watching(&self, args: &[&str]) -> anyhow::Result<Background> {
        let mut with_log: Vec<&str> = args.to_vec();
        with_log.push("-v=6");
        let mut bg = self.spawn(&with_log)?;
        bg.logged("watch=true").await?;
        Ok(bg)
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

/// Copies a pipe into `into` until it closes.
fn collect(
    mut pipe: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    into: Arc<Mutex<Vec<u8>>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut buf = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut buf).await {
            if n == 0 {
                break;
            }
            into.lock().unwrap_or_else(PoisonError::into_inner).extend_from_slice(&buf[..n]);
        }
    })
}

/// A kubectl started with [`Kubectl::spawn`]; killed if dropped before [`Background::finish`].
#[derive(Debug)]
pub struct Background {
    args: Vec<String>,
    child: tokio::process::Child,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    readers: Vec<tokio::task::JoinHandle<()>>,
}

impl Background {
    /// What it printed to standard output so far.
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.stdout.lock().unwrap_or_else(PoisonError::into_inner))
            .into_owned()
    }

    /// Waits (at most 30 s) until its standard output contains `needle`.
    pub async fn printed(&mut self, needle: &str) -> anyhow::Result<()> {
        self.wait_for(needle, false).await
    }

    /// Waits (at most 30 s) until its standard error (where `-v=6` logs each request)
    /// contains `needle`.
    pub async fn logged(&mut self, needle: &str) -> anyhow::Result<()> {
        self.wait_for(needle, true).await
    }

    async fn wait_for(&mut self, needle: &str, stderr: bool) -> anyhow::Result<()> {
        let seen = |b: &Background| {
            let pipe = if stderr { &b.stderr } else { &b.stdout };
            String::from_utf8_lossy(&pipe.lock().unwrap_or_else(PoisonError::into_inner))
                .into_owned()
        };
        for _ in 0..600 {
            if seen(self).contains(needle) {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait()? {
                // Exited: the readers finish with what is left in the pipes.
                for r in self.readers.drain(..) {
                    r.await?;
                }
                let text = seen(self);
                ensure!(
                    text.contains(needle),
                    "kubectl {:?} exited ({status}) without writing {needle:?}: {text}",
                    self.args,
                );
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("kubectl {:?} did not write {needle:?} in 30 s: {}", self.args, seen(self))
    }

    /// Whether it has exited.
    pub fn exited(&mut self) -> anyhow::Result<bool> {
        Ok(self.child.try_wait()?.is_some())
    }

    /// Waits (at most 60 s) for it to exit; everything it printed.
    pub async fn finish(mut self) -> anyhow::Result<Run> {
        let status = tokio::time::timeout(Duration::from_secs(60), self.child.wait())
            .await
            .with_context(|| format!("kubectl {:?} did not finish in 60 s", self.args))??;
        for r in self.readers.drain(..) {
            r.await?;
        }
        let text = |b: &Mutex<Vec<u8>>| {
            String::from_utf8_lossy(&b.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
        };
        Ok(Run {
            code: status.code().unwrap_or(-1),
            stdout: text(&self.stdout),
            stderr: text(&self.stderr),
        })
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

// ---------------------------------------------------------------------------------------------
// What every kubectl scenario shares: a fresh hub, REST set-up and read-back.

/// A memory hub, a REST client for set-up and read-back, and kubectl; `None` when the suite
/// is skipped (`OCM_SKIP_KUBECTL=1`, reported as the whole test skipped).
pub async fn setup() -> anyhow::Result<Option<(TestHub, reqwest::Client, Kubectl)>> {
    if skip("the whole test") {
        return Ok(None);
    }
    let hub = TestHub::start(crate::hub::Backend::Memory).await?;
    let http = hub.http()?;
    let kubectl = Kubectl::new(&hub)?;
    Ok(Some((hub, http, kubectl)))
}

/// POSTs `body` to `path` (expects 201) and returns the stored object.
pub async fn create(
    hub: &TestHub,
    http: &reqwest::Client,
    path: &str,
    body: Value,
) -> anyhow::Result<Value> {
    let resp = http.post(format!("{}{path}", hub.url)).json(&body).send().await?;
    let code = resp.status().as_u16();
    let v: Value = resp.json().await?;
    ensure!(code == 201, "POST {path}: {code} {v}");
    Ok(v)
}

/// Reads a stored object (or list) over REST; it must exist.
pub async fn stored(hub: &TestHub, http: &reqwest::Client, path: &str) -> anyhow::Result<Value> {
    let resp = http.get(format!("{}{path}", hub.url)).send().await?;
    let code = resp.status().as_u16();
    ensure!(code == 200, "GET {path}: {code} {}", resp.text().await?);
    Ok(resp.json().await?)
}

/// GETs `path?param=value` (the value URL-encoded): the status code and the body.
pub async fn get_with(
    hub: &TestHub,
    http: &reqwest::Client,
    path: &str,
    param: &str,
    value: &str,
) -> anyhow::Result<(u16, Value)> {
    let mut url = reqwest::Url::parse(&format!("{}{path}", hub.url))?;
    url.query_pairs_mut().append_pair(param, value);
    let resp = http.get(url).send().await?;
    Ok((resp.status().as_u16(), resp.json().await?))
}

/// Whether `path` is gone (GET answers 404); any answer but 200 or 404 is an error.
pub async fn absent(hub: &TestHub, http: &reqwest::Client, path: &str) -> anyhow::Result<bool> {
    let resp = http.get(format!("{}{path}", hub.url)).send().await?;
    match resp.status().as_u16() {
        200 => Ok(false),
        404 => Ok(true),
        code => bail!("GET {path}: {code} {}", resp.text().await?),
    }
}

/// Sends a JSON merge patch to `path` (expects 200); the stored object.
pub async fn merge_patch(
    hub: &TestHub,
    http: &reqwest::Client,
    path: &str,
    patch: Value,
) -> anyhow::Result<Value> {
    let resp = http
        .patch(format!("{}{path}", hub.url))
        .header("content-type", "application/merge-patch+json")
        .body(patch.to_string())
        .send()
        .await?;
    let code = resp.status().as_u16();
    let v: Value = resp.json().await?;
    ensure!(code == 200, "PATCH {path}: {code} {v}");
    Ok(v)
}

/// DELETEs `path` (expects 200).
pub async fn delete(hub: &TestHub, http: &reqwest::Client, path: &str) -> anyhow::Result<()> {
    let resp = http.delete(format!("{}{path}", hub.url)).send().await?;
    let code = resp.status().as_u16();
    ensure!(code == 200, "DELETE {path}: {code} {}", resp.text().await?);
    Ok(())
}

/// The names of a stored list's items, in order.
pub fn item_names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .map(|items| {
            items.iter().filter_map(|o| o["metadata"]["name"].as_str().map(str::to_owned)).collect()
        })
        .unwrap_or_default()
}

/// Whether `s` is an age kubectl printed (`5s`, `3m2s`, `326d`).
pub fn is_age(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_digit())
        && s.ends_with(|c: char| c.is_ascii_alphabetic())
        && s.chars().all(|c| c.is_ascii_alphanumeric())
}

/// The ManagedCluster path (cluster-scoped).
pub const MCL: &str = "/apis/cluster.open-cluster-management.io/v1/managedclusters";

/// A ManagedCluster `name` with `labels`, accepted by the hub, with one client config URL.
pub fn cluster(name: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedCluster",
        "metadata": {"name": name, "labels": labels},
        "spec": {"hubAcceptsClient": true,
                 "managedClusterClientConfigs": [{"url": format!("https://{name}:6443")}]},
    })
}

/// Writes a manifest file `name` into `dir`; its path, for `kubectl -f`.
pub fn write_manifest(dir: &tempfile::TempDir, name: &str, text: &str) -> anyhow::Result<String> {
    let path = dir.path().join(name);
    std::fs::write(&path, text)?;
    Ok(path.to_str().context("utf-8 path")?.to_owned())
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
