//! The resource handler: one generic answer per verb (get, list, watch, create, update, patch,
//! delete, deletecollection) through the registry, plus the kinds answered and never stored
//! (reviews, action subresources).

use super::*;

pub(super) async fn resource(
    state: &Arc<ApiState>,
    target: Target,
    req: Request,
    q: Query,
    user: &Identity,
) -> Result<Response, ApiError> {
    if let Some(review) = target.rt.review {
        return answer_review(state, review, &target, req, user).await;
    }
    let action =
        target.sub.as_deref().and_then(|s| target.rt.subresource(s)).and_then(|s| s.action);
    if let Some(action) = action {
        return answer_action(state, action, &target, req, &q).await;
    }
    let method = req.method().clone();
    let watching = q.flag("watch")?;
    let is_list = method == Method::GET && target.name.is_none() && !watching;
    let out = negotiate(&target, req.headers(), &q, is_list)?;
    // Reads see only what this requester may (an agent: its own cluster's CSRs).
    let view = Visibility::of(user, &target.rt.group, &target.rt.plural);
    match (&method, target.name.clone()) {
        (&Method::GET, None) if watching => {
            let reauth =
                req.extensions().get::<Reauthorize>().map(|r| (Arc::clone(user), r.0.clone()));
            watch(state, target, &q, out, reauth, view).await
        }
        (&Method::GET, None) => list(state, &target, &q, out, view.as_ref()).await,
        (&Method::GET, Some(name)) => get(state, &target, &name, &q, out, view.as_ref()).await,
        (&Method::POST, None) => create(state, &target, req, &q, user, out).await,
        (&Method::PUT, Some(name)) => update(state, &target, &name, req, &q, user, out).await,
        (&Method::PATCH, Some(name)) => patch(state, &target, &name, req, &q, user, out).await,
        (&Method::DELETE, Some(name)) => delete(state, &target, &name, req, &q, out).await,
        (&Method::DELETE, None) => delete_collection(state, &target, req, &q).await,
        (m, name) => {
            let verb = match (m.as_str(), name.is_some()) {
                ("POST", true) => "create",
                ("PUT", false) => "update",
                ("PATCH", false) => "patch",
                (other, _) => other,
            };
            Err(ApiError::method_not_allowed(verb, &target.rt.plural))
        }
    }
}

/// A review kind: created and answered, never stored.
async fn answer_review(
    state: &ApiState,
    review: crate::machinery::scheme::Review,
    target: &Target,
    req: Request,
    user: &Identity,
) -> Result<Response, ApiError> {
    if req.method() != Method::POST || target.name.is_some() || target.sub.is_some() {
        let verb = req.method().as_str().to_ascii_lowercase();
        return Err(ApiError::method_not_allowed(&verb, &target.rt.plural));
    }
    let body = read_body(req).await?;
    check_type(target, &body)?;
    let answered = crate::auth::reviews::answer(review, &state.access, &state.authn, user, body)?;
    Ok(json_response(
        StatusCode::CREATED,
        serde_json::to_vec(&answered).map_err(ApiError::internal)?,
    ))
}

/// An action subresource: a request created (TokenRequest), or a view read (a placement's
/// `explain`); never stored.
async fn answer_action(
    state: &ApiState,
    action: crate::machinery::scheme::Action,
    target: &Target,
    req: Request,
    q: &Query,
) -> Result<Response, ApiError> {
    let verb = req.method().as_str().to_ascii_lowercase();
    let wanted = if action.verb() == "get" { Method::GET } else { Method::POST };
    if req.method() != wanted {
        let sub = target.sub.as_deref().unwrap_or_default();
        return Err(ApiError::method_not_allowed(&verb, &format!("{}/{sub}", target.rt.plural)));
    }
    let name = target.name.as_deref().unwrap_or_default();
    let (code, answered) = match action {
        crate::machinery::scheme::Action::TokenRequest => {
            let body = read_body(req).await?;
            let (group, version, kind) = action.kind();
            check_type_is(&body, &format!("{group}/{version}"), kind)?;
            let rt = &target.rt;
            (
                StatusCode::CREATED,
                state.authn.token_request(rt, &target.namespace, name, &body).await?,
            )
        }
        crate::machinery::scheme::Action::ExplainPlacement => {
            let scheduler = state.views.placement.as_ref().ok_or_else(|| {
                ApiError::unavailable(
                    "the placement controller is not running on this hub (--controllers)",
                )
            })?;
            (StatusCode::OK, scheduler.explain(&target.rt, &target.namespace, name)?)
        }
        crate::machinery::scheme::Action::RenderWork => {
            let sets = state.views.replica_sets.as_ref().ok_or_else(|| {
                ApiError::unavailable(
                    "the ManifestWorkReplicaSet controller is not running on this hub (--controllers)",
                )
            })?;
            let cluster = q.get("cluster").filter(|c| !c.is_empty()).ok_or_else(|| {
                ApiError::bad_request("render needs the cluster to render for: ?cluster=<name>")
            })?;
            (StatusCode::OK, sets.render(&target.namespace, name, cluster)?)
        }
    };
    Ok(json_response(code, serde_json::to_vec(&answered).map_err(ApiError::internal)?))
}

