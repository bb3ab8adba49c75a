//! Request and response bodies: content negotiation (`Accept`, Table and metadata forms,
//! YAML), reading JSON, YAML and protobuf bodies under the size limit, conversion between the
//! wire and storage versions, and object and list answers.

use super::*;

/// The media types of an `Accept` header, in order, without quality sorting (clients list their
/// preference first).
pub(super) fn accepts(headers: &HeaderMap) -> Vec<(String, HashMap<String, String>)> {
    let Some(raw) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return vec![("application/json".into(), HashMap::new())];
    };
    raw.split(',')
        .map(|part| {
            let mut pieces = part.split(';');
            let media = pieces.next().unwrap_or("").trim().to_ascii_lowercase();
            let params = pieces
                .filter_map(|p| {
                    let (k, v) = p.split_once('=')?;
                    Some((k.trim().to_owned(), v.trim().to_owned()))
                })
                .collect();
            (media, params)
        })
        .filter(|(m, _)| !m.is_empty())
        .collect()
}

/// Reads the body under the limit and decodes JSON (or YAML).
pub(super) async fn read_body(req: Request) -> Result<Value, ApiError> {
    let (content_type, bytes) = read_limited(req).await?;
    decode(&content_type, &bytes)
}

/// Reads the body under the limit and decodes it, noting the paths of the fields a JSON body
/// repeats (for `fieldValidation`; other encodings note none).
pub(super) async fn read_body_noting_duplicates(
    req: Request,
) -> Result<(Value, Vec<String>), ApiError> {
    let (content_type, bytes) = read_limited(req).await?;
    match content_type.as_str() {
        "" | "application/json" => super::duplicates::parse(&bytes)
            .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}"))),
        _ => Ok((decode(&content_type, &bytes)?, Vec::new())),
    }
}

/// [`read_body`] for requests whose body may be absent (empty or only whitespace).
pub(super) async fn read_optional_body(req: Request) -> Result<Option<Value>, ApiError> {
    let (content_type, bytes) = read_limited(req).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    decode(&content_type, &bytes).map(Some)
}

/// The request's media type and body, read up to [`MAX_BODY_BYTES`]: over it a 413 (the rest
/// is left to the connection, `serve::unread`), a body that breaks off a 400.
async fn read_limited(req: Request) -> Result<(String, Bytes), ApiError> {
    let content_type = media_type(req.headers());
    let limited = http_body_util::Limited::new(req.into_body(), MAX_BODY_BYTES);
    match limited.collect().await {
        Ok(b) => Ok((content_type, b.to_bytes())),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            Err(ApiError::too_large(format!("the request body is over {MAX_BODY_BYTES} bytes")))
        }
        Err(e) => Err(ApiError::bad_request(format!("reading the body: {e}"))),
    }
}

pub(super) fn media_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
        .unwrap_or_default()
}

pub(super) fn decode(content_type: &str, bytes: &Bytes) -> Result<Value, ApiError> {
    match content_type {
        ""
        | "application/json"
        | "application/json-patch+json"
        | "application/merge-patch+json"
        | "application/strategic-merge-patch+json" => serde_json::from_slice(bytes)
            .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}"))),
        // An apply configuration is YAML, of which JSON (what kubectl and kube-rs send) is the
        // common case.
        "application/apply-patch+yaml" => match serde_json::from_slice(bytes) {
            Ok(v) => Ok(v),
            Err(_) => decode("application/yaml", bytes),
        },
        "application/yaml" | "application/x-yaml" | "text/yaml" => {
            let text = std::str::from_utf8(bytes)
                .map_err(|_| ApiError::bad_request("the YAML body is not UTF-8"))?;
            serde_saphyr::from_str(text)
                .map_err(|e| ApiError::bad_request(format!("the body is not valid YAML: {e}")))
        }
        crate::machinery::protobuf::MEDIA_TYPE => Ok(crate::machinery::protobuf::decode(bytes)?),
        other => Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: \
             application/json, application/yaml, application/vnd.kubernetes.protobuf (got \
             {other:?})"
        ))),
    }
}

/// Checks the body's apiVersion and kind against the endpoint.
pub(super) fn check_type(target: &Target, body: &Value) -> Result<(), ApiError> {
    check_type_is(body, &target.rt.api_version(&target.version), &target.rt.kind)
}

