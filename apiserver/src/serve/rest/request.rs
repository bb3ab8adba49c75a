//! What a request asks for: its query parameters, the kind and object its path names
//! (`Target`), its authorization attributes (Kubernetes' RequestInfo), list and delete
//! options.

use super::*;

/// Query parameters (empty pairs ignored, last value wins).
#[derive(Debug, Default)]
pub(super) struct Query(pub(super) HashMap<String, String>);

impl Query {
    pub(super) fn parse(raw: Option<&str>) -> Query {
        let mut map = HashMap::new();
        if let Some(raw) = raw {
            for (k, v) in form_urlencoded::parse(raw.as_bytes()) {
                if !k.is_empty() {
                    map.insert(k.into_owned(), v.into_owned());
                }
            }
        }
        Query(map)
    }

    pub(super) fn get(&self, k: &str) -> Option<&str> {
        self.0.get(k).map(String::as_str)
    }

    pub(super) fn flag(&self, k: &str) -> Result<bool, ApiError> {
        match self.get(k) {
            None | Some("") | Some("false") | Some("0") => Ok(false),
            Some("true") | Some("1") => Ok(true),
            Some(other) => {
                Err(ApiError::bad_request(format!("invalid boolean for {k}: {other:?}")))
            }
        }
    }

    /// The options of a write to `target` with these request headers.
    pub(super) fn write_options(
        &self,
        target: &Target,
        headers: &HeaderMap,
    ) -> Result<WriteOptions, ApiError> {
        let dry_run = dry_run(self.get("dryRun"))?;
        let field_validation = match self.get("fieldValidation") {
            None | Some("") | Some("Warn") => FieldValidation::Warn,
            Some("Strict") => FieldValidation::Strict,
            Some("Ignore") => FieldValidation::Ignore,
            Some(other) => {
                let err = FieldError::new(
                    ocm_proto::validation::FieldErrorKind::NotSupported,
                    "fieldValidation",
                    Some(Value::String(other.into())),
                    r#"supported values: "Ignore", "Strict", "Warn""#,
                );
                return Err(ApiError::invalid_options("CreateOptions", &[err]));
            }
        };
        if let Some(fm) = self.get("fieldManager") {
            if fm.len() > 128 || fm.chars().any(|c| c.is_control()) {
                let err = FieldError::invalid(
                    "fieldManager",
                    fm,
                    "must be at most 128 printable characters",
                );
                return Err(ApiError::invalid_options("CreateOptions", &[err]));
            }
        }
        // Like kube-apiserver, a write without fieldManager is recorded under the product name
        // of its User-Agent (`kubectl/v1.32.0 ...` -> `kubectl`).
        let field_manager = match self.get("fieldManager").filter(|m| !m.is_empty()) {
            Some(m) => m.to_owned(),
            None => headers
                .get(header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .map(|ua| ua.split('/').next().unwrap_or("").chars().take(128).collect())
                .unwrap_or_default(),
        };
        Ok(WriteOptions {
            dry_run,
            field_validation,
            duplicate_fields: Vec::new(),
            field_manager,
            force: false,
            api_version: target.rt.api_version(&target.version),
            requester: None,
        })
    }
}

pub(super) fn dry_run(v: Option<&str>) -> Result<bool, ApiError> {
    match v {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => {
            let err = FieldError::new(
                ocm_proto::validation::FieldErrorKind::NotSupported,
                "dryRun",
                Some(Value::String(other.into())),
                r#"supported values: "All""#,
            );
            Err(ApiError::invalid_options("CreateOptions", &[err]))
        }
    }
}

/// What a resource path names.
#[derive(Debug)]
pub(super) struct Target {
    pub(super) rt: Arc<ResourceType>,
    pub(super) version: String,
    pub(super) namespace: String,
    pub(super) name: Option<String>,
    pub(super) sub: Option<String>,
}

/// Splits `namespaces/<ns>/<resource>...` into the namespace and the rest; the namespace
/// object's own paths (`namespaces/<n>`, `namespaces/<n>/status|finalize`) stay whole.
/// Routing and authorization both use it, so they never disagree on what a path names.
pub(super) fn namespace_scope<'a>(parts: &'a [&'a str]) -> (&'a str, &'a [&'a str]) {
    match parts {
        ["namespaces", ns, next, ..] if !matches!(*next, "status" | "finalize") => {
            (ns, &parts[2..])
        }
        _ => ("", parts),
    }
}

