//! The registry's managedFields: an `Update` entry for every write and server-side apply,
//! owned by the subresources' rules.

use super::*;

/// What every subresource of a kind owns (what main-resource writes do not manage).
pub(super) fn owned_by_subresources(rt: &ResourceType) -> Vec<&'static str> {
    rt.subresources.iter().flat_map(|s| s.owns.iter().copied()).collect()
}

pub(super) fn bad_managed_fields(
    rt: &ResourceType,
    obj: &Value,
    bad: managed::BadEntry,
) -> ApiError {
    let err = FieldError::invalid(bad.field, Value::Null, bad.message);
    ApiError::invalid(&rt.group, &rt.kind, object::name(obj), &[err])
}

/// Records a non-apply write of `next` over `old` (`Null` for a create) in `next`'s
/// managedFields. Entries the client sent are the base (kubectl's client-side/server-side
/// apply migration sends them); without any, the stored ones are; `[{}]` stops tracking.
pub(super) fn track_update(
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
pub(super) fn server_side_apply(
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
pub(super) const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Who a write is recorded under, and which part of the object it manages.
pub(super) fn writer<'a>(
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
