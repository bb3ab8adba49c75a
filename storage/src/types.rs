//! The values the contract speaks in: stored key-values, watch events, list pages, preconditions
//! and update decisions.

use base64::Engine as _;
use bytes::Bytes;

use crate::error::{Error, Result};
use crate::revision::Revision;

/// A stored value with the revisions that describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    /// The key.
    pub key: String,
    /// The bytes stored.
    pub value: Bytes,
    /// The revision of the write that created this incarnation of the key. It changes when a
    /// key is deleted and created again, so it serves as the uid-like token of preconditions.
    pub create_revision: Revision,
    /// The revision of the last write to the key.
    pub mod_revision: Revision,
}

/// What a watch event reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// The key was created or updated.
    Put,
    /// The key was deleted.
    Delete,
}

/// One change, as delivered by `watch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchEvent {
    /// Put or delete.
    pub kind: EventKind,
    /// The revision of the change.
    pub revision: Revision,
    /// The key changed.
    pub key: String,
    /// The new value (empty for a delete).
    pub value: Bytes,
    /// The create revision of the key's incarnation (for a delete: of the incarnation deleted).
    pub create_revision: Revision,
    /// The value before the change; `None` when the key was created.
    pub prev: Option<KeyValue>,
}

impl WatchEvent {
    /// The key-value after a put, as a [`KeyValue`]; `None` for a delete.
    pub fn kv(&self) -> Option<KeyValue> {
        (self.kind == EventKind::Put).then(|| KeyValue {
            key: self.key.clone(),
            value: self.value.clone(),
            create_revision: self.create_revision,
            mod_revision: self.revision,
        })
    }
}

/// The events of one commit (one revision) under a watched prefix, in key order. A commit of
/// several keys arrives as one `Commit`, never split, so a watcher can apply it as a whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    /// The revision every event of the commit carries.
    pub revision: Revision,
    /// The commit's events under the watched prefix (never empty), in key order.
    pub events: Vec<std::sync::Arc<WatchEvent>>,
}

/// One key's part in a [`crate::Storage::commit`]: a compare-and-swap on that key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// Create the key, which must be absent.
    Create {
        /// The key.
        key: String,
        /// Its value.
        value: Bytes,
    },
    /// Replace the value if the key's `mod_revision` is `expected`.
    Update {
        /// The key.
        key: String,
        /// Its new value.
        value: Bytes,
        /// The mod revision the key must have.
        expected: Revision,
    },
    /// Delete the key if its `mod_revision` is `expected`.
    Delete {
        /// The key.
        key: String,
        /// The mod revision the key must have.
        expected: Revision,
    },
}

impl Write {
    /// The key written.
    pub fn key(&self) -> &str {
        match self {
            Write::Create { key, .. } | Write::Update { key, .. } | Write::Delete { key, .. } => {
                key
            }
        }
    }

    /// The value written (empty for a delete).
    pub fn value(&self) -> &[u8] {
        match self {
            Write::Create { value, .. } | Write::Update { value, .. } => value,
            Write::Delete { .. } => &[],
        }
    }
}

/// What one write of a commit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// The key now holds this value.
    Put(KeyValue),
    /// The key was deleted.
    Deleted(Deleted),
}

/// What a successful [`crate::Storage::commit`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// The one revision of every write of the commit (for an empty commit: the current one).
    pub revision: Revision,
    /// What each write did, in the order the writes were given.
    pub written: Vec<Written>,
}