/// Parses `/api/v1/...` or `/apis/<g>/<v>/...` after the group-version.
pub(super) fn resolve(
    state: &ApiState,
    group: &str,
    version: &str,
    parts: &[&str],
) -> Result<Target, ApiError> {
    let scheme = &state.registry.scheme;
    let (namespace, rest) = namespace_scope(parts);
    let namespace = namespace.to_owned();
    let rt = scheme.lookup(group, version, rest[0]).ok_or_else(ApiError::path_not_found)?;
    if !namespace.is_empty() && !rt.namespaced {
        return Err(ApiError::path_not_found());
    }
    if rest.len() > 3 {
        return Err(ApiError::path_not_found());
    }
    if rt.namespaced && namespace.is_empty() && rest.len() > 1 {
        return Err(ApiError::path_not_found());
    }
    let sub = rest.get(2).map(|s| (*s).to_owned());
    if let Some(s) = &sub {
        if rt.subresource(s).is_none() {
            return Err(ApiError::path_not_found());
        }
    }
    Ok(Target {
        rt: Arc::clone(rt),
        version: version.to_owned(),
        namespace,
        name: rest.get(1).map(|s| (*s).to_owned()),
        sub,
    })
}

pub(super) fn list_query(target: &Target, q: &Query) -> Result<ListQuery, ApiError> {
    let labels = match q.get("labelSelector").filter(|s| !s.is_empty()) {
        Some(s) => Some(LabelSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?),
        None => None,
    };
    let fields = match q.get("fieldSelector").filter(|s| !s.is_empty()) {
        Some(s) => {
            let sel = FieldSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?;
            for req in &sel.requirements {
                if !target.rt.selectable(&req.field) {
                    return Err(ApiError::bad_request(format!(
                        "field label not supported: {}",
                        req.field
                    )));
                }
            }
            Some(sel)
        }
        None => None,
    };
    let limit = match q.get("limit").filter(|s| !s.is_empty()) {
        Some(l) => l
            .parse::<i64>()
            .map_err(|_| ApiError::bad_request(format!("invalid limit: {l:?}")))?
            .max(0) as usize,
        None => 0,
    };
    let rv = q.get("resourceVersion").filter(|s| !s.is_empty()).map(str::to_owned);
    let rv_match = q.get("resourceVersionMatch").filter(|s| !s.is_empty()).map(str::to_owned);
    let cont = q.get("continue").filter(|s| !s.is_empty()).map(str::to_owned);
    let mut errs = Vec::new();
    if let Some(m) = &rv_match {
        if !matches!(m.as_str(), "Exact" | "NotOlderThan") {
            errs.push(FieldError::new(
                ocm_proto::validation::FieldErrorKind::NotSupported,
                "resourceVersionMatch",
                Some(Value::String(m.clone())),
                r#"supported values: "Exact", "NotOlderThan""#,
            ));
        } else if rv.is_none() {
            errs.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        } else if m == "Exact" && rv.as_deref() == Some("0") {
            errs.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
    }
    if cont.is_some() && (rv.as_deref().is_some_and(|r| r != "0") || rv_match.is_some()) {
        errs.push(FieldError::forbidden(
            "resourceVersionMatch",
            "resourceVersionMatch is forbidden when continue is provided",
        ));
    }
    if !errs.is_empty() {
        return Err(ApiError::invalid_options("ListOptions", &errs));
    }
    Ok(ListQuery {
        labels,
        fields,
        limit,
        continue_token: cont,
        resource_version: rv,
        resource_version_match: rv_match,
    })
}

pub(super) fn list_query_selectors_only(target: &Target, q: &Query) -> Result<ListQuery, ApiError> {
    let mut only = Query::default();
    for k in ["labelSelector", "fieldSelector"] {
        if let Some(v) = q.get(k) {
            only.0.insert(k.to_owned(), v.to_owned());
        }
    }
    list_query(target, &only)
}

/// A delete's options, from its `DeleteOptions` body and its query (a field the body does not
/// set is read from the query), parsed and checked as kube-apiserver does: a body of the wrong
/// types or a query value that is no number is a 400, bad combinations a 422 of
/// `DeleteOptions`.
pub(super) fn delete_options(q: &Query, body: Option<Value>) -> Result<DeleteOptions, ApiError> {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions as Wire;
    let body: Wire = match body {
        Some(b) => serde_json::from_value(b).map_err(|e| {
            ApiError::bad_request(format!("the DeleteOptions body cannot be decoded: {e}"))
        })?,
        None => Wire::default(),
    };
    // The grace period is checked but not kept: no kind here is deleted gracefully, so every
    // delete is immediate (kube also takes negative periods, as one second).
    if body.grace_period_seconds.is_none() {
        if let Some(text) = q.get("gracePeriodSeconds") {
            parse_int64(text)?;
        }
    }
    // kube's query conversion: only "0" and "false" (any case) are false.
    let orphan = body.orphan_dependents.or_else(|| {
        q.get("orphanDependents").map(|v| !(v == "0" || v.eq_ignore_ascii_case("false")))
    });
    let propagation =
        body.propagation_policy.or_else(|| q.get("propagationPolicy").map(str::to_owned));
    let dry = match body.dry_run {
        Some(list) => list,
        None => q
            .get("dryRun")
            .filter(|d| !d.is_empty())
            .map(|d| vec![d.to_owned()])
            .unwrap_or_default(),
    };
    let errs = delete_option_errors(orphan, propagation.as_deref(), &dry);
    if !errs.is_empty() {
        return Err(ApiError::invalid_options("DeleteOptions", &errs));
    }
    let preconditions = body.preconditions.unwrap_or_default();
    Ok(DeleteOptions {
        uid: preconditions.uid,
        resource_version: preconditions.resource_version,
        propagation: propagation.or_else(|| (orphan == Some(true)).then(|| "Orphan".to_owned())),
        dry_run: !dry.is_empty(),
    })
}

/// Go's `strconv.ParseInt(text, 10, 64)`, with its error as kube's 400 message.
fn parse_int64(text: &str) -> Result<i64, ApiError> {
    text.parse::<i64>().map_err(|e| {
        let why = match e.kind() {
            std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                "value out of range"
            }
            _ => "invalid syntax",
        };
        ApiError::bad_request(format!("strconv.ParseInt: parsing {text:?}: {why}"))
    })
}

