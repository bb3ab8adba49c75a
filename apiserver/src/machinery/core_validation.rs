//! kube-apiserver's validation of the core kinds whose fields carry rules beyond their types:
//! ConfigMap and Secret keys and sizes (`pkg/apis/core/validation`), Lease specs
//! (`pkg/apis/coordination/validation`) and CertificateSigningRequest specs
//! (`pkg/apis/certificates/validation`), with kube's paths and messages. Each check runs on an
//! object that already decodes as its k8s-openapi type.

use base64::Engine as _;
use ocm_proto::validation::{FieldError, FieldErrorKind};
use serde_json::{Map, Value};

use crate::machinery::object::check_dns_label;

/// The most bytes a ConfigMap's or Secret's data may hold together (kube's `MaxSecretSize`).
pub const MAX_DATA_BYTES: usize = 1024 * 1024;

/// ConfigMaps: valid keys, none in both `data` and `binaryData`, at most 1 MiB of values.
pub fn config_map(obj: &Value) -> Vec<FieldError> {
    let data = map_at(obj, "data");
    let binary = map_at(obj, "binaryData");
    let mut errs = Vec::new();
    let mut total = 0;
    for (key, value) in data.into_iter().flatten() {
        key_errors("data", key, &mut errs);
        if binary.is_some_and(|b| b.contains_key(key)) {
            errs.push(invalid_key("data", key, "duplicate of key present in binaryData"));
        }
        total += value.as_str().map_or(0, str::len);
    }
    for (key, value) in binary.into_iter().flatten() {
        key_errors("binaryData", key, &mut errs);
        if data.is_some_and(|d| d.contains_key(key)) {
            errs.push(invalid_key("binaryData", key, "duplicate of key present in data"));
        }
        total += decoded_len(value);
    }
    if total > MAX_DATA_BYTES {
        // kube names the whole object with an empty path, printed `[]`.
        errs.push(too_long("[]"));
    }
    errs
}

/// Secrets: valid keys, at most 1 MiB of (decoded) values.
pub fn secret(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut total = 0;
    for (key, value) in map_at(obj, "data").into_iter().flatten() {
        key_errors("data", key, &mut errs);
        total += decoded_len(value);
    }
    if total > MAX_DATA_BYTES {
        errs.push(too_long("data"));
    }
    errs
}

/// Leases: a positive duration, no negative transition count, a preferred holder only with a
/// strategy, a strategy kube knows (or a prefixed one).
pub fn lease(obj: &Value) -> Vec<FieldError> {
    let spec = obj.get("spec");
    let int = |f: &str| spec.and_then(|s| s.get(f)).and_then(Value::as_i64);
    let text = |f: &str| spec.and_then(|s| s.get(f)).and_then(Value::as_str).unwrap_or("");
    let mut errs = Vec::new();
    if let Some(d) = int("leaseDurationSeconds").filter(|d| *d <= 0) {
        errs.push(FieldError::invalid("spec.leaseDurationSeconds", d, "must be greater than 0"));
    }
    if let Some(t) = int("leaseTransitions").filter(|t| *t < 0) {
        errs.push(FieldError::invalid(
            "spec.leaseTransitions",
            t,
            "must be greater than or equal to 0",
        ));
    }
    let strategy = text("strategy");
    match strategy.split('/').count() {
        _ if strategy.is_empty() => {}
        1 if strategy != "OldestEmulationVersion" => errs.push(FieldError::new(
            FieldErrorKind::NotSupported,
            "spec.strategy",
            Some(Value::String(strategy.to_owned())),
            r#"supported values: "OldestEmulationVersion""#,
        )),
        1 | 2 => {}
        _ => errs.push(FieldError::invalid(
            "spec.strategy",
            strategy,
            "must be a valid strategy name",
        )),
    }
    if !text("preferredHolder").is_empty() && strategy.is_empty() {
        errs.push(FieldError::forbidden(
            "spec.preferredHolder",
            "may only be specified if `strategy` is defined",
        ));
    }
    errs
}