/// How to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// At most this many items; `0` means no limit.
    pub limit: usize,
    /// Where the previous page stopped. The token pins the revision of the first page, so every
    /// page of one list is read from the same snapshot.
    pub continue_token: Option<String>,
    /// Read the snapshot at this revision; `None` means the current revision. Ignored when a
    /// continue token is given (the token carries its own).
    pub revision: Option<Revision>,
    /// Start after this key (which must lie under the prefix): for callers that keep their own
    /// position, such as the registry's continue tokens. Ignored when a continue token is given.
    pub start_after: Option<String>,
    /// Leave [`ListPage::remaining`] at 0 rather than count the keys after the page, which on
    /// the embedded backends scans the rest of the range: for readers that page through a whole
    /// prefix and report no count, such as a backup.
    pub skip_remaining: bool,
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListPage {
    /// The items, in ascending key order.
    pub items: Vec<KeyValue>,
    /// The revision of the snapshot read.
    pub revision: Revision,
    /// Present when more items follow: pass it back to get the next page.
    pub continue_token: Option<String>,
    /// How many keys under the prefix follow this page in the same snapshot (0 on the last
    /// page): kube's `remainingItemCount`.
    pub remaining: u64,
}

/// Conditions a delete (or a guaranteed update) requires of the stored key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Preconditions {
    /// The key's `mod_revision` must equal this.
    pub mod_revision: Option<Revision>,
    /// The key's `create_revision` must equal this: the stored incarnation is the one the caller
    /// means, not a later object of the same name.
    pub create_revision: Option<Revision>,
}

impl Preconditions {
    /// Checks the conditions against a stored value.
    pub(crate) fn check(&self, kv: &KeyValue) -> Result<()> {
        if let Some(expected) = self.create_revision {
            if expected != kv.create_revision {
                return Err(Error::Conflict {
                    key: kv.key.clone(),
                    what: "create_revision",
                    expected,
                    actual: kv.create_revision,
                });
            }
        }
        if let Some(expected) = self.mod_revision {
            if expected != kv.mod_revision {
                return Err(Error::Conflict {
                    key: kv.key.clone(),
                    what: "mod_revision",
                    expected,
                    actual: kv.mod_revision,
                });
            }
        }
        Ok(())
    }
}

/// What a guaranteed-update closure decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Update {
    /// Store these bytes (creating the key if it is absent).
    Put(Bytes),
    /// Delete the key.
    Delete,
    /// Write nothing.
    Unchanged,
}

/// What a guaranteed update did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpdateOutcome {
    /// The key now holds this value.
    Put(KeyValue),
    /// The key was deleted.
    Deleted(Deleted),
    /// Nothing was written (the closure said so, or its value equalled the stored one); this is
    /// the current value, if any.
    Unchanged(Option<KeyValue>),
}

/// The result of a delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deleted {
    /// The revision of the delete.
    pub revision: Revision,
    /// The value that was deleted.
    pub prev: KeyValue,
}

/// A position in a paginated list: the snapshot revision and the last key returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ContinueToken {
    pub(crate) revision: Revision,
    pub(crate) last_key: String,
}

impl ContinueToken {
    pub(crate) fn encode(&self) -> String {
        let raw = format!("{}:{}", self.revision.0, self.last_key);
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
    }

    /// Decodes a token and checks it belongs to `prefix`.
    pub(crate) fn decode(token: &str, prefix: &str) -> Result<ContinueToken> {
        let bad = |reason| Error::InvalidContinue { reason };
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token)
            .map_err(|_| bad("not base64url"))?;
        let raw = String::from_utf8(raw).map_err(|_| bad("not UTF-8"))?;
        let (rev, last_key) = raw.split_once(':').ok_or(bad("missing revision"))?;
        let revision = rev.parse::<u64>().map_err(|_| bad("bad revision"))?;
        if revision == 0 {
            return Err(bad("bad revision"));
        }
        if !last_key.starts_with(prefix) || crate::key::validate_key(last_key).is_err() {
            return Err(bad("token belongs to another prefix"));
        }
        Ok(ContinueToken { revision: Revision(revision), last_key: last_key.to_owned() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_token_round_trip_and_prefix_binding() {
        let t = ContinueToken { revision: Revision(42), last_key: "/a/b:c".into() };
        assert_eq!(ContinueToken::decode(&t.encode(), "/a/").unwrap(), t);
        assert!(ContinueToken::decode(&t.encode(), "/b/").is_err());
        assert!(ContinueToken::decode("%%%", "/").is_err());
        assert!(ContinueToken::decode("", "/").is_err());
    }
}
