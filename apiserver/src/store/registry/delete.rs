//! Deletes: preconditions, finalizers of the propagation policy, `deletionTimestamp` while
//! finalizers remain, removal once none do; and deletecollection.

use super::*;

impl Registry {
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
        let mut decided = None;
        let outcome = self
            .compare_and_swap(rt, name, &key, |kv, current| {
                check_preconditions(rt, name, opts, pinned, kv.mod_revision.get(), &current)?;
                let (update, outcome) = deletion(rt, opts, current)?;
                decided = Some(outcome);
                Ok(update)
            })
            .await?;
        let mut decided = decided.expect("a compare-and-swap that succeeds has decided");
        let rev = match outcome {
            UpdateOutcome::Put(kv) => kv.mod_revision,
            UpdateOutcome::Deleted(gone) => gone.revision,
            UpdateOutcome::Unchanged(_) => return Ok(decided),
        };
        let (DeleteOutcome::Marked(v) | DeleteOutcome::Gone(v)) = &mut decided;
        object::set_resource_version(v, rev.get());
        // Acknowledged once this server's watch cache has seen it: what is decided from the
        // cache (RBAC grants, tokens, service accounts) never outlives a deletion the client
        // was told about. Creations may arrive a moment late; that only delays a grant.
        self.cache.wait_for(rev.get(), Duration::from_secs(1)).await;
        Ok(decided)
    }

    /// Deletes each of `objects` of kind `rt` (a controller's cleanup), `at_once` in flight;
    /// one already gone is fine. The first failure, if any.
    pub async fn delete_each(
        &self,
        rt: &ResourceType,
        objects: &[Arc<CachedObject>],
        at_once: usize,
    ) -> Result<(), ApiError> {
        use futures::StreamExt as _;
        let results: Vec<Result<(), ApiError>> = futures::stream::iter(objects.iter().cloned())
            .map(|o: Arc<CachedObject>| async move {
                let (ns, name) = o.namespace_name();
                match self.delete(rt, ns, name, &DeleteOptions::default()).await {
                    Ok(_) => Ok(()),
                    Err(e) if e.code == 404 => Ok(()),
                    Err(e) => Err(e),
                }
            })
            .buffer_unordered(at_once.max(1))
            .collect()
            .await;
        results.into_iter().collect()
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

/// A delete's preconditions (`uid`, `resourceVersion`) against the object as stored at
/// `mod_revision`, and the kind's own refusal.
pub(super) fn check_preconditions(
    rt: &ResourceType,
    name: &str,
    opts: &DeleteOptions,
    pinned: Option<u64>,
    mod_revision: u64,
    current: &Value,
) -> Result<(), ApiError> {
    rt.strategy.check_delete(current).map_err(|why| ApiError::forbidden(subject(rt, name), why))?;
    if let Some(uid) = opts.uid.as_deref().filter(|u| !u.is_empty()) {
        if uid != object::uid(current) {
            return Err(ApiError::conflict(
                subject(rt, name),
                format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    object::uid(current)
                ),
            ));
        }
    }
    if let Some(rv) = pinned {
        if rv != mod_revision {
            return Err(ApiError::conflict(
                subject(rt, name),
                format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, \
                     ResourceVersion in object meta: {mod_revision}"
                ),
            ));
        }
    }
    Ok(())
}

/// What deleting `current` does: removes it, or marks it deleting with the policy's
/// finalizer while finalizers remain (nothing to write when it already is, or on a dry run).
pub(super) fn deletion(
    rt: &ResourceType,
    opts: &DeleteOptions,
    current: Value,
) -> Result<(Update, DeleteOutcome), ApiError> {
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
    if !waits {
        let update = if opts.dry_run { Update::Unchanged } else { Update::Delete };
        return Ok((update, DeleteOutcome::Gone(current)));
    }
    let mut marked = current.clone();
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
        return Ok((Update::Unchanged, DeleteOutcome::Marked(marked)));
    }
    let bytes = to_stored(&mut marked)?;
    Ok((Update::Put(bytes.into()), DeleteOutcome::Marked(marked)))
}
