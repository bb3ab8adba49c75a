//! Which hub a store belongs to: the store records the pin of the CA of the hub that first
//! served it, and a hub whose data dir holds another CA (or none, while the store names one)
//! refuses to serve it. A replica started on a shared etcd without a copy of the first
//! replica's `pki/` would otherwise make a CA of its own and answer agents as a stranger.

use std::path::Path;

use ocm_storage::Storage;

use super::ServeError;
use crate::auth::pki::Pki;

/// The key holding the CA pin: in the hub's own folder of the registry, which no kind uses (no
/// API serves it), under `/registry/` so that the watch cache's revision follows its write (a
/// consistent read waits for the cache to reach the store's revision).
pub(super) const IDENTITY_KEY: &str = "/registry/ocm-hub/identity";

/// The CA pin the store records, if any.
pub(super) async fn recorded(storage: &Storage) -> Result<Option<String>, ServeError> {
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
