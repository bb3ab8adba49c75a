//! The generic registry: the one create / get / list / update / patch / delete recipe every kind
//! goes through (system metadata, status subresource split, generation, finalizers and
//! deletionTimestamp, optimistic concurrency, dry runs, namespace lifecycle), with the kind's
//! [`Strategy`](crate::machinery::strategy::Strategy) supplying only what differs. Objects here are always
//! at their storage version; the REST layer converts.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use ocm_proto::selector::{FieldSelector, LabelSelector};
use ocm_proto::validation::FieldError;
use ocm_storage::{ListOptions, Preconditions, Revision, Storage};
use serde_json::{Map, Value, json};

use crate::machinery::error::{ApiError, Subject, from_storage};
use crate::machinery::merge::managed::{self, Managed};
use crate::machinery::merge::shape::Shape;
use crate::machinery::merge::{fields, smp};
use crate::machinery::object::{self, meta_mut};
use crate::machinery::scheme::{ResourceType, Scheme, Subresource};
use crate::machinery::strategy::NameRule;
use crate::store::cache::{Cache, CachedObject};

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

/// A list request after parsing.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// `labelSelector`.
    pub labels: Option<LabelSelector>,
    /// `fieldSelector`.
    pub fields: Option<FieldSelector>,
    /// `limit` (0 = none).
    pub limit: usize,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub resource_version_match: Option<String>,
}

impl ListQuery {
    /// The one object key the query can match, when its field selector pins `metadata.name`
    /// (and `metadata.namespace`, for a namespaced kind across namespaces): such a list reads
    /// that key, as kube-apiserver's storage serves it as a get (`MatchesSingle`), and such a
    /// watch is offered that object's events only. The selectors still decide what matches.
    pub fn single_key(&self, rt: &ResourceType, namespace: &str) -> Option<String> {
        let fields = self.fields.as_ref()?;
        let name = fields.pinned("metadata.name")?;
        let namespace = match namespace {
            "" if rt.namespaced => fields.pinned("metadata.namespace")?,
            given => given,
        };
        Some(rt.key(namespace, name))
    }
}