/// kube's `IsConfigMapKey`: at most 253 of `[-._a-zA-Z0-9]`, not `.` or `..` nor starting
/// with `..`; each failure an `Invalid` of `<field>[<key>]`.
fn key_errors(field: &str, key: &str, errs: &mut Vec<FieldError>) {
    if key.len() > 253 {
        errs.push(invalid_key(field, key, "must be no more than 253 characters"));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if key.is_empty() || !key.chars().all(allowed) {
        errs.push(invalid_key(
            field,
            key,
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.' \
             (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is \
             '[-._a-zA-Z0-9]+')",
        ));
    }
    match key {
        "." => errs.push(invalid_key(field, key, "must not be '.'")),
        ".." => errs.push(invalid_key(field, key, "must not be '..'")),
        _ if key.starts_with("..") => {
            errs.push(invalid_key(field, key, "must not start with '..'"))
        }
        _ => {}
    }
}

fn invalid_key(field: &str, key: &str, detail: &str) -> FieldError {
    FieldError::invalid(format!("{field}[{key}]"), key, detail)
}

fn too_long(field: &str) -> FieldError {
    let detail = format!("may not be more than {MAX_DATA_BYTES} bytes");
    FieldError::new(FieldErrorKind::TooLong, field, None, detail)
}

fn map_at<'a>(obj: &'a Value, field: &str) -> Option<&'a Map<String, Value>> {
    obj.get(field).and_then(Value::as_object)
}

/// The byte length of a base64 value (its text length if it does not decode; decoding was
/// checked with the type).
fn decoded_len(value: &Value) -> usize {
    let text = value.as_str().unwrap_or("");
    base64::engine::general_purpose::STANDARD.decode(text).map_or(text.len(), |b| b.len())
}

/// The usages kube allows in a CSR (`certificates.KeyUsage`), sorted as its message lists them.
const CSR_USAGES: &[&str] = &[
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];

/// CertificateSigningRequests: a PEM `CERTIFICATE REQUEST` that parses, usages present, known
/// and not repeated, a signer name of the form `example.com/signer-name`, and an expiration of
/// at least ten minutes when one is asked for.
pub fn csr(obj: &Value) -> Vec<FieldError> {
    let spec = obj.get("spec");
    let mut errs = Vec::new();
    let request = spec.and_then(|s| s.get("request")).and_then(Value::as_str);
    errs.extend(csr_request_error(request));
    usage_errors(spec.and_then(|s| s.get("usages")), &mut errs);
    let signer = spec.and_then(|s| s.get("signerName")).and_then(Value::as_str).unwrap_or("");
    signer_name_errors(signer, &mut errs);
    let expiration = spec.and_then(|s| s.get("expirationSeconds")).and_then(Value::as_i64);
    if let Some(e) = expiration.filter(|e| *e < 600) {
        errs.push(FieldError::invalid(
            "spec.expirationSeconds",
            e,
            "may not specify a duration less than 600 seconds (10 minutes)",
        ));
    }
    errs
}

/// kube's `ParseCSR`: the first PEM block must be a `CERTIFICATE REQUEST` holding a PKCS#10
/// request. The value is shown as Go prints the bytes (`[]byte{0x6e, 0x6f}`), which is no JSON
/// value, so it is written into the detail after kube's phrase.
fn csr_request_error(request: Option<&str>) -> Option<FieldError> {
    use x509_parser::prelude::FromDer;
    let bytes = request
        .map(|b64| base64::engine::general_purpose::STANDARD.decode(b64).unwrap_or_default());
    let fail = |why: &str| {
        let shown = go_bytes(bytes.as_deref());
        FieldError::new(FieldErrorKind::Invalid, "spec.request", None, format!("{shown}: {why}"))
    };
    let pem = bytes
        .as_deref()
        .and_then(|b| x509_parser::pem::parse_x509_pem(b).ok())
        .map(|(_, pem)| pem)
        .filter(|pem| pem.label == "CERTIFICATE REQUEST");
    let Some(pem) = pem else { return Some(fail("PEM block type must be CERTIFICATE REQUEST")) };
    x509_parser::certification_request::X509CertificationRequest::from_der(&pem.contents)
        .err()
        .map(|_| fail("the PEM block is not a PKCS#10 certificate request"))
}

/// Go's `%#v` of a byte slice: `[]byte(nil)` when absent, else `[]byte{0x2d, 0x2d}`.
fn go_bytes(bytes: Option<&[u8]>) -> String {
    match bytes {
        None => "[]byte(nil)".to_owned(),
        Some(b) => {
            let items: Vec<String> = b.iter().map(|x| format!("{x:#x}")).collect();
            format!("[]byte{{{}}}", items.join(", "))
        }
    }
}

fn usage_errors(usages: Option<&Value>, errs: &mut Vec<FieldError>) {
    let list: Vec<&str> =
        usages.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    if list.is_empty() {
        errs.push(FieldError::required("spec.usages", ""));
    }
    let supported = CSR_USAGES.iter().map(|u| format!("{u:?}")).collect::<Vec<_>>().join(", ");
    for (i, usage) in list.iter().enumerate() {
        let field = format!("spec.usages[{i}]");
        if !CSR_USAGES.contains(usage) {
            errs.push(FieldError::new(
                FieldErrorKind::NotSupported,
                field.clone(),
                Some(Value::String((*usage).to_owned())),
                format!("supported values: {supported}"),
            ));
        }
        if list[..i].contains(usage) {
            let value = Some(Value::String((*usage).to_owned()));
            errs.push(FieldError::new(FieldErrorKind::Duplicate, field, value, ""));
        }
    }
}