/// The subresource the target names, if any.
fn subresource(target: &Target) -> Option<crate::machinery::scheme::Subresource> {
    target.sub.as_deref().and_then(|s| target.rt.subresource(s)).cloned()
}

async fn list(
    state: &ApiState,
    target: &Target,
    q: &Query,
    out: Output,
    view: Option<&Visibility>,
) -> Result<Response, ApiError> {
    let lq = list_query(target, q)?;
    if q.get("sendInitialEvents").is_some() {
        let err =
            FieldError::forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list");
        return Err(ApiError::invalid_options("ListOptions", &[err]));
    }
    let mut page = state.registry.list(&target.rt, &target.namespace, &lq).await?;
    if let Some(view) = view {
        // A page may then hold fewer items than its limit, as Kubernetes allows; how many
        // follow is not known (the view filters like a selector).
        page.items.retain(|obj| view.sees(&obj.value()));
        page.remaining = None;
    }
    list_response(target, page, out)
}

async fn get(
    state: &ApiState,
    target: &Target,
    name: &str,
    q: &Query,
    out: Output,
    view: Option<&Visibility>,
) -> Result<Response, ApiError> {
    let rv = match q.get("resourceVersion").filter(|s| !s.is_empty()) {
        Some(rv) => Some(parse_rv(rv)?),
        None => None,
    };
    let obj = state.registry.get(&target.rt, &target.namespace, name, rv).await?;
    // An object outside the requester's view does not exist for it: NotFound, as its list
    // and watch agree, rather than a Forbidden that would confirm another cluster's request.
    if view.is_some_and(|view| !view.sees(&obj)) {
        return Err(ApiError::not_found(crate::store::registry::subject(&target.rt, name)));
    }
    object_response(StatusCode::OK, target, obj, &[], out)
}

/// A write's options from its query and headers, with its requester for admission.
fn write_options(
    state: &ApiState,
    target: &Target,
    req: &Request,
    q: &Query,
    user: &Identity,
) -> Result<WriteOptions, ApiError> {
    let mut opts = q.write_options(target, req.headers())?;
    opts.requester = Some(requester(state, user));
    Ok(opts)
}

/// A body of the target's kind, converted to its storage version; the fields it repeats are
/// noted in `opts` unless `fieldValidation` ignores them.
async fn stored_body(
    target: &Target,
    req: Request,
    opts: &mut WriteOptions,
) -> Result<Value, ApiError> {
    let body = if opts.field_validation == FieldValidation::Ignore {
        read_body(req).await?
    } else {
        let (body, duplicates) = read_body_noting_duplicates(req).await?;
        opts.duplicate_fields = duplicates;
        body
    };
    check_type(target, &body)?;
    to_storage(target, body)
}

async fn create(
    state: &ApiState,
    target: &Target,
    req: Request,
    q: &Query,
    user: &Identity,
    out: Output,
) -> Result<Response, ApiError> {
    let mut opts = write_options(state, target, &req, q, user)?;
    let body = stored_body(target, req, &mut opts).await?;
    let written = state.registry.create(&target.rt, &target.namespace, body, &opts).await?;
    object_response(StatusCode::CREATED, target, written.object, &written.warnings, out)
}

async fn update(
    state: &ApiState,
    target: &Target,
    name: &str,
    req: Request,
    q: &Query,
    user: &Identity,
    out: Output,
) -> Result<Response, ApiError> {
    let mut opts = write_options(state, target, &req, q, user)?;
    let body = stored_body(target, req, &mut opts).await?;
    let sub = subresource(target);
    let written = state
        .registry
        .update(&target.rt, &target.namespace, name, body, sub.as_ref(), &opts)
        .await?;
    object_response(StatusCode::OK, target, written.object, &written.warnings, out)
}