/// One page of a list.
#[derive(Debug, Clone)]
pub struct ListPage {
    /// Matching objects.
    pub items: Vec<Arc<CachedObject>>,
    /// The revision the page was read at.
    pub rev: u64,
    /// Token for the next page.
    pub continue_token: Option<String>,
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

/// Everything of an object but `metadata` and `status`: a change here bumps `generation`.
fn spec_part(obj: &Value) -> Map<String, Value> {
    obj.as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| {
                    !matches!(k.as_str(), "metadata" | "status" | "apiVersion" | "kind")
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// Copies the value at a dotted `path` from `from` into `to` (removing it when `from` lacks it).
fn copy_path(to: &mut Value, from: &Value, path: &str) {
    let steps: Vec<&str> = path.split('.').collect();
    let (last, parents) = steps.split_last().expect("paths are never empty");
    let source = object::at_path(from, path).cloned();
    let mut cur = to;
    for step in parents {
        if !cur.is_object() {
            if source.is_none() {
                return;
            }
            *cur = Value::Object(Map::new());
        }
        let map = cur.as_object_mut().expect("made an object above");
        if source.is_none() && !map.contains_key(*step) {
            return;
        }
        cur = map.entry(*step).or_insert_with(|| Value::Object(Map::new()));
    }
    if let Some(map) = cur.as_object_mut() {
        match source {
            Some(v) => {
                map.insert((*last).to_owned(), v);
            }
            None => {
                map.remove(*last);
            }
        }
    } else if let Some(v) = source {
        *cur = json!({ *last: v });
    }
}

/// Checks the metadata every kind shares: name, labels, annotations, finalizers.
fn validate_meta(rt: &ResourceType, obj: &Value, errs: &mut Vec<FieldError>) {
    let name = object::name(obj);
    let check = match rt.strategy.name_rule() {
        NameRule::Subdomain => object::check_dns_subdomain(name),
        NameRule::Label => object::check_dns_label(name),
        NameRule::PathSegment => object::check_path_segment(name),
    };
    if let Err(msg) = check {
        errs.push(FieldError::invalid("metadata.name", name, msg));
    }
    let Some(meta) = object::meta(obj) else { return };
    for (field, kind) in [("labels", true), ("annotations", false)] {
        let Some(map) = meta.get(field) else { continue };
        let Some(map) = map.as_object() else {
            errs.push(FieldError::new(
                ocm_proto::validation::FieldErrorKind::TypeInvalid,
                format!("metadata.{field}"),
                Some(map.clone()),
                "must be a map of strings",
            ));
            continue;
        };
        let mut total = 0;
        for (k, v) in map {
            if let Err(e) = ocm_proto::selector::validate_key(k) {
                errs.push(FieldError::invalid(format!("metadata.{field}"), k.as_str(), e.reason));
            }
            match v.as_str() {
                Some(s) if kind => {
                    if let Err(e) = ocm_proto::selector::validate_value(s) {
                        errs.push(FieldError::invalid(format!("metadata.{field}"), s, e.reason));
                    }
                }
                Some(s) => total += k.len() + s.len(),
                None => errs.push(FieldError::invalid(
                    format!("metadata.{field}[{k}]"),
                    v.clone(),
                    "must be a string",
                )),
            }
        }
        if total > 256 * 1024 {
            errs.push(FieldError::new(
                ocm_proto::validation::FieldErrorKind::TooLong,
                "metadata.annotations",
                None,
                "may not have more than 262144 bytes",
            ));
        }
    }
    if let Some(list) = meta.get("finalizers") {
        match list.as_array() {
            Some(items) => {
                for (i, f) in items.iter().enumerate() {
                    let ok =
                        f.as_str().is_some_and(|s| ocm_proto::selector::validate_key(s).is_ok());
                    if !ok {
                        errs.push(FieldError::invalid(
                            format!("metadata.finalizers[{i}]"),
                            f.clone(),
                            "must be a qualified name",
                        ));
                    }
                }
            }
            None => errs.push(FieldError::invalid(
                "metadata.finalizers",
                list.clone(),
                "must be a list",
            )),
        }
    }
}

impl Registry {
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
        Ok(Registry { storage, scheme, cache, budget })
    }

    /// Reads one object. `rv`: `None` reads the store (consistent); `Some(0)` the cache; `Some(n)`
    /// the cache once it has reached `n`.
    pub async fn get(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        rv: Option<u64>,
    ) -> Result<Value, ApiError> {
        let key = rt.key(namespace, name);
        match rv {
            None => {
                let kv =
                    self.storage.get(&key).await.map_err(|e| from_storage(e, subject(rt, name)))?;
                parse_stored(rt, &kv)
            }
            Some(n) => {
                if n > 0 && !self.cache.wait_for(n, Duration::from_secs(3)).await {
                    return Err(ApiError::too_large_resource_version(n, self.cache.revision()));
                }
                match self.cache.get(&rt.prefix, &key)? {
                    Some(obj) => Ok(Arc::unwrap_or_clone(obj.value())),
                    None => Err(ApiError::not_found(subject(rt, name))),
                }
            }
        }
    }

    /// Lists objects (see kube-api.md §6.3–§6.4 for the resourceVersion rules).
    pub async fn list(
        &self,
        rt: &ResourceType,
        namespace: &str,
        q: &ListQuery,
    ) -> Result<ListPage, ApiError> {
        let prefix = rt.namespace_prefix(namespace);
        let matches = |o: &CachedObject| self.matches(rt, o, q);
        // What the cache reads: only keys that start with the one key the selector pins, if it
        // does. Such a list has at most one item, so the cache serves it even when a page is
        // asked for (kube-rs' watcher lists with `limit=500`), where kube-apiserver reads the
        // one key from etcd; the store lists whole prefixes only.
        let scan = q.single_key(rt, namespace);
        let cached = || {
            let (items, rev) = self.cache.list(&rt.prefix, scan.as_deref().unwrap_or(&prefix))?;
            let items = items.into_iter().filter(|o| matches(o)).collect();
            Ok(ListPage { items, rev, continue_token: None })
        };
        if let Some(token) = &q.continue_token {
            let (rev, after) = decode_continue(token, &prefix)?;
            return self.list_from_store(rt, &prefix, q, rev, Some(after)).await;
        }
        let exact = q.resource_version_match.as_deref() == Some("Exact");
        match q.resource_version.as_deref().filter(|s| !s.is_empty()) {
            Some(rv) if exact => {
                let rev = parse_rv(rv)?;
                self.list_from_store(rt, &prefix, q, Some(rev), None).await
            }
            Some("0") => cached(),
            Some(rv) => {
                let n = parse_rv(rv)?;
                if !self.cache.wait_for(n, Duration::from_secs(3)).await {
                    return Err(ApiError::too_large_resource_version(n, self.cache.revision()));
                }
                // One key's list never needs a second page: the cache serves it whole.
                if q.limit > 0 && scan.is_none() {
                    return self.list_from_store(rt, &prefix, q, None, None).await;
                }
                cached()
            }
            None if q.limit > 0 && scan.is_none() => {
                self.list_from_store(rt, &prefix, q, None, None).await
            }
            None => {
                self.cache.sync().await?;
                cached()
            }
        }
    }

    /// Pages through the store at one revision until `limit` matches are found.
    async fn list_from_store(
        &self,
        rt: &ResourceType,
        prefix: &str,
        q: &ListQuery,
        rev: Option<u64>,
        mut after: Option<String>,
    ) -> Result<ListPage, ApiError> {
        let mut items = Vec::new();
        let mut pinned = rev.map(Revision);
        loop {
            let need = if q.limit == 0 { 0 } else { q.limit - items.len() };
            let options = ListOptions {
                limit: need,
                revision: pinned,
                start_after: after.clone(),
                ..ListOptions::default()
            };
            let page = self.storage.list(prefix, &options).await.map_err(|e| match e {
                ocm_storage::Error::Compacted { .. } if q.continue_token.is_some() => {
                    ApiError::expired(
                        "The provided continue parameter is too old to display a consistent list \
                         result. You can start a new list without the continue parameter.",
                    )
                }
                ocm_storage::Error::Compacted { .. } => {
                    ApiError::expired("The resourceVersion for the provided list is too old.")
                }
                other => from_storage(other, Default::default()),
            })?;
            pinned = Some(page.revision);
            let more = page.continue_token.is_some();
            after = page.items.last().map(|kv| kv.key.clone()).or(after);
            for kv in &page.items {
                let obj =
                    CachedObject::from_stored(kv.key.clone(), &kv.value, kv.mod_revision.get())?;
                if self.matches(rt, &obj, q) {
                    items.push(Arc::new(obj));
                }
            }
            let rev = page.revision.get();
            if !more {
                return Ok(ListPage { items, rev, continue_token: None });
            }
            if q.limit > 0 && items.len() >= q.limit {
                let token = after.as_deref().map(|a| encode_continue(rev, a));
                return Ok(ListPage { items, rev, continue_token: token });
            }
        }
    }

    /// One object from the watch cache (what a controller reads; no storage round trip).
    pub fn cached(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
    ) -> Option<Arc<CachedObject>> {
        self.cache.get(&rt.prefix, &rt.key(namespace, name)).ok().flatten()
    }

    /// The objects of a kind in a namespace (all namespaces for `""`), from the watch cache.
    pub fn cached_list(&self, rt: &ResourceType, namespace: &str) -> Vec<Arc<CachedObject>> {
        self.cache
            .list(&rt.prefix, &rt.namespace_prefix(namespace))
            .map(|(items, _)| items)
            .unwrap_or_default()
    }

    /// Whether an object passes a list's selectors.
    pub fn matches(&self, rt: &ResourceType, obj: &CachedObject, q: &ListQuery) -> bool {
        selectors_match(rt, obj, q.labels.as_ref(), q.fields.as_ref())
    }

    /// Creates an object unless one of its name exists (what exists is kept as it is); the
    /// hub's own objects: defaults at start-up, what controllers set up.
    pub async fn create_if_absent(
        &self,
        rt: &ResourceType,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<(), ApiError> {
        let namespace = object::namespace(&obj).to_owned();
        match self.create(rt, &namespace, obj, opts).await {
            Ok(_) => Ok(()),
            Err(e) if e.reason == "AlreadyExists" => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Creates an object (POST to the collection).
    pub async fn create(
        &self,
        rt: &ResourceType,
        namespace: &str,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        self.create_tracked(rt, namespace, obj, opts, false).await
    }

    /// Creates an object; `tracked`: its managedFields are already final (an apply).
    async fn create_tracked(
        &self,
        rt: &ResourceType,
        namespace: &str,
        mut obj: Value,
        opts: &WriteOptions,
        tracked: bool,
    ) -> Result<Written, ApiError> {
        if !obj.is_object() {
            return Err(ApiError::bad_request("the body must be a JSON object"));
        }
        let generate = {
            let m = meta_mut(&mut obj);
            if rt.namespaced {
                let body_ns = m.get("namespace").and_then(Value::as_str).unwrap_or("");
                if !body_ns.is_empty() && body_ns != namespace {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent \
                         on the request",
                    ));
                }
                m.insert("namespace".into(), Value::String(namespace.to_owned()));
            } else {
                m.remove("namespace");
            }
            for field in [
                "resourceVersion",
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "selfLink",
            ] {
                m.remove(field);
            }
            let name = m.get("name").and_then(Value::as_str).unwrap_or("");
            let prefix = m.get("generateName").and_then(Value::as_str).unwrap_or("");
            if name.is_empty() && !prefix.is_empty() { Some(prefix.to_owned()) } else { None }
        };
        if rt.has_status() {
            if let Some(map) = obj.as_object_mut() {
                map.remove("status");
            }
        }
        rt.strategy.prepare_create(&mut obj);
        let mut warnings = self.prune(rt, &mut obj, opts)?;
        rt.strategy.default(&mut obj);
        rt.strategy.admit(&mut obj, None, None, opts.requester.as_ref())?;
        {
            let m = meta_mut(&mut obj);
            m.insert("uid".into(), Value::String(uuid::Uuid::new_v4().to_string()));
            m.insert("creationTimestamp".into(), Value::String(object::now_rfc3339()));
            if rt.strategy.tracks_generation() {
                m.insert("generation".into(), json!(1));
            }
        }
        if !tracked {
            track_update(rt, &Value::Null, &mut obj, None, opts)?;
        }
        let mut attempts = 0;
        loop {
            if let Some(prefix) = &generate {
                meta_mut(&mut obj)
                    .insert("name".into(), Value::String(object::generate_name(prefix)));
            }
            let name = object::name(&obj).to_owned();
            if name.is_empty() {
                let err = FieldError::required("metadata.name", "name or generateName is required");
                return Err(ApiError::invalid(&rt.group, &rt.kind, "", &[err]));
            }
            let mut errs = Vec::new();
            validate_meta(rt, &obj, &mut errs);
            errs.extend(rt.strategy.validate(&obj)?);
            if !errs.is_empty() {
                return Err(ApiError::invalid(&rt.group, &rt.kind, &name, &errs));
            }
            if rt.namespaced {
                self.check_namespace_open(rt, namespace, &name).await?;
            }
            if opts.dry_run {
                return Ok(Written { object: obj, warnings, created: true });
            }
            let room = self.budget.reserve(object::json_len(&obj)).await;
            let bytes = to_stored(&mut obj)?;
            match self.storage.create(&rt.key(namespace, &name), bytes).await {
                Ok(kv) => {
                    self.release_when_cached(room, kv.mod_revision.get()).await;
                    object::set_resource_version(&mut obj, kv.mod_revision.get());
                    return Ok(Written {
                        object: obj,
                        warnings: std::mem::take(&mut warnings),
                        created: true,
                    });
                }
                Err(ocm_storage::Error::AlreadyExists { .. })
                    if generate.is_some() && attempts < 8 =>
                {
                    attempts += 1;
                }
                Err(e) => return Err(from_storage(e, subject(rt, &name))),
            }
        }
    }

    /// Refuses content in a namespace that does not exist or is being deleted (Kubernetes'
    /// NamespaceLifecycle admission).
    async fn check_namespace_open(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        let ns_rt = self
            .scheme
            .lookup("", "v1", "namespaces")
            .ok_or_else(|| ApiError::internal("namespaces are not served"))?;
        let key = ns_rt.key("", namespace);
        let found = match self.cache.get(&ns_rt.prefix, &key)? {
            Some(o) => Some(Arc::unwrap_or_clone(o.value())),
            None => match self
                .storage
                .try_get(&key)
                .await
                .map_err(|e| from_storage(e, Default::default()))?
            {
                Some(kv) => Some(parse_stored(ns_rt, &kv)?),
                None => None,
            },
        };
        match found {
            None => Err(ApiError::not_found(Subject {
                group: String::new(),
                kind: "namespaces".into(),
                name: namespace.to_owned(),
            })),
            Some(ns) if object::is_deleting(&ns) => Err(ApiError::forbidden(
                subject(rt, name),
                format!(
                    "unable to create new content in namespace {namespace} because it is being \
                     terminated"
                ),
            )),
            Some(_) => Ok(()),
        }
    }

    fn prune(
        &self,
        rt: &ResourceType,
        obj: &mut Value,
        opts: &WriteOptions,
    ) -> Result<Vec<String>, ApiError> {
        let unknown = rt.strategy.prune(obj);
        if unknown.is_empty() {
            return Ok(Vec::new());
        }
        match opts.field_validation {
            FieldValidation::Strict => Err(ApiError::bad_request(format!(
                "{kind} in version {v:?} cannot be handled as a {kind}: strict decoding error: {}",
                unknown
                    .iter()
                    .map(|f| format!("unknown field {f:?}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                kind = rt.kind,
                v = rt.storage_version,
            ))),
            FieldValidation::Warn => {
                Ok(unknown.iter().map(|f| format!("unknown field {f:?}")).collect())
            }
            FieldValidation::Ignore => Ok(Vec::new()),
        }
    }

    /// Replaces an object (PUT), or the part a subresource owns.
    pub async fn update(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        obj: Value,
        sub: Option<&Subresource>,
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        if !obj.is_object() {
            return Err(ApiError::bad_request("the body must be a JSON object"));
        }
        let body_rv = object::meta_str(&obj, "resourceVersion").to_owned();
        if body_rv.is_empty() && !rt.strategy.allow_unconditional_update() {
            let err = FieldError::invalid(
                "metadata.resourceVersion",
                0,
                "must be specified for an update",
            );
            return Err(ApiError::invalid(&rt.group, &rt.kind, name, &[err]));
        }
        let precondition = if body_rv.is_empty() { None } else { Some(parse_rv(&body_rv)?) };
        let make = |_: &Value| Ok(obj.clone());
        let stage = Stage { sub, tracked: false, make: &make };
        self.write_loop(rt, namespace, name, opts, precondition, &[stage]).await
    }

    /// Patches an object (or the part a subresource owns). A patch that carries
    /// `metadata.resourceVersion` is a precondition: a stale one is 409, never retried.
    pub async fn patch(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        patch: &Patch,
        sub: Option<&Subresource>,
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        let result = self.patch_parts(rt, namespace, name, &[(patch, sub)], opts).await;
        match (result, patch) {
            // An apply to a missing object creates it.
            (Err(e), Patch::Apply(config)) if e.code == 404 && sub.is_none() => {
                let mut config = config.clone();
                let m = meta_mut(&mut config);
                match m.get("name").and_then(Value::as_str) {
                    Some(n) if n != name => {
                        return Err(ApiError::bad_request(format!(
                            "the name of the object ({n}) does not match the name on the URL \
                             ({name})"
                        )));
                    }
                    Some(_) => {}
                    None => {
                        m.insert("name".into(), Value::String(name.to_owned()));
                    }
                }
                let (storage_version, version) = patch_versions(rt, opts);
                let shape = rt.shape(&version);
                let obj =
                    server_side_apply(rt, None, opts, &version, &Value::Null, &config, &shape)?;
                let obj = if version != storage_version {
                    rt.strategy.version_to_storage(obj, &storage_version)?
                } else {
                    obj
                };
                self.create_tracked(rt, namespace, obj, opts, true).await
            }
            (result, _) => result,
        }
    }

    /// Gives back a large write's room once the watch cache has the write: until then the
    /// store's watch still holds the value on its way to the cache, and a burst of large
    /// writes must not pile values up there either. Bounded: a cache that does not catch up
    /// within 10 s (it is then far behind for other reasons) lets the room go.
    async fn release_when_cached(&self, room: Option<tokio::sync::SemaphorePermit<'_>>, rev: u64) {
        if room.is_some() {
            self.cache.wait_for(rev, std::time::Duration::from_secs(10)).await;
        }
    }

    /// Patches applied in order, each to the object or to what one subresource owns, and
    /// written as one revision: the hub's own writes that change two parts at once (a work's
    /// finalizer with its first status report). A part that carries
    /// `metadata.resourceVersion` pins the revision, as in [`Registry::patch`].
    pub async fn patch_parts(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        parts: &[(&Patch, Option<&Subresource>)],
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        let makes: Vec<_> = parts
            .iter()
            .map(|&(patch, sub)| move |current: &Value| patched(rt, sub, opts, patch, current))
            .collect();
        let stages: Vec<Stage<'_>> = parts
            .iter()
            .zip(&makes)
            .map(|(&(patch, sub), make)| Stage {
                sub,
                tracked: matches!(patch, Patch::Apply(_)),
                make,
            })
            .collect();
        let mut precondition = None;
        for (patch, _) in parts {
            precondition = precondition.or(carried_precondition(patch)?);
        }
        self.write_loop(rt, namespace, name, opts, precondition, &stages).await
    }

    /// The read–modify–CAS loop of updates and patches: each stage builds its candidate from
    /// the one before (the first from the current object) under its subresource's rules, and
    /// the result is written once. A precondition pins the revision (409 when stale, no retry).
    async fn write_loop(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        opts: &WriteOptions,
        precondition: Option<u64>,
        stages: &[Stage<'_>],
    ) -> Result<Written, ApiError> {
        let key = rt.key(namespace, name);
        // The object's size as cached: room for it is held while it is read, changed and
        // written.
        let size = self.cache.get(&rt.prefix, &key).ok().flatten().map_or(0, |o| o.json_len());
        let room = self.budget.reserve(size).await;
        loop {
            let kv =
                self.storage.get(&key).await.map_err(|e| from_storage(e, subject(rt, name)))?;
            let current = parse_stored(rt, &kv)?;
            if let Some(rv) = precondition {
                if rv != kv.mod_revision.get() {
                    return Err(ApiError::stale(subject(rt, name)));
                }
            }
            let expected = kv.mod_revision;
            drop(kv);
            let mut changed: Option<Value> = None;
            let mut warnings = Vec::new();
            for stage in stages {
                let base = changed.as_ref().unwrap_or(&current);
                let candidate = (stage.make)(base)?;
                let (next, more) =
                    self.prepare_update(rt, base, candidate, stage.sub, opts, stage.tracked)?;
                warnings.extend(more);
                if next.is_some() {
                    changed = next;
                }
            }
            let Some(mut next) = changed else {
                return Ok(Written { object: current, warnings, created: false });
            };
            // What the write no longer needs is not held while it waits for storage (a
            // fan-out queues hundreds of writes of large works).
            drop(current);
            if opts.dry_run {
                return Ok(Written { object: next, warnings, created: false });
            }
            let remove = object::is_deleting(&next)
                && object::finalizers(&next).is_empty()
                && rt.strategy.ready_to_remove(&next);
            let result = if remove {
                let pre = Preconditions { mod_revision: Some(expected), create_revision: None };
                self.storage.delete(&key, &pre).await.map(|d| d.revision)
            } else {
                self.storage
                    .update(&key, to_stored(&mut next)?, expected)
                    .await
                    .map(|kv| kv.mod_revision)
            };
            match result {
                Ok(rev) => {
                    self.release_when_cached(room, rev.get()).await;
                    object::set_resource_version(&mut next, rev.get());
                    return Ok(Written { object: next, warnings, created: false });
                }
                Err(ocm_storage::Error::Conflict { .. }) if precondition.is_none() => {
                    tokio::task::yield_now().await;
                }
                Err(e) => return Err(from_storage(e, subject(rt, name))),
            }
        }
    }

    /// Applies the update rules to a candidate; `None` means nothing changes. `tracked`: the
    /// candidate's managedFields are already final (a server-side apply computed them).
    fn prepare_update(
        &self,
        rt: &ResourceType,
        old: &Value,
        candidate: Value,
        sub: Option<&Subresource>,
        opts: &WriteOptions,
        tracked: bool,
    ) -> Result<(Option<Value>, Vec<String>), ApiError> {
        let name = object::name(old).to_owned();
        if !candidate.is_object() {
            return Err(ApiError::bad_request("the object must be a JSON object"));
        }
        let body_name = object::name(&candidate);
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let body_ns = object::namespace(&candidate);
        if rt.namespaced && !body_ns.is_empty() && body_ns != object::namespace(old) {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the \
                 request",
            ));
        }
        let body_uid = object::uid(&candidate);
        if !body_uid.is_empty() && body_uid != object::uid(old) {
            let err = FieldError::invalid("metadata.uid", body_uid, "field is immutable");
            return Err(ApiError::invalid(&rt.group, &rt.kind, &name, &[err]));
        }
        let mut next = match sub {
            Some(sub) => {
                // A subresource write changes only what the subresource owns.
                let mut next = old.clone();
                for path in sub.owns {
                    copy_path(&mut next, &candidate, path);
                }
                // An apply computed the entries with the rest of the candidate.
                if tracked {
                    copy_path(&mut next, &candidate, "metadata.managedFields");
                }
                next
            }
            None => {
                let mut next = candidate;
                for s in &rt.subresources {
                    for path in s.owns {
                        copy_path(&mut next, old, path);
                    }
                }
                let old_meta = object::meta(old).cloned().unwrap_or_default();
                let m = meta_mut(&mut next);
                for field in [
                    "name",
                    "namespace",
                    "uid",
                    "creationTimestamp",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "generation",
                ] {
                    match old_meta.get(field) {
                        Some(v) => m.insert(field.to_owned(), v.clone()),
                        None => m.remove(field),
                    };
                }
                next
            }
        };
        meta_mut(&mut next).remove("resourceVersion");
        if let Some(map) = next.as_object_mut() {
            // apiVersion and kind always name the stored version.
            for f in ["apiVersion", "kind"] {
                if let Some(v) = old.get(f) {
                    map.insert(f.to_owned(), v.clone());
                }
            }
        }
        let warnings = self.prune(rt, &mut next, opts)?;
        rt.strategy.default(&mut next);
        rt.strategy.admit(&mut next, Some(old), sub.map(|s| s.name), opts.requester.as_ref())?;
        if object::is_deleting(old) {
            let before = object::finalizers(old);
            if let Some(added) = object::finalizers(&next).into_iter().find(|f| !before.contains(f))
            {
                let err = FieldError::forbidden(
                    "metadata.finalizers",
                    format!(
                        "no new finalizers can be added if the object is being deleted, found new finalizers [{added:?}]"
                    ),
                );
                return Err(ApiError::invalid(&rt.group, &rt.kind, &name, &[err]));
            }
        }
        // The stored object without its resourceVersion (which `next` no longer carries):
        // compared with it, a write that changes nothing touches nothing, so it moves no
        // managedFields time and is not written.
        let mut old_plain = old.clone();
        meta_mut(&mut old_plain).remove("resourceVersion");
        if !tracked {
            track_update(rt, &old_plain, &mut next, sub, opts)?;
        }
        let mut errs = Vec::new();
        validate_meta(rt, &next, &mut errs);
        errs.extend(rt.strategy.validate_update(&next, old)?);
        if !errs.is_empty() {
            return Err(ApiError::invalid(&rt.group, &rt.kind, &name, &errs));
        }
        if rt.strategy.tracks_generation() && spec_part(&next) != spec_part(old) {
            meta_mut(&mut next).insert("generation".into(), json!(object::generation(old) + 1));
        }
        if next == old_plain {
            return Ok((None, warnings));
        }
        Ok((Some(next), warnings))
    }

    /// Deletes an object: removed at once, or marked with `deletionTimestamp` while finalizers
    /// (including those of `propagationPolicy`) remain.
    pub async fn delete(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<DeleteOutcome, ApiError> {
        let key = rt.key(namespace, name);
        let pinned = match &opts.resource_version {
            Some(rv) if !rv.is_empty() => Some(parse_rv(rv)?),
            _ => None,
        };
        loop {
            let kv =
                self.storage.get(&key).await.map_err(|e| from_storage(e, subject(rt, name)))?;
            let current = parse_stored(rt, &kv)?;
            rt.strategy
                .check_delete(&current)
                .map_err(|why| ApiError::forbidden(subject(rt, name), why))?;
            if let Some(uid) = opts.uid.as_deref().filter(|u| !u.is_empty()) {
                if uid != object::uid(&current) {
                    return Err(ApiError::conflict(
                        subject(rt, name),
                        format!(
                            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                            object::uid(&current)
                        ),
                    ));
                }
            }
            if let Some(rv) = pinned {
                if rv != kv.mod_revision.get() {
                    return Err(ApiError::conflict(
                        subject(rt, name),
                        format!(
                            "Precondition failed: ResourceVersion in precondition: {rv}, \
                             ResourceVersion in object meta: {}",
                            kv.mod_revision.get()
                        ),
                    ));
                }
            }
            let mut marked = current.clone();
            let mut finalizers: Vec<String> =
                object::finalizers(&current).into_iter().map(str::to_owned).collect();
            let policy_finalizer = match opts.propagation.as_deref() {
                Some("Orphan") => Some("orphan"),
                Some("Foreground") => Some("foregroundDeletion"),
                _ => None,
            };
            if let Some(f) = policy_finalizer {
                if !finalizers.iter().any(|x| x == f) && !object::is_deleting(&current) {
                    finalizers.push(f.to_owned());
                }
            }
            let waits = !finalizers.is_empty() || !rt.strategy.ready_to_remove(&current);
            let expected = kv.mod_revision;
            let result = if waits {
                object::set_finalizers(&mut marked, &finalizers);
                if !object::is_deleting(&marked) {
                    let m = meta_mut(&mut marked);
                    m.insert("deletionTimestamp".into(), Value::String(object::now_rfc3339()));
                    m.insert("deletionGracePeriodSeconds".into(), json!(0));
                    if rt.strategy.tracks_generation() {
                        m.insert("generation".into(), json!(object::generation(&current) + 1));
                    }
                    rt.strategy.on_delete_mark(&mut marked);
                }
                if marked == current || opts.dry_run {
                    return Ok(DeleteOutcome::Marked(marked));
                }
                self.storage.update(&key, to_stored(&mut marked)?, expected).await.map(|kv| {
                    DeleteOutcome::Marked({
                        object::set_resource_version(&mut marked, kv.mod_revision.get());
                        marked
                    })
                })
            } else {
                if opts.dry_run {
                    return Ok(DeleteOutcome::Gone(current));
                }
                let pre = Preconditions { mod_revision: Some(expected), create_revision: None };
                self.storage.delete(&key, &pre).await.map(|d| {
                    let mut gone = current.clone();
                    object::set_resource_version(&mut gone, d.revision.get());
                    DeleteOutcome::Gone(gone)
                })
            };
            match result {
                Ok(outcome) => {
                    // Acknowledged once this server's watch cache has seen it: what is decided
                    // from the cache (RBAC grants, tokens, service accounts) never outlives a
                    // deletion the client was told about. Creations may arrive a moment late;
                    // that only delays a grant.
                    let (DeleteOutcome::Marked(v) | DeleteOutcome::Gone(v)) = &outcome;
                    let rev = object::meta_str(v, "resourceVersion").parse().unwrap_or(0);
                    self.cache.wait_for(rev, Duration::from_secs(1)).await;
                    return Ok(outcome);
                }
                Err(ocm_storage::Error::Conflict { .. }) if pinned.is_none() => {
                    tokio::task::yield_now().await;
                }
                Err(e) => return Err(from_storage(e, subject(rt, name))),
            }
        }
    }

    /// Deletes every object of a list query (deletecollection), returning what each delete did.
    pub async fn delete_collection(
        &self,
        rt: &ResourceType,
        namespace: &str,
        q: &ListQuery,
        opts: &DeleteOptions,
    ) -> Result<Vec<Value>, ApiError> {
        let page = self
            .list(rt, namespace, &ListQuery { limit: 0, continue_token: None, ..q.clone() })
            .await?;
        let mut out = Vec::new();
        for obj in page.items {
            let value = obj.value();
            let ns = object::namespace(&value).to_owned();
            let name = object::name(&value).to_owned();
            match self.delete(rt, &ns, &name, opts).await {
                Ok(DeleteOutcome::Gone(v) | DeleteOutcome::Marked(v)) => out.push(v),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

/// One part of a write: a candidate built from the object so far, kept under the rules of
/// the main resource or of one subresource.
struct Stage<'a> {
    sub: Option<&'a Subresource>,
    /// The candidate's managedFields are already final (a server-side apply computed them).
    tracked: bool,
    make: &'a (dyn Fn(&Value) -> Result<Value, ApiError> + Sync),
}

/// The revision a patch pins by carrying `metadata.resourceVersion`.
fn carried_precondition(patch: &Patch) -> Result<Option<u64>, ApiError> {
    let carried_rv = match patch {
        Patch::Merge(v) | Patch::Strategic(v) | Patch::Apply(v) => {
            v.pointer("/metadata/resourceVersion").and_then(Value::as_str).map(str::to_owned)
        }
        Patch::Json(p) => p.0.iter().find_map(|op| match op {
            json_patch::PatchOperation::Add(a)
                if a.path.as_str() == "/metadata/resourceVersion" =>
            {
                a.value.as_str().map(str::to_owned)
            }
            json_patch::PatchOperation::Replace(r)
                if r.path.as_str() == "/metadata/resourceVersion" =>
            {
                r.value.as_str().map(str::to_owned)
            }
            _ => None,
        }),
    };
    match carried_rv.as_deref() {
        Some(rv) if !rv.is_empty() => Ok(Some(parse_rv(rv)?)),
        _ => Ok(None),
    }
}

/// The storage version's apiVersion and the one a patch is written in.
fn patch_versions(rt: &ResourceType, opts: &WriteOptions) -> (String, String) {
    let storage_version = rt.storage_api_version();
    let version = if opts.api_version.is_empty() {
        storage_version.clone()
    } else {
        opts.api_version.clone()
    };
    (storage_version, version)
}

/// `patch` applied to the stored object `current`, in the request's version.
fn patched(
    rt: &ResourceType,
    sub: Option<&Subresource>,
    opts: &WriteOptions,
    patch: &Patch,
    current: &Value,
) -> Result<Value, ApiError> {
    let (storage_version, version) = patch_versions(rt, opts);
    let converted = version != storage_version;
    let mut doc = if converted {
        rt.strategy.storage_to_version(current.clone(), &version)?
    } else {
        current.clone()
    };
    match patch {
        Patch::Merge(p) => {
            if !p.is_object() {
                return Err(ApiError::bad_request("a merge patch must be a JSON object"));
            }
            json_patch::merge(&mut doc, p);
        }
        Patch::Strategic(p) => {
            smp::apply(&mut doc, p, &rt.shape(&version))
                .map_err(|e| ApiError::bad_request(e.to_string()))?;
        }
        Patch::Apply(config) => {
            doc = server_side_apply(rt, sub, opts, &version, &doc, config, &rt.shape(&version))?;
        }
        Patch::Json(p) => {
            json_patch::patch(&mut doc, p).map_err(|e| ApiError::patch_failed(e.to_string()))?;
        }
    }
    if converted { rt.strategy.version_to_storage(doc, &storage_version) } else { Ok(doc) }
}

/// Who a write is recorded under, and which part of the object it manages.
fn writer<'a>(
    sub: Option<&'a Subresource>,
    opts: &'a WriteOptions,
    storage_api_version: &'a str,
    owned_elsewhere: &'a [&'a str],
    now: &'a str,
) -> managed::Writer<'a> {
    managed::Writer {
        manager: if opts.field_manager.is_empty() { "ocm-hub" } else { &opts.field_manager },
        api_version: if opts.api_version.is_empty() {
            storage_api_version
        } else {
            &opts.api_version
        },
        scope: managed::Scope {
            subresource: sub.map(|s| s.name),
            owned_elsewhere: match sub {
                Some(s) => s.owns,
                None => owned_elsewhere,
            },
        },
        now,
    }
}

/// What every subresource of a kind owns (what main-resource writes do not manage).
fn owned_by_subresources(rt: &ResourceType) -> Vec<&'static str> {
    rt.subresources.iter().flat_map(|s| s.owns.iter().copied()).collect()
}

fn bad_managed_fields(rt: &ResourceType, obj: &Value, bad: managed::BadEntry) -> ApiError {
    let err = FieldError::invalid(bad.field, Value::Null, bad.message);
    ApiError::invalid(&rt.group, &rt.kind, object::name(obj), &[err])
}

/// Records a non-apply write of `next` over `old` (`Null` for a create) in `next`'s
/// managedFields. Entries the client sent are the base (kubectl's client-side/server-side
/// apply migration sends them); without any, the stored ones are; `[{}]` stops tracking.
fn track_update(
    rt: &ResourceType,
    old: &Value,
    next: &mut Value,
    sub: Option<&Subresource>,
    opts: &WriteOptions,
) -> Result<(), ApiError> {
    let stored = || match managed::decode(old) {
        Ok(Managed::Entries(entries)) => entries,
        _ => Vec::new(),
    };
    // A subresource write carries the stored entries (it changes only what it owns).
    let base = if sub.is_some() {
        stored()
    } else {
        match managed::decode(next).map_err(|e| bad_managed_fields(rt, next, e))? {
            Managed::Reset => {
                meta_mut(next).remove("managedFields");
                return Ok(());
            }
            // A client creating an object with managedFields keeps them as they are.
            Managed::Entries(_) if old.is_null() => return Ok(()),
            Managed::Entries(entries) => entries,
            Managed::Absent => stored(),
        }
    };
    let storage_api_version = rt.storage_api_version();
    let owned = owned_by_subresources(rt);
    let now = object::now_rfc3339();
    let w = writer(sub, opts, &storage_api_version, &owned, &now);
    let entries = managed::record_update(old, next, base, &w, &rt.shape(&rt.storage_version));
    managed::encode(next, &entries);
    Ok(())
}

/// Server-side apply of `config` onto `live` (both at `api_version`; `live` is `Null` when
/// the object does not exist): the merged object with its managedFields, or the 409 of the
/// conflicts.
fn server_side_apply(
    rt: &ResourceType,
    sub: Option<&Subresource>,
    opts: &WriteOptions,
    api_version: &str,
    live: &Value,
    config: &Value,
    shape: &Shape,
) -> Result<Value, ApiError> {
    if !config.is_object() {
        return Err(ApiError::bad_request("the apply configuration must be an object"));
    }
    let entries = match managed::decode(live) {
        Ok(Managed::Entries(entries)) => entries,
        _ => Vec::new(),
    };
    if object::meta(config).is_some_and(|m| m.get("managedFields").is_some_and(|v| !v.is_null())) {
        return Err(ApiError::bad_request(
            "metadata.managedFields must be nil in an apply configuration",
        ));
    }
    let owned = owned_by_subresources(rt);
    let now = object::now_rfc3339();
    let w = writer(sub, opts, api_version, &owned, &now);
    // kubectl's upgrade from client-side apply: conflicts on fields its last client-side apply
    // set, whose live value is still that, are taken over. The annotation is read only when a
    // conflict asks.
    let last_applied = std::cell::OnceCell::new();
    let allowed = |p: &[fields::Pe]| {
        let la: &Option<Value> = last_applied.get_or_init(|| {
            (w.manager == "kubectl")
                .then(|| object::meta(live)?.get("annotations")?.get(LAST_APPLIED)?.as_str())
                .flatten()
                .and_then(|s| serde_json::from_str(s).ok())
        });
        la.as_ref()
            .and_then(|la| fields::get(la, p))
            .is_some_and(|v| fields::get(live, p) == Some(v))
    };
    match managed::apply(live, config, entries, &w, shape, opts.force, &allowed) {
        Ok((mut merged, entries)) => {
            managed::encode(&mut merged, &entries);
            Ok(merged)
        }
        Err(managed::Conflicts(conflicts)) => Err(ApiError::apply_conflict(
            managed::conflict_message(&conflicts),
            conflicts
                .into_iter()
                .map(|c| (format!("conflict with {}", c.manager), c.field))
                .collect(),
        )),
    }
}

/// kubectl's client-side apply annotation.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Whether an object passes label and field selectors.
pub fn selectors_match(
    rt: &ResourceType,
    obj: &CachedObject,
    labels: Option<&LabelSelector>,
    fields: Option<&FieldSelector>,
) -> bool {
    if let Some(sel) = labels {
        if !sel.matches(|k| obj.label(k)) {
            return false;
        }
    }
    let Some(sel) = fields else { return true }; // labels need no parse
    let obj = &*obj.value();
    let values: Vec<(String, String)> = std::iter::once("metadata.name")
        .chain(std::iter::once("metadata.namespace"))
        .chain(rt.selectable_fields.iter().map(String::as_str))
        .map(|f| {
            let v = match f {
                "metadata.name" => object::name(obj).to_owned(),
                "metadata.namespace" => object::namespace(obj).to_owned(),
                other => object::field_string(obj, rt.strategy.field_path(other)),
            };
            (f.to_owned(), v)
        })
        .collect();
    sel.matches(|f| values.iter().find(|(k, _)| k == f).map(|(_, v)| v.as_str()))
}

fn encode_continue(rev: u64, after: &str) -> String {
    let body = json!({"v": "meta.k8s.io/v1", "rv": rev, "start": after});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(body.to_string())
}

/// Decodes a continue token, refusing one that points outside the request's prefix.
fn decode_continue(token: &str, prefix: &str) -> Result<(Option<u64>, String), ApiError> {
    let bad = || ApiError::bad_request("continue key is not valid: the token is malformed");
    let bytes =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token).map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    let rev = v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    let start = v.get("start").and_then(Value::as_str).ok_or_else(bad)?;
    if !start.starts_with(prefix) || v.get("v").and_then(Value::as_str) != Some("meta.k8s.io/v1") {
        return Err(bad());
    }
    Ok((Some(rev), start.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_path_sets_and_removes() {
        let mut to = json!({"status": {"a": 1}, "spec": {"x": 1}});
        copy_path(&mut to, &json!({"spec": {"x": 2}}), "status");
        assert_eq!(to, json!({"spec": {"x": 1}}));
        copy_path(&mut to, &json!({"status": {"conditions": [1]}}), "status.conditions");
        assert_eq!(to["status"]["conditions"], json!([1]));
    }

    #[test]
    fn continue_tokens_stay_in_their_prefix() {
        let t = encode_continue(7, "/registry/core/secrets/ns1/a");
        assert_eq!(decode_continue(&t, "/registry/core/secrets/ns1/").unwrap().0, Some(7));
        assert!(decode_continue(&t, "/registry/core/secrets/ns2/").is_err());
        assert!(decode_continue("garbage!", "/").is_err());
    }
}
