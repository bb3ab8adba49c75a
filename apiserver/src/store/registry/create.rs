//! Creates: generateName, system metadata, the strategy's prune, default, admit and
//! validate, the namespace lifecycle check, then one store create.

use super::managers::track_update;
use super::meta::validate_meta;
use super::*;

impl Registry {
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

    /// Creates `desired`, or brings the stored object to it: every top-level field but
    /// `metadata` and `status`, plus the labels and annotations `desired` names (others are
    /// kept). Writes nothing when they already agree. The hub's own objects that controllers
    /// keep (RBAC, add-on works).
    pub async fn ensure(
        &self,
        rt: &ResourceType,
        desired: Value,
        opts: &WriteOptions,
    ) -> Result<(), ApiError> {
        let (ns, name) = (object::namespace(&desired), object::name(&desired));
        let Some(current) = self.cached(rt, ns, name) else {
            return self.create_if_absent(rt, desired.clone(), opts).await;
        };
        let current = current.value();
        let mut patch = Map::new();
        for (k, v) in desired.as_object().into_iter().flatten() {
            if !matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status")
                && current.get(k) != Some(v)
            {
                patch.insert(k.clone(), v.clone());
            }
        }
        let mut meta = Map::new();
        for part in ["labels", "annotations"] {
            let wanted = desired["metadata"].get(part).and_then(Value::as_object);
            let have = current["metadata"].get(part);
            let changed: Map<String, Value> = wanted
                .into_iter()
                .flatten()
                .filter(|(k, v)| have.and_then(|h| h.get(k.as_str())) != Some(v))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if !changed.is_empty() {
                meta.insert(part.to_owned(), Value::Object(changed));
            }
        }
        if !meta.is_empty() {
            patch.insert("metadata".into(), Value::Object(meta));
        }
        if patch.is_empty() {
            return Ok(());
        }
        let (ns, name) = (ns.to_owned(), name.to_owned());
        self.patch(rt, &ns, &name, &Patch::Merge(Value::Object(patch)), None, opts).await.map(drop)
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
    pub(super) async fn create_tracked(
        &self,
        rt: &ResourceType,
        namespace: &str,
        obj: Value,
        opts: &WriteOptions,
        tracked: bool,
    ) -> Result<Written, ApiError> {
        let (mut obj, mut warnings, generate) = prepare_new(rt, namespace, obj, opts, tracked)?;
        let mut attempts = 0;
        loop {
            let name = self.name_new(rt, namespace, &mut obj, generate.as_deref()).await?;
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

    /// Names a prepared new object (a fresh name from `generate`, the `generateName` prefix,
    /// when given), validates it and checks its namespace is open; returns its name.
    pub(super) async fn name_new(
        &self,
        rt: &ResourceType,
        namespace: &str,
        obj: &mut Value,
        generate: Option<&str>,
    ) -> Result<String, ApiError> {
        if let Some(prefix) = generate {
            meta_mut(obj).insert("name".into(), Value::String(object::generate_name(prefix)));
        }
        let name = object::name(obj).to_owned();
        if name.is_empty() {
            let err = FieldError::required("metadata.name", "name or generateName is required");
            return Err(ApiError::invalid(&rt.group, &rt.kind, "", &[err]));
        }
        let mut errs = Vec::new();
        validate_meta(rt, obj, &mut errs);
        errs.extend(rt.strategy.validate(obj)?);
        if errs.is_empty() {
            errs.extend(self.validating_errors(rt, obj));
        }
        if !errs.is_empty() {
            return Err(ApiError::invalid(&rt.group, &rt.kind, &name, &errs));
        }
        if rt.namespaced {
            self.check_namespace_open(rt, namespace, &name).await?;
        }
        Ok(name)
    }

    /// Refuses content in a namespace that does not exist or is being deleted (Kubernetes'
    /// NamespaceLifecycle admission).
    pub(super) async fn check_namespace_open(
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

    pub(super) fn prune(
        &self,
        rt: &ResourceType,
        obj: &mut Value,
        opts: &WriteOptions,
    ) -> Result<Vec<String>, ApiError> {
        prune(rt, obj, opts)
    }
}

/// The strategy's prune, with unknown fields (and the fields the body repeats) refused,
/// warned of or dropped as `fieldValidation` says, in kube's words: repeats first, each
/// `duplicate field "<path>"`, then each `unknown field "<path>"`.
fn prune(rt: &ResourceType, obj: &mut Value, opts: &WriteOptions) -> Result<Vec<String>, ApiError> {
    let unknown = rt.strategy.prune(obj);
    let problems: Vec<String> = (opts.duplicate_fields.iter())
        .map(|f| format!("duplicate field {f:?}"))
        .chain(unknown.iter().map(|f| format!("unknown field {f:?}")))
        .collect();
    if problems.is_empty() {
        return Ok(Vec::new());
    }
    match opts.field_validation {
        FieldValidation::Strict => Err(ApiError::bad_request(format!(
            "{kind} in version {v:?} cannot be handled as a {kind}: strict decoding error: {}",
            problems.join(", "),
            kind = rt.kind,
            v = rt.storage_version,
        ))),
        FieldValidation::Warn => Ok(problems),
        FieldValidation::Ignore => Ok(Vec::new()),
    }
}

/// A new object as the create recipe makes it before it is named: system metadata, status
/// left to its subresource, the strategy's prepare, prune, defaults and admission, uid,
/// creation time, generation and managedFields (unless `tracked`: already final). Returns it,
/// the prune's warnings and the `generateName` prefix when it names none itself.
pub(super) fn prepare_new(
    rt: &ResourceType,
    namespace: &str,
    mut obj: Value,
    opts: &WriteOptions,
    tracked: bool,
) -> Result<(Value, Vec<String>, Option<String>), ApiError> {
    let generate = system_metadata(rt, namespace, &mut obj)?;
    if rt.has_status() {
        if let Some(map) = obj.as_object_mut() {
            map.remove("status");
        }
    }
    rt.strategy.prepare_create(&mut obj);
    let warnings = prune(rt, &mut obj, opts)?;
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
    Ok((obj, warnings, generate))
}

/// Clears what the server sets on a new object and puts it in the request's namespace;
/// returns the `generateName` prefix when the object names none itself.
fn system_metadata(
    rt: &ResourceType,
    namespace: &str,
    obj: &mut Value,
) -> Result<Option<String>, ApiError> {
    if !obj.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    let m = meta_mut(obj);
    if rt.namespaced {
        let body_ns = m.get("namespace").and_then(Value::as_str).unwrap_or("");
        if !body_ns.is_empty() && body_ns != namespace {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the \
                 request",
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
    Ok((name.is_empty() && !prefix.is_empty()).then(|| prefix.to_owned()))
}
