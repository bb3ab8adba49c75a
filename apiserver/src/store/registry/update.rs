//! Updates and patches: each part (the object, or what one subresource owns) built from the
//! current object under its subresource's rules, and written once through the registry's one
//! compare-and-swap; JSON, merge, strategic and apply patches.

use super::managers::{server_side_apply, track_update};
use super::meta::{copy_path, spec_part, validate_meta};
use super::*;

impl Registry {
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
        self.write_stages(rt, namespace, name, opts, precondition, &[stage]).await
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
        self.write_stages(rt, namespace, name, opts, precondition, &stages).await
    }

    /// Writes updates and patches through the one compare-and-swap: each stage builds its
    /// candidate from the one before (the first from the current object) under its
    /// subresource's rules, and the result is written once. A precondition pins the revision
    /// (409 when stale).
    pub(super) async fn write_stages(
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
        // What the last decision wrote (or found nothing to write), with its warnings.
        let mut decided: Option<(Value, Vec<String>)> = None;
        let outcome = self
            .compare_and_swap(rt, name, &key, |kv, current| {
                if precondition.is_some_and(|rv| rv != kv.mod_revision.get()) {
                    return Err(ApiError::stale(subject(rt, name)));
                }
                let (update, object, warnings) = self.next_state(rt, opts, stages, current)?;
                decided = Some((object, warnings));
                Ok(update)
            })
            .await?;
        let (mut object, warnings) = decided.expect("a compare-and-swap that succeeds has decided");
        let written = match outcome {
            UpdateOutcome::Put(kv) => Some(kv.mod_revision),
            UpdateOutcome::Deleted(gone) => Some(gone.revision),
            UpdateOutcome::Unchanged(kv) => {
                if let Some(kv) = kv {
                    object::set_resource_version(&mut object, kv.mod_revision.get());
                }
                None
            }
        };
        if let Some(rev) = written {
            self.release_when_cached(room, rev.get()).await;
            object::set_resource_version(&mut object, rev.get());
        }
        Ok(Written { object, warnings, created: false })
    }

    /// What the stages make of `current`: the store update, the object as it is then (written,
    /// removed, or unchanged), and the warnings.
    pub(super) fn next_state(
        &self,
        rt: &ResourceType,
        opts: &WriteOptions,
        stages: &[Stage<'_>],
        current: Value,
    ) -> Result<(Update, Value, Vec<String>), ApiError> {
        let (changed, warnings) = self.run_stages(rt, opts, stages, &current)?;
        let Some(mut next) = changed else {
            return Ok((Update::Unchanged, current, warnings));
        };
        // What the write no longer needs is not held while it waits for storage (a fan-out
        // queues hundreds of writes of large works).
        drop(current);
        if opts.dry_run {
            return Ok((Update::Unchanged, next, warnings));
        }
        let remove = object::is_deleting(&next)
            && object::finalizers(&next).is_empty()
            && rt.strategy.ready_to_remove(&next);
        let update =
            if remove { Update::Delete } else { Update::Put(to_stored(&mut next)?.into()) };
        Ok((update, next, warnings))
    }

    /// Runs the stages over `current`, each candidate built from the object so far and kept
    /// under its subresource's rules: the object when some stage changed it, and the warnings.
    pub(super) fn run_stages(
        &self,
        rt: &ResourceType,
        opts: &WriteOptions,
        stages: &[Stage<'_>],
        current: &Value,
    ) -> Result<(Option<Value>, Vec<String>), ApiError> {
        let mut changed: Option<Value> = None;
        let mut warnings = Vec::new();
        for stage in stages {
            let base = changed.as_ref().unwrap_or(current);
            let candidate = (stage.make)(base)?;
            let (next, more) =
                self.prepare_update(rt, base, candidate, stage.sub, opts, stage.tracked)?;
            warnings.extend(more);
            if next.is_some() {
                changed = next;
            }
        }
        Ok((changed, warnings))
    }

    /// Applies the update rules to a candidate; `None` means nothing changes. `tracked`: the
    /// candidate's managedFields are already final (a server-side apply computed them).
    pub(super) fn prepare_update(
        &self,
        rt: &ResourceType,
        old: &Value,
        candidate: Value,
        sub: Option<&Subresource>,
        opts: &WriteOptions,
        tracked: bool,
    ) -> Result<(Option<Value>, Vec<String>), ApiError> {
        let name = object::name(old).to_owned();
        check_identity(rt, old, &candidate)?;
        let mut next = match sub {
            Some(sub) => subresource_write(old, candidate, sub, tracked),
            None => main_write(rt, old, candidate),
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
        check_no_new_finalizers(rt, old, &next)?;
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
        if errs.is_empty() && sub.is_none() && !object::is_deleting(&next) {
            errs.extend(self.validating_errors(rt, &next));
        }
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
}

/// One part of a write: a candidate built from the object so far, kept under the rules of
/// the main resource or of one subresource.
pub(super) struct Stage<'a> {
    pub(super) sub: Option<&'a Subresource>,
    /// The candidate's managedFields are already final (a server-side apply computed them).
    pub(super) tracked: bool,
    pub(super) make: &'a (dyn Fn(&Value) -> Result<Value, ApiError> + Sync),
}

/// The revision a patch pins by carrying `metadata.resourceVersion`.
pub(super) fn carried_precondition(patch: &Patch) -> Result<Option<u64>, ApiError> {
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
pub(super) fn patch_versions(rt: &ResourceType, opts: &WriteOptions) -> (String, String) {
    let storage_version = rt.storage_api_version();
    let version = if opts.api_version.is_empty() {
        storage_version.clone()
    } else {
        opts.api_version.clone()
    };
    (storage_version, version)
}

/// `patch` applied to the stored object `current`, in the request's version.
pub(super) fn patched(
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

/// An update's body names the object it replaces: the same name, namespace and uid (where it
/// names them at all).
fn check_identity(rt: &ResourceType, old: &Value, candidate: &Value) -> Result<(), ApiError> {
    let name = object::name(old);
    if !candidate.is_object() {
        return Err(ApiError::bad_request("the object must be a JSON object"));
    }
    let body_name = object::name(candidate);
    if !body_name.is_empty() && body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    let body_ns = object::namespace(candidate);
    if rt.namespaced && !body_ns.is_empty() && body_ns != object::namespace(old) {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the \
             request",
        ));
    }
    let body_uid = object::uid(candidate);
    if !body_uid.is_empty() && body_uid != object::uid(old) {
        let err = FieldError::invalid("metadata.uid", body_uid, "field is immutable");
        return Err(ApiError::invalid(&rt.group, &rt.kind, name, &[err]));
    }
    Ok(())
}

/// A subresource write changes only what the subresource owns (and, for an apply, the
/// managedFields it computed with the rest of the candidate).
fn subresource_write(old: &Value, candidate: Value, sub: &Subresource, tracked: bool) -> Value {
    let mut next = old.clone();
    for path in sub.owns {
        copy_path(&mut next, &candidate, path);
    }
    if tracked {
        copy_path(&mut next, &candidate, "metadata.managedFields");
    }
    next
}

/// A main-resource write keeps what the subresources own and the server-owned metadata.
fn main_write(rt: &ResourceType, old: &Value, candidate: Value) -> Value {
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

/// An object being deleted takes no new finalizer.
fn check_no_new_finalizers(rt: &ResourceType, old: &Value, next: &Value) -> Result<(), ApiError> {
    if !object::is_deleting(old) {
        return Ok(());
    }
    let before = object::finalizers(old);
    match object::finalizers(next).into_iter().find(|f| !before.contains(f)) {
        Some(added) => {
            let err = FieldError::forbidden(
                "metadata.finalizers",
                format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers [{added:?}]"
                ),
            );
            Err(ApiError::invalid(&rt.group, &rt.kind, object::name(old), &[err]))
        }
        None => Ok(()),
    }
}
