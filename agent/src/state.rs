//! The agent's data dir: what it needs to restart without joining again. `state.json` (hub URL,
//! cluster and agent names), `ca.crt` (the hub CA it trusts), `tls.crt` and `tls.key` (its hub
//! credentials; the key never leaves this directory) and `bootstrap.token`, all secrets with
//! 0600 permissions, written atomically (a temporary file renamed into place).

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::AgentError;

/// Who the agent is and which hub it belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Identity {
    /// The hub's URL.
    pub hub: String,
    /// The managed cluster's name.
    pub cluster_name: String,
    /// This agent's name (the last part of its certificate's CN).
    pub agent_name: String,
}

/// The data dir.
#[derive(Debug, Clone)]
pub struct DataDir {
    path: PathBuf,
}

fn file_err(path: &Path) -> impl FnOnce(std::io::Error) -> AgentError + '_ {
    move |e| AgentError::File { path: path.to_owned(), detail: e.to_string() }
}

impl DataDir {
    /// The data dir at `path` (created when written to).
    pub fn new(path: impl Into<PathBuf>) -> DataDir {
        DataDir { path: path.into() }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Writes `name` atomically; `secret` files get 0600 permissions from the start. Each
    /// write has a temporary file of its own, so two loops writing the same file at once (the
    /// work and policy agents learning the gRPC server) never write into one another's.
    pub fn write(&self, name: &str, contents: &[u8], secret: bool) -> Result<(), AgentError> {
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        fs::create_dir_all(&self.path).map_err(file_err(&self.path))?;
        let target = self.file(name);
        let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = self.file(&format!(".{name}.{n}.tmp"));
        let mut opts = fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            opts.mode(if secret { 0o600 } else { 0o644 });
        }
        let mut f = opts.open(&tmp).map_err(file_err(&tmp))?;
        f.write_all(contents).map_err(file_err(&tmp))?;
        f.sync_all().map_err(file_err(&tmp))?;
        fs::rename(&tmp, &target).map_err(file_err(&target))
    }

    /// [`DataDir::write`] on tokio's blocking pool: its `fsync` takes milliseconds, and an
    /// agent's loops share their task (a simulator's thousand agents share two threads), so a
    /// write made in a loop must not hold them meanwhile.
    pub async fn write_async(
        &self,
        name: &'static str,
        contents: Vec<u8>,
        secret: bool,
    ) -> Result<(), AgentError> {
        let dir = self.clone();
        tokio::task::spawn_blocking(move || dir.write(name, &contents, secret)).await.map_err(
            |e| AgentError::File { path: self.file(name), detail: format!("write ended: {e}") },
        )?
    }

    /// Reads `name`, `None` when it does not exist.
    pub fn read(&self, name: &str) -> Result<Option<String>, AgentError> {
        let path = self.file(name);
        match fs::read_to_string(&path) {
            Ok(s) => Ok(Some(s)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(file_err(&path)(e)),
        }
    }

    /// The identity, if the agent has joined (or started joining).
    pub fn identity(&self) -> Result<Option<Identity>, AgentError> {
        let Some(text) = self.read("state.json")? else { return Ok(None) };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| AgentError::File { path: self.file("state.json"), detail: e.to_string() })
    }

    /// Records the identity.
    pub fn save_identity(&self, id: &Identity) -> Result<(), AgentError> {
        let text = serde_json::to_vec_pretty(id).map_err(|e| AgentError::Invalid(e.to_string()))?;
        self.write("state.json", &text, false)
    }

    /// The hub credentials (certificate, key), if issued.
    pub fn credentials(&self) -> Result<Option<(String, String)>, AgentError> {
        Ok(self.read("tls.crt")?.zip(self.read("tls.key")?))
    }

    /// Stores new hub credentials: the key first, so a reader that sees the new certificate
    /// sees its key.
    pub fn save_credentials(&self, cert_pem: &str, key_pem: &str) -> Result<(), AgentError> {
        self.write("tls.key", key_pem.as_bytes(), true)?;
        self.write("tls.crt", cert_pem.as_bytes(), false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_private_and_identity_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let d = DataDir::new(dir.path().join("agent"));
        assert!(d.identity().unwrap().is_none());
        let id =
            Identity { hub: "https://h".into(), cluster_name: "c1".into(), agent_name: "a".into() };
        d.save_identity(&id).unwrap();
        assert_eq!(d.identity().unwrap(), Some(id));
        d.save_credentials("CERT", "KEY").unwrap();
        assert_eq!(d.credentials().unwrap(), Some(("CERT".into(), "KEY".into())));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = fs::metadata(d.path().join("tls.key")).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
