//! The agent's errors: each names its cause and, where there is one, the fix.

use std::path::PathBuf;

/// Why the agent could not do something.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The hub could not be reached at all.
    #[error(
        "the hub is unreachable at {url}: {detail} (is `ocm-hub serve` running there, and is --hub right?)"
    )]
    Unreachable { url: String, detail: String },
    /// The hub refused the bootstrap token.
    #[error(
        "the hub refused the bootstrap token (it is wrong, expired or revoked): make a new one with `ocm-hub token create` on the hub"
    )]
    BadToken,
    /// The hub refused the agent's own certificate.
    #[error(
        "the hub at {url} refused this agent's certificate (expired, or its cluster was removed): join again with a new token (`ocm-hub token create` on the hub, then `klusterlet join`)"
    )]
    CertificateRefused { url: String },
    /// The hub's CA is not the pinned one.
    #[error(
        "CA mismatch: the hub at {url} presents CA {found}, not {expected}: check --ca-hash and --hub"
    )]
    CaMismatch { url: String, found: String, expected: String },
    /// The hub's serving certificate is not signed by the CA the agent trusts.
    #[error(
        "the hub at {url} is not trusted by the given CA: {detail} (check --ca-file and --hub)"
    )]
    Untrusted { url: String, detail: String },
    /// The hub admin denied the cluster.
    #[error(
        "cluster {0} is denied by the hub (hubAcceptsClient is false): ask the hub admin to run `ocm-hub accept {0}`"
    )]
    Denied(String),
    /// A certificate request was denied or failed.
    #[error("certificate request {name} was {verdict} by the hub: {message}")]
    CsrRefused { name: String, verdict: &'static str, message: String },
    /// The hub answered with an error.
    #[error("the hub: {0}")]
    Hub(#[from] kube::Error),
    /// The hub's gRPC server refused a call.
    #[error("the hub's gRPC server refused the call ({code}): {message}")]
    GrpcRefused { code: String, message: String },
    /// The managed cluster could not be reached or answered with an error.
    #[error("the managed cluster: {0}")]
    Cluster(String),
    /// A file of the data dir.
    #[error("{path}: {detail}")]
    File { path: PathBuf, detail: String },
    /// Something the agent was given or holds is not usable.
    #[error("{0}")]
    Invalid(String),
}

impl AgentError {
    /// Whether the error is the hub being away (worth retrying quietly).
    pub fn is_unreachable(&self) -> bool {
        match self {
            AgentError::Unreachable { .. } => true,
            AgentError::Hub(e) => !matches!(e, kube::Error::Api(_)),
            _ => false,
        }
    }

    /// Whether the hub is busy or failing for now (429, 5xx): the request is worth repeating.
    pub fn is_busy(&self) -> bool {
        matches!(self, AgentError::Hub(kube::Error::Api(s)) if s.code == 429 || s.code >= 500)
    }
}