/// kube's `ValidateSignerName`: `<domain>/<path>`, the domain at least two DNS labels, the
/// path DNS labels separated by dots.
fn signer_name_errors(signer: &str, errs: &mut Vec<FieldError>) {
    const FIELD: &str = "spec.signerName";
    if signer.is_empty() {
        errs.push(FieldError::required(FIELD, ""));
        return;
    }
    let Some((domain, path)) = signer.split_once('/').filter(|(_, p)| !p.contains('/')) else {
        errs.push(FieldError::invalid(
            FIELD,
            signer,
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        ));
        return;
    };
    let labels_error = |part: &str| {
        part.split('.').find_map(|l| {
            check_dns_label(l)
                .err()
                .map(|e| FieldError::invalid(FIELD, part, format!("validating label {l:?}: {e}")))
        })
    };
    errs.extend(labels_error(domain));
    if !domain.contains('.') {
        errs.push(FieldError::invalid(
            FIELD,
            domain,
            "should be a domain with at least two segments separated by dots",
        ));
    }
    errs.extend(labels_error(path));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn config_map_keys_and_size() {
        let errs = config_map(&json!({"data": {"bad key!": "v", "..x": "v", "ok": "v"},
                                      "binaryData": {"ok": ""}}));
        assert_eq!(
            messages(&errs),
            [
                "data[bad key!]: Invalid value: \"bad key!\": a valid config key must consist of \
                 alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or \
                 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                "data[..x]: Invalid value: \"..x\": must not start with '..'",
                "data[ok]: Invalid value: \"ok\": duplicate of key present in binaryData",
                "binaryData[ok]: Invalid value: \"ok\": duplicate of key present in data",
            ]
        );
        let big = "x".repeat(MAX_DATA_BYTES / 2 + 1);
        let errs = config_map(&json!({"data": {"a": big, "b": big}}));
        assert_eq!(messages(&errs), ["[]: Too long: may not be more than 1048576 bytes"]);
        assert!(config_map(&json!({"data": {"a": "x".repeat(MAX_DATA_BYTES)}})).is_empty());
    }

    #[test]
    fn secret_sizes_count_decoded_bytes() {
        let b64 = base64::engine::general_purpose::STANDARD.encode(vec![0u8; MAX_DATA_BYTES]);
        assert!(secret(&json!({"data": {"a": b64}})).is_empty());
        let errs = secret(&json!({"data": {"a": b64, "b": "AA=="}}));
        assert_eq!(messages(&errs), ["data: Too long: may not be more than 1048576 bytes"]);
    }

    #[test]
    fn lease_specs() {
        let errs = lease(&json!({"spec": {"leaseDurationSeconds": -1, "leaseTransitions": -2,
                                          "preferredHolder": "a"}}));
        assert_eq!(
            messages(&errs),
            [
                "spec.leaseDurationSeconds: Invalid value: -1: must be greater than 0",
                "spec.leaseTransitions: Invalid value: -2: must be greater than or equal to 0",
                "spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined",
            ]
        );
        assert!(
            lease(&json!({"spec": {"leaseDurationSeconds": 60, "holderIdentity": "x"}})).is_empty()
        );
    }

    #[test]
    fn csr_specs() {
        let errs = csr(&json!({"spec": {"request": "bm8=", "usages": ["client auth", "nope",
                       "client auth"], "signerName": "signer", "expirationSeconds": 60}}));
        let all = messages(&errs);
        assert_eq!(
            all[0],
            "spec.request: Invalid value: []byte{0x6e, 0x6f}: PEM block type must be CERTIFICATE \
             REQUEST"
        );
        assert!(all[1].starts_with(
            "spec.usages[1]: Unsupported value: \"nope\": supported values: \"any\", \"cert sign\""
        ));
        assert_eq!(all[2], "spec.usages[2]: Duplicate value: \"client auth\"");
        assert!(all[3].starts_with("spec.signerName: Invalid value: \"signer\": must be a fully"));
        assert_eq!(
            all[4],
            "spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 600 \
             seconds (10 minutes)"
        );
        let errs = csr(&json!({"spec": {"usages": []}}));
        assert_eq!(
            messages(&errs),
            [
                "spec.request: Invalid value: []byte(nil): PEM block type must be CERTIFICATE \
                 REQUEST",
                "spec.usages: Required value",
                "spec.signerName: Required value",
            ]
        );
    }
}
