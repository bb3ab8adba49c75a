//! Which hub a store belongs to: the store records the pin of the CA of the hub that first
//! served it, and a hub whose data dir holds another CA (or none, while the store names one)
//! refuses to serve it. A replica started on a shared etcd without a copy of the first
//! replica's `pki/` would otherwise make a CA of its own and answer agents as a stranger.
//!
//! A replica can also take the hub's identity from the store: `ocm-hub upload-certs` seals a
//! replica's `pki/` under a new certificate key (printed once) into the store, and a replica
//! started with `--certificate-key` and no `pki/` of its own writes it from there, as kubeadm's
//! `--upload-certs` and `join --certificate-key` do.

use std::path::Path;
use std::time::Duration;

use ocm_storage::Storage;

use super::ServeError;
use crate::auth::identity;
use crate::auth::pki::Pki;
use crate::auth::sealed::{self, CertificateKey};

/// The key holding the CA pin: in the hub's own folder of the registry, which no kind uses (no
/// API serves it), under `/registry/` so that the watch cache's revision follows its write (a
/// consistent read waits for the cache to reach the store's revision).
pub(super) const IDENTITY_KEY: &str = "/registry/ocm-hub/identity";

/// The CA pin the store records, if any.
pub async fn recorded(storage: &Storage) -> Result<Option<String>, ServeError> {
    let kv = storage.try_get(IDENTITY_KEY).await?;
    Ok(kv.map(|kv| String::from_utf8_lossy(&kv.value).into_owned()))
}

/// Refuses a data dir without a CA when the store names one: the PKI would be made anew.
pub(super) fn check_before_pki(recorded: Option<&str>, data_dir: &Path) -> Result<(), ServeError> {
    match recorded {
        Some(pin) if !data_dir.join("pki").join("ca.crt").exists() => {
            Err(ServeError::Identity(format!(
                "the store belongs to the hub whose CA is {pin}, and {} holds no CA: copy the \
                 pki/ folder of one of its replicas there (see the README's \"Several replicas\")",
                data_dir.display()
            )))
        }
        _ => Ok(()),
    }
}

/// Records the CA's pin in a store that names none; refuses a store that names another.
pub(super) async fn check_or_record(
    storage: &Storage,
    recorded: Option<String>,
    pki: &Pki,
) -> Result<(), ServeError> {
    let pin = pki.ca_hash()?;
    let stored = match recorded {
        Some(stored) => stored,
        None => match storage.create(IDENTITY_KEY, pin.clone().into_bytes()).await {
            Ok(_) => return Ok(()),
            // Another replica recorded its pin first: it must be this one.
            Err(ocm_storage::Error::AlreadyExists { .. }) => {
                self::recorded(storage).await?.unwrap_or_default()
            }
            Err(e) => return Err(e.into()),
        },
    };
    if stored == pin {
        return Ok(());
    }
    Err(ServeError::Identity(format!(
        "the store belongs to the hub whose CA is {stored}, but this data dir's CA is {pin}: \
         serve it with a copy of that hub's pki/ folder"
    )))
}

/// The key holding the sealed identity files (`ocm-hub upload-certs`), in the hub's own folder.
pub const CERTS_KEY: &str = "/registry/ocm-hub/certs";

/// How long uploaded certificates can be taken: two hours, as kubeadm keeps its.
pub const CERTS_TTL: Duration = Duration::from_secs(2 * 60 * 60);

fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Seals the identity files of `data_dir` under a new key into the store (replacing any
/// uploaded before); returns the key and when the upload expires (seconds since the epoch).
pub async fn upload(
    storage: &Storage,
    data_dir: &Path,
) -> Result<(CertificateKey, u64), ServeError> {
    let files = identity::read(data_dir).map_err(|e| ServeError::Identity(e.to_string()))?;
    let key = CertificateKey::generate().map_err(|e| ServeError::Identity(e.to_string()))?;
    let expires = now_secs() + CERTS_TTL.as_secs();
    let sealed =
        sealed::seal(&files, &key, expires).map_err(|e| ServeError::Identity(e.to_string()))?;
    loop {
        let written = match storage.try_get(CERTS_KEY).await? {
            Some(kv) => storage.update(CERTS_KEY, sealed.clone(), kv.mod_revision).await.map(drop),
            None => storage.create(CERTS_KEY, sealed.clone()).await.map(drop),
        };
        match written {
            Ok(()) => return Ok((key, expires)),
            // Another upload raced this one: write over it.
            Err(ocm_storage::Error::Conflict { .. } | ocm_storage::Error::AlreadyExists { .. }) => {
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Writes the hub's identity files into `data_dir/pki` from the upload in the store, opened
/// with `key`; nothing when the data dir holds a CA already.
pub(super) async fn join(
    storage: &Storage,
    key: &CertificateKey,
    data_dir: &Path,
) -> Result<(), ServeError> {
    if data_dir.join("pki").join("ca.crt").exists() {
        return Ok(());
    }
    let Some(kv) = storage.try_get(CERTS_KEY).await? else {
        return Err(ServeError::Identity(
            "--certificate-key: the store holds no uploaded certificates: run `ocm-hub \
             upload-certs` on a replica of this hub first"
                .into(),
        ));
    };
    let files = sealed::open(&kv.value, key, now_secs())
        .map_err(|e| ServeError::Identity(format!("--certificate-key: {e}")))?;
    identity::write(data_dir, &files).map_err(|e| ServeError::Identity(e.to_string()))
}