/// Checks a body's apiVersion and kind, when it names them, against `expected` and `kind`.
pub(super) fn check_type_is(
    body: &Value,
    expected: &str,
    expected_kind: &str,
) -> Result<(), ApiError> {
    let api_version = body.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = body.get("kind").and_then(Value::as_str).unwrap_or("");
    if !api_version.is_empty() && api_version != expected {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({expected})"
        )));
    }
    if !kind.is_empty() && kind != expected_kind {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind ({expected_kind})"
        )));
    }
    Ok(())
}

/// Converts a body of the request's version to the storage version.
pub(super) fn to_storage(target: &Target, body: Value) -> Result<Value, ApiError> {
    target.rt.to_storage(&target.version, body)
}

/// Converts a stored object to the request's version.
pub(super) fn to_wire(target: &Target, obj: Value) -> Result<Value, ApiError> {
    target.rt.to_version(&target.version, obj)
}

/// Serialized form of a cached object at the request's version.
/// Whether a target's objects go out exactly as stored (no conversion).
pub(super) fn is_storage_form(target: &Target) -> bool {
    target.rt.stored_as.is_none() && target.version == target.rt.storage_version
}

pub(super) fn wire_bytes(target: &Target, obj: &CachedObject) -> Result<Bytes, ApiError> {
    if is_storage_form(target) {
        return Ok(obj.json());
    }
    let v = to_wire(target, Arc::unwrap_or_clone(obj.value()))?;
    Ok(Bytes::from(serde_json::to_vec(&v).map_err(ApiError::internal)?))
}