async fn patch(
    state: &ApiState,
    target: &Target,
    name: &str,
    req: Request,
    q: &Query,
    user: &Identity,
    out: Output,
) -> Result<Response, ApiError> {
    let mut opts = write_options(state, target, &req, q, user)?;
    let content_type = media_type(req.headers());
    let apply = content_type == "application/apply-patch+yaml";
    opts.force = q.flag("force")?;
    if q.get("force").is_some() && !apply {
        let err = FieldError::forbidden("force", "may not be specified for non-apply patch");
        return Err(ApiError::invalid_options("PatchOptions", &[err]));
    }
    if apply && q.get("fieldManager").is_none_or(str::is_empty) {
        let err = FieldError::required("fieldManager", "is required for apply patch");
        return Err(ApiError::invalid_options("PatchOptions", &[err]));
    }
    let patch = read_patch(target, &content_type, req).await?;
    let sub = subresource(target);
    let written = state
        .registry
        .patch(&target.rt, &target.namespace, name, &patch, sub.as_ref(), &opts)
        .await?;
    let code = if written.created { StatusCode::CREATED } else { StatusCode::OK };
    object_response(code, target, written.object, &written.warnings, out)
}

/// A patch body of the kind its `Content-Type` names.
async fn read_patch(target: &Target, content_type: &str, req: Request) -> Result<Patch, ApiError> {
    match content_type {
        "application/merge-patch+json" => Ok(Patch::Merge(read_body(req).await?)),
        "application/strategic-merge-patch+json" => Ok(Patch::Strategic(read_body(req).await?)),
        "application/apply-patch+yaml" => {
            let config = read_body(req).await?;
            check_type(target, &config)?;
            if config.get("apiVersion").is_none() || config.get("kind").is_none() {
                return Err(ApiError::bad_request(
                    "an apply configuration must set apiVersion and kind",
                ));
            }
            Ok(Patch::Apply(config))
        }
        "application/json-patch+json" => {
            let v = read_body(req).await?;
            let ops: json_patch::Patch = serde_json::from_value(v)
                .map_err(|e| ApiError::bad_request(format!("the JSON patch is not valid: {e}")))?;
            if ops.0.len() > 10_000 {
                return Err(ApiError::too_large("the JSON patch has more than 10000 operations"));
            }
            Ok(Patch::Json(ops))
        }
        _ => Err(ApiError::unsupported_media_type(
            "the body of the request was in an unknown format - accepted media types \
             include: application/json-patch+json, application/merge-patch+json, \
             application/apply-patch+yaml, application/strategic-merge-patch+json",
        )),
    }
}

async fn delete(
    state: &ApiState,
    target: &Target,
    name: &str,
    req: Request,
    q: &Query,
    out: Output,
) -> Result<Response, ApiError> {
    let rt = &target.rt;
    if let Some(sub) = &target.sub {
        return Err(ApiError::method_not_allowed("delete", &format!("{}/{sub}", rt.plural)));
    }
    let body = read_optional_body(req).await?;
    let opts = delete_options(q, body)?;
    match state.registry.delete(rt, &target.namespace, name, &opts).await? {
        DeleteOutcome::Marked(obj) => object_response(StatusCode::OK, target, obj, &[], out),
        DeleteOutcome::Gone(obj) => value_response(&json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {
                "name": name,
                "group": rt.group,
                "kind": rt.plural,
                "uid": object::uid(&obj),
            },
        })),
    }
}

async fn delete_collection(
    state: &ApiState,
    target: &Target,
    req: Request,
    q: &Query,
) -> Result<Response, ApiError> {
    let rt = &target.rt;
    let lq = list_query(target, q)?;
    let body = read_optional_body(req).await?;
    let opts = delete_options(q, body)?;
    let deleted = state.registry.delete_collection(rt, &target.namespace, &lq, &opts).await?;
    let items = deleted.into_iter().map(|o| to_wire(target, o)).collect::<Result<Vec<_>, _>>()?;
    let list = object::json_object([
        ("kind", Value::from(rt.list_kind.as_str())),
        ("apiVersion", Value::from(rt.api_version(&target.version))),
        ("metadata", json!({})),
        ("items", Value::Array(items)),
    ]);
    value_response(&list)
}