/// kube's `ValidateDeleteOptions`.
fn delete_option_errors(
    orphan: Option<bool>,
    propagation: Option<&str>,
    dry_run: &[String],
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let (Some(_), Some(p)) = (orphan, propagation) {
        errs.push(FieldError::invalid(
            "propagationPolicy",
            p,
            "orphanDependents and deletionPropagation cannot be both set",
        ));
    }
    if let Some(p) = propagation.filter(|p| !matches!(*p, "Orphan" | "Background" | "Foreground")) {
        errs.push(FieldError::new(
            ocm_proto::validation::FieldErrorKind::NotSupported,
            "propagationPolicy",
            Some(Value::String(p.to_owned())),
            r#"supported values: "Foreground", "Background", "Orphan", "nil""#,
        ));
    }
    for value in dry_run.iter().filter(|d| *d != "All") {
        errs.push(FieldError::new(
            ocm_proto::validation::FieldErrorKind::NotSupported,
            "dryRun",
            Some(Value::String(value.clone())),
            r#"supported values: "All""#,
        ));
    }
    errs
}

/// The authorization attributes of a request (Kubernetes' RequestInfo): resource requests under
/// `/api/v1/...` and `/apis/<group>/<version>/...`, everything else (discovery documents,
/// OpenAPI, `/version`, `/metrics`) a non-resource request with the lower-case HTTP method.
pub(super) fn attributes(
    method: &Method,
    path: &str,
    segments: &[&str],
    q: &Query,
) -> crate::machinery::requester::Attributes {
    let non_resource = || {
        crate::machinery::requester::Attributes::non_resource(
            &method.as_str().to_ascii_lowercase(),
            path,
        )
    };
    let (group, version, rest) = match segments {
        ["api", version, rest @ ..] if !rest.is_empty() => ("", *version, rest),
        ["apis", group, version, rest @ ..] if !rest.is_empty() => (*group, *version, rest),
        _ => return non_resource(),
    };
    let (namespace, parts) = namespace_scope(rest);
    let (resource, name, subresource) = match parts {
        [r] => (*r, "", ""),
        [r, n] => (*r, *n, ""),
        [r, n, s, ..] => (*r, *n, *s),
        [] => ("", "", ""),
    };
    // The namespace object is in its own namespace (Kubernetes' RequestInfo).
    let namespace = if resource == "namespaces" && namespace.is_empty() { name } else { namespace };
    let mut name = name.to_owned();
    let verb = match (method.as_str(), name.is_empty()) {
        // A named GET is a get, whatever `watch` says (it is served as one).
        ("GET" | "HEAD", false) => "get",
        ("GET" | "HEAD", true) if q.flag("watch").unwrap_or(false) => "watch",
        ("GET" | "HEAD", true) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "deletecollection",
        ("DELETE", false) => "delete",
        _ => return non_resource(),
    };
    // A list or watch narrowed to one name by `fieldSelector=metadata.name=<n>` is authorized
    // as that name (so resourceNames rules allow `kubectl get x -w`).
    if matches!(verb, "list" | "watch") {
        let selector = q.get("fieldSelector").and_then(|f| FieldSelector::parse(f).ok());
        let pinned = selector.as_ref().and_then(|s| s.pinned("metadata.name"));
        if let Some(n) = pinned.filter(|n| object::check_path_segment(n).is_ok()) {
            name = n.to_owned();
        }
    }
    let mut attrs =
        crate::machinery::requester::Attributes::resource(verb, group, resource, namespace, &name);
    attrs.api_version = version.to_owned();
    attrs.subresource = subresource.to_owned();
    attrs
}