pub(super) fn object_response(
    code: StatusCode,
    target: &Target,
    obj: Value,
    warnings: &[String],
    out: Output,
) -> Result<Response, ApiError> {
    let obj = match out {
        Output::Json => to_wire(target, obj)?,
        Output::Table(req) => {
            let obj = to_wire(target, obj)?;
            let meta = table::object_metadata(&obj);
            let columns = target.rt.strategy.columns(&target.version);
            table::build(&columns, vec![obj], meta, req, true)
        }
        // Metadata is the same at every version: no conversion of the whole object.
        Output::Metadata(version) => table::partial_metadata(&obj, version),
    };
    let mut resp = json_response(code, serde_json::to_vec(&obj).map_err(ApiError::internal)?);
    for w in warnings {
        let value = format!("299 - {:?}", w);
        if let Ok(v) = HeaderValue::from_str(&value) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    Ok(resp)
}

/// What a resource response carries: the objects as JSON, a `meta.k8s.io` Table of them, or
/// only their metadata (`PartialObjectMetadata[List]` at that `meta.k8s.io` version).
#[derive(Debug, Clone, Copy)]
pub(super) enum Output {
    Json,
    Table(TableRequest),
    Metadata(&'static str),
}

/// Whether the `Accept` entry [`negotiate`] answers is `application/yaml`: the first entry that
/// is YAML without an `as=` transform, or a JSON one it serves (plain, or a meta.k8s.io
/// transform). The response is then re-encoded by [`super::encoding`].
pub(crate) fn yaml_negotiated(headers: &HeaderMap) -> bool {
    for (media, params) in accepts(headers) {
        let transform = params.get("as").map(String::as_str);
        match media.as_str() {
            "application/yaml" if transform.is_none() => return true,
            "application/json" | "*/*" | "application/*" => {
                // The same test of the meta group and version as `negotiate`.
                let meta = params.get("g").map(String::as_str) == Some("meta.k8s.io")
                    && matches!(params.get("v").map(String::as_str), Some("v1" | "v1beta1"));
                let known = matches!(
                    transform,
                    None | Some("Table" | "PartialObjectMetadata" | "PartialObjectMetadataList")
                );
                if transform.is_none() || (meta && known) {
                    return false;
                }
            }
            _ => {}
        }
    }
    false
}

/// Picks the first `Accept` entry the resource can answer (kube-api.md §4.1, §8): plain JSON, a
/// Table (`as=Table;g=meta.k8s.io;v=v1|v1beta1`, main resources only), or metadata only
/// (`as=PartialObjectMetadataList` for a list, `as=PartialObjectMetadata` otherwise); none is 406.
pub(super) fn negotiate(
    target: &Target,
    headers: &HeaderMap,
    q: &Query,
    is_list: bool,
) -> Result<Output, ApiError> {
    let list = accepts(headers);
    if list.is_empty() {
        return Ok(Output::Json);
    }
    for (media, params) in list {
        let param = |k: &str| params.get(k).map(String::as_str);
        // YAML is the same object re-encoded on the way out (see `encoding`).
        if media == "application/yaml" && param("as").is_none() {
            return Ok(Output::Json);
        }
        if !matches!(media.as_str(), "application/json" | "*/*" | "application/*") {
            continue;
        }
        let meta_version = match (param("g"), param("v")) {
            (Some("meta.k8s.io"), Some("v1")) => Some("v1"),
            (Some("meta.k8s.io"), Some("v1beta1")) => Some("v1beta1"),
            _ => None,
        };
        match param("as") {
            None | Some("") => return Ok(Output::Json),
            Some("Table") if matches!(target.sub.as_deref(), None | Some("status")) => {
                if let Some(version) = meta_version {
                    let include = Include::parse(q.get("includeObject"))?;
                    return Ok(Output::Table(TableRequest { version, include }));
                }
            }
            Some("PartialObjectMetadataList") if is_list => {
                if let Some(v) = meta_version {
                    return Ok(Output::Metadata(v));
                }
            }
            Some("PartialObjectMetadata") if !is_list => {
                if let Some(v) = meta_version {
                    return Ok(Output::Metadata(v));
                }
            }
            _ => {}
        }
    }
    let raw = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
    Err(ApiError::not_acceptable(raw))
}

/// The Table of a list whose rows carry no object: each row's stable cells kept with its
/// cached object (made once per revision of it, so a list served again parses no object), its
/// ages computed now, and the rows written one after another.
fn table_of_kept_rows(
    target: &Target,
    items: &[Arc<CachedObject>],
    columns: &[table::Column],
    meta: Value,
    req: TableRequest,
) -> Result<Vec<u8>, ApiError> {
    let now = crate::machinery::clock::now();
    let mut out = table::table_head(columns, meta, req);
    out.reserve(items.len() * 128);
    for (i, o) in items.iter().enumerate() {
        let kept = o.rendered("table-cells", &target.version, || {
            let obj = if is_storage_form(target) {
                o.value()
            } else {
                Arc::new(to_wire(target, Arc::unwrap_or_clone(o.value()))?)
            };
            let cells = table::stable_cells(columns, &obj);
            serde_json::to_vec(&cells).map(Bytes::from).map_err(ApiError::internal)
        })?;
        let stable: Vec<Value> = serde_json::from_slice(&kept).map_err(ApiError::internal)?;
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"cells\":");
        serde_json::to_writer(&mut out, &table::cells_at(columns, stable, now))
            .map_err(ApiError::internal)?;
        out.extend_from_slice(b",\"object\":null}");
    }
    out.extend_from_slice(table::TABLE_END);
    Ok(out)
}

pub(super) fn list_response(
    target: &Target,
    page: crate::store::registry::ListPage,
    out: Output,
) -> Result<Response, ApiError> {
    let items = page.items;
    let mut meta = json!({"resourceVersion": page.rev.to_string()});
    if let Some(c) = page.continue_token {
        meta["continue"] = Value::String(c);
    }
    if let Some(n) = page.remaining {
        meta["remainingItemCount"] = json!(n);
    }
    match out {
        Output::Json => {}
        Output::Table(req) => {
            let columns = target.rt.strategy.columns(&target.version);
            // Rows without objects are kept with their cached objects where the columns allow.
            if req.include == Include::None && table::rows_keep(&columns) {
                let body = table_of_kept_rows(target, &items, &columns, meta, req)?;
                return Ok(json_response(StatusCode::OK, body));
            }
            let objects = items
                .iter()
                .map(|o| to_wire(target, Arc::unwrap_or_clone(o.value())))
                .collect::<Result<Vec<_>, _>>()?;
            return value_response(&table::build(&columns, objects, meta, req, true));
        }
        Output::Metadata(version) => {
            let items =
                items.iter().map(|o| table::partial_metadata(&o.value(), version)).collect();
            return value_response(&object::json_object([
                ("kind", Value::from("PartialObjectMetadataList")),
                ("apiVersion", Value::from(format!("meta.k8s.io/{version}"))),
                ("metadata", meta),
                ("items", Value::Array(items)),
            ]));
        }
    }
    let head = json!({
        "kind": target.rt.list_kind,
        "apiVersion": target.rt.api_version(&target.version),
        "metadata": meta,
    });
    let mut out = serde_json::to_vec(&head).map_err(ApiError::internal)?;
    out.pop(); // the closing brace
    out.extend_from_slice(b",\"items\":[");
    for (i, obj) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&wire_bytes(target, obj)?);
    }
    out.extend_from_slice(b"]}");
    Ok(json_response(StatusCode::OK, out))
}
