//! `ocm-hub upload-certs`: the hub's identity (a replica's `pki/`) sealed under a new
//! certificate key into the shared etcd, for a new replica to join with `ocm-hub serve
//! --certificate-key` instead of a copy of the folder. Refused unless the store belongs to the
//! hub whose CA the data dir holds.

use std::path::Path;

use super::admin::CliError;
use crate::auth::pki::Pki;
use crate::auth::sealed::CertificateKey;
use crate::serve::server::{ServeConfig, StorageChoice, identity, open_storage};

/// What an upload made: the key (shown once, kept nowhere) and when it expires.
#[derive(Debug)]
pub struct Uploaded {
    pub key: CertificateKey,
    /// Seconds since the epoch.
    pub expires: u64,
}

/// Uploads the identity of the hub whose data dir is `data_dir` into its etcd at `endpoints`.
pub async fn upload(data_dir: &Path, endpoints: Vec<String>) -> Result<Uploaded, CliError> {
    let pin = Pki::open(data_dir)
        .and_then(|pki| pki.ca_hash())
        .map_err(|e| CliError::Usage(format!("{}: {e}", data_dir.display())))?;
    let mut config = ServeConfig::new(data_dir.to_path_buf());
    config.storage = StorageChoice::Etcd(endpoints);
    let storage = open_storage(&config)
        .await
        .map_err(|e| CliError::HubState(format!("opening the store: {e}")))?;
    let recorded = identity::recorded(&storage)
        .await
        .map_err(|e| CliError::HubState(format!("reading the store: {e}")))?;
    match recorded {
        Some(stored) if stored == pin => {}
        Some(stored) => {
            return Err(CliError::Usage(format!(
                "the store belongs to the hub whose CA is {stored}, but {}'s CA is {pin}",
                data_dir.display()
            )));
        }
        None => {
            return Err(CliError::HubState(
                "the store records no hub: serve the first replica on it before uploading its \
                 certificates"
                    .into(),
            ));
        }
    }
    let (key, expires) = identity::upload(&storage, data_dir)
        .await
        .map_err(|e| CliError::HubState(format!("uploading: {e}")))?;
    Ok(Uploaded { key, expires })
}
