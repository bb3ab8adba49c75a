//! The generic registry: the one create / get / list / update / patch / delete recipe every kind
//! goes through (system metadata, status subresource split, generation, finalizers and
//! deletionTimestamp, optimistic concurrency, dry runs, namespace lifecycle), with the kind's
//! [`Strategy`](crate::machinery::strategy::Strategy) supplying only what differs. Objects here are always
//! at their storage version; the REST layer converts.

mod commit;
mod create;
mod delete;
mod managers;
mod meta;
mod read;
mod update;

use std::sync::{Arc, Weak};
use std::time::Duration;

use base64::Engine as _;
use ocm_proto::selector::{FieldSelector, LabelSelector};
use ocm_proto::validation::FieldError;
use ocm_storage::{ListOptions, Preconditions, Revision, Storage, Update, UpdateOutcome};
use serde_json::{Map, Value, json};

use crate::machinery::error::{ApiError, Subject, from_storage};
use crate::machinery::merge::managed::{self, Managed};
use crate::machinery::merge::shape::Shape;
use crate::machinery::merge::{fields, smp};
use crate::machinery::object::{self, meta_mut};
use crate::machinery::scheme::{ResourceType, Scheme, Subresource};
use crate::machinery::strategy::NameRule;
use crate::store::cache::{Cache, CachedObject};

pub use commit::{Change, Changed, CommitOutcome, Parts};
pub use read::{ListPage, ListQuery, selectors_match};

/// How unknown or duplicate fields are treated (`fieldValidation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Refuse the request (400).
    Strict,
    /// Drop them and warn (the server default).
    #[default]
    Warn,
    /// Drop them silently.
    Ignore,
}

/// Options of a write.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: run everything, persist nothing.
    pub dry_run: bool,
    /// `fieldValidation`.
    pub field_validation: FieldValidation,
    /// The paths of the fields the request's body repeats (reported as `fieldValidation` says).
    pub duplicate_fields: Vec<String>,
    /// The manager the written fields are recorded under (`fieldManager`, or the product
    /// name of the User-Agent); empty for the hub's own writes, recorded as `ocm-hub`.
    pub field_manager: String,
    /// `force` of an apply: take over fields other managers own.
    pub force: bool,
    /// Who writes, for admission rules that depend on it; `None` for the hub's own writes.
    pub requester: Option<crate::machinery::requester::Requester>,
    /// The apiVersion of the request (empty: the storage version). managedFields entries name
    /// it, and a patch written against another version than the stored one is applied to the
    /// object converted to it, then converted back.
    pub api_version: String,
}

/// The result of a write.
#[derive(Debug, Clone)]
pub struct Written {
    /// The object as stored (or as it would be, for a dry run).
    pub object: Value,
    /// `Warning` headers to send.
    pub warnings: Vec<String>,
    /// Whether the write created the object (an apply to a missing object: 201).
    pub created: bool,
}

/// `DeleteOptions` the registry acts on.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// `propagationPolicy`: `Orphan`, `Background` or `Foreground`.
    pub propagation: Option<String>,
    /// `dryRun=All`.
    pub dry_run: bool,
}

/// What a delete did.
#[derive(Debug, Clone)]
pub enum DeleteOutcome {
    /// The object is gone; this was its last state (resourceVersion = the delete's revision).
    Gone(Value),
    /// The object waits for finalizers; this is its marked state.
    Marked(Value),
}

/// A patch body by type.
#[derive(Debug, Clone)]
pub enum Patch {
    /// `application/json-patch+json`.
    Json(json_patch::Patch),
    /// `application/merge-patch+json`.
    Merge(Value),
    /// `application/strategic-merge-patch+json`.
    Strategic(Value),
    /// `application/apply-patch+yaml`: the manager's whole intent (server-side apply).
    Apply(Value),
}

/// The registry of one hub: storage, the scheme and the watch cache.
#[derive(Debug, Clone)]
pub struct Registry {
    /// The store.
    pub storage: Storage,
    /// Every served kind.
    pub scheme: Arc<Scheme>,
    /// The watch cache.
    pub cache: Arc<Cache>,
    /// Room for the large objects writes hold at once.
    budget: Arc<crate::store::budget::WriteBudget>,
    /// The validating admission registered per kind (by storage prefix).
    validating: Arc<ValidatingTable>,
}

/// The validating admission of each kind, registered after start-up by the controllers. Held
/// weakly: a controller holds the registry, so a strong reference back would be a cycle that
/// keeps the registry, and the storage it opened, alive after the hub stops.
#[derive(Default)]
struct ValidatingTable(
    std::sync::RwLock<
        std::collections::HashMap<String, Weak<dyn crate::machinery::strategy::Validating>>,
    >,
);

impl std::fmt::Debug for ValidatingTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kinds = self.0.read().map(|m| m.len()).unwrap_or_default();
        write!(f, "ValidatingTable({kinds} kinds)")
    }
}

impl Registry {
    /// Runs `check` on every create and main-resource update of `rt`, while its owner keeps it.
    pub fn register_validating(
        &self,
        rt: &ResourceType,
        check: &Arc<dyn crate::machinery::strategy::Validating>,
    ) {
        let mut table =
            self.validating.0.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        table.insert(rt.prefix.clone(), Arc::downgrade(check));
    }

    /// The errors the registered validating admission of `rt` finds in `obj`.
    fn validating_errors(&self, rt: &ResourceType, obj: &Value) -> Vec<FieldError> {
        let table = self.validating.0.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let check = table.get(&rt.prefix).and_then(Weak::upgrade);
        check.map(|check| check.validate(obj)).unwrap_or_default()
    }
}

pub(crate) fn subject(rt: &ResourceType, name: &str) -> Subject {
    Subject { group: rt.group.clone(), kind: rt.plural.clone(), name: name.to_owned() }
}

/// The JSON the store keeps: the object without its resourceVersion (removed in place; the
/// caller stamps the new one after the write), in a buffer of exactly its length: the store
/// keeps these bytes (its recent values, the watch), and one grown by doubling would hold up
/// to twice as much.
fn to_stored(obj: &mut Value) -> Result<Vec<u8>, ApiError> {
    meta_mut(obj).remove("resourceVersion");
    let mut out = Vec::with_capacity(object::json_len(obj));
    serde_json::to_writer(&mut out, obj).map_err(ApiError::internal)?;
    Ok(out)
}

fn parse_stored(rt: &ResourceType, kv: &ocm_storage::KeyValue) -> Result<Value, ApiError> {
    let mut v: Value = serde_json::from_slice(&kv.value).map_err(|e| {
        ApiError::internal(format!("stored {} {} is not JSON: {e}", rt.plural, kv.key))
    })?;
    object::set_resource_version(&mut v, kv.mod_revision.get());
    Ok(v)
}

/// Parses a resourceVersion query value.
pub fn parse_rv(rv: &str) -> Result<u64, ApiError> {
    rv.parse::<u64>()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv:?}")))
}

impl Registry {
    /// The one read–modify–compare-and-swap of every update, patch and delete of one object,
    /// on [`Storage::guaranteed_update`]: `decide` gets the stored object (its resourceVersion
    /// set) and says what to write; when another writer wins the race, it decides again on
    /// the newer object, so it must have no effect beyond its answer. A missing object is a
    /// 404 naming `name`. Several objects written together go through [`Registry::commit`],
    /// which decides each with the same steps and compares each key in one storage commit.
    pub(super) async fn compare_and_swap(
        &self,
        rt: &ResourceType,
        name: &str,
        key: &str,
        mut decide: impl FnMut(&ocm_storage::KeyValue, Value) -> Result<Update, ApiError>,
    ) -> Result<UpdateOutcome, ApiError> {
        let outcome = self
            .storage
            .guaranteed_update(
                key,
                &Preconditions::default(),
                |kv: Option<&ocm_storage::KeyValue>| {
                    let Some(kv) = kv else {
                        return Err(Refused::Api(ApiError::not_found(subject(rt, name))));
                    };
                    decide(kv, parse_stored(rt, kv)?).map_err(Refused::Api)
                },
            )
            .await;
        outcome.map_err(|refused| match refused {
            Refused::Api(e) => e,
            Refused::Storage(e) => from_storage(e, subject(rt, name)),
        })
    }

    /// Starts the registry of `scheme` over `storage` (loading the watch cache).
    pub async fn new(
        storage: Storage,
        scheme: Arc<Scheme>,
        config: crate::store::cache::CacheConfig,
        background: &crate::machinery::background::Background,
    ) -> Result<Registry, ApiError> {
        let cache = Cache::start(storage.clone(), &scheme, config, background).await?;
        let budget =
            Arc::new(crate::store::budget::WriteBudget::new(crate::store::budget::WRITE_BYTES));
        Ok(Registry { storage, scheme, cache, budget, validating: Arc::default() })
    }

    /// The same registry, every write through it fenced by `fence` (a leader's controllers
    /// write through one: [`crate::controllers::leader`]).
    pub fn fenced(&self, fence: ocm_storage::Fence) -> Registry {
        Registry { storage: self.storage.fenced(fence), ..self.clone() }
    }

    /// Gives back a large write's room once the watch cache has the write: until then the
    /// store's watch still holds the value on its way to the cache, and a burst of large
    /// writes must not pile values up there either. Bounded: a cache that does not catch up
    /// within 10 s (it is then far behind for other reasons) lets the room go.
    pub(super) async fn release_when_cached(
        &self,
        room: Option<tokio::sync::SemaphorePermit<'_>>,
        rev: u64,
    ) {
        if room.is_some() {
            self.cache.wait_for(rev, std::time::Duration::from_secs(10)).await;
        }
    }
}

/// Why a compare-and-swap stopped: the decision's own refusal, or the store's.
enum Refused {
    Api(ApiError),
    Storage(ocm_storage::Error),
}

impl From<ocm_storage::Error> for Refused {
    fn from(e: ocm_storage::Error) -> Refused {
        Refused::Storage(e)
    }
}

impl From<ApiError> for Refused {
    fn from(e: ApiError) -> Refused {
        Refused::Api(e)
    }
}
