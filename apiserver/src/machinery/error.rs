//! The API error: every failure the REST layer answers, with the `reason`, HTTP code, message and
//! details of Kubernetes' `Status` (kube-api.md §5.8), built by one constructor per reason so that
//! messages read exactly as kube-apiserver's.

use ocm_proto::validation::FieldError;
use serde_json::{Value, json};

/// Who the error is about: the resource (plural), group and name that `details` carry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subject {
    /// The API group (`""` for core).
    pub group: String,
    /// The plural resource (`managedclusters`) or, for `Invalid`, the kind.
    pub kind: String,
    /// The object name, if any.
    pub name: String,
}

impl Subject {
    /// `resource.group` as Kubernetes prefixes messages (`managedclusters.cluster...`; core
    /// resources have no suffix).
    fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }
}

/// One `details.causes[]` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    /// `FieldValueInvalid`, `FieldManagerConflict`, `ResourceVersionTooLarge`, ...
    pub reason: String,
    /// Human text.
    pub message: String,
    /// The field at fault (Kubernetes path), if any.
    pub field: String,
}

/// A failure to answer as a Kubernetes `Status`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{reason} ({code}): {message}")]
pub struct ApiError {
    /// The HTTP status code (and `Status.code`).
    pub code: u16,
    /// The `Status.reason`.
    pub reason: &'static str,
    /// The `Status.message`.
    pub message: String,
    /// `details` (boxed: most errors have none, and errors travel in every `Result`).
    pub details: Box<Details>,
}

/// The `details` of a `Status`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Details {
    /// Who it is about (omitted from details when empty).
    pub subject: Option<Subject>,
    /// `details.causes`.
    pub causes: Vec<Cause>,
    /// `details.retryAfterSeconds` (and a `Retry-After` header).
    pub retry_after: Option<u32>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { code, reason, message: message.into(), details: Box::default() }
    }

    fn about(mut self, subject: Subject) -> ApiError {
        self.details.subject = Some(subject);
        self
    }

    /// 400 `BadRequest`.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }

    /// 401 `Unauthorized`.
    pub fn unauthorized() -> ApiError {
        ApiError::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 `Forbidden` about an object, with Kubernetes' `... is forbidden: why` message.
    pub fn forbidden(subject: Subject, why: impl Into<String>) -> ApiError {
        let message =
            format!("{} {:?} is forbidden: {}", subject.qualified(), subject.name, why.into());
        ApiError::new(403, "Forbidden", message).about(subject)
    }

    /// 403 `Forbidden` with a message already in kube-apiserver's words (authorization).
    pub fn forbidden_with(subject: Subject, message: String) -> ApiError {
        ApiError::new(403, "Forbidden", message).about(subject)
    }

    /// 404 `NotFound` for an object.
    pub fn not_found(subject: Subject) -> ApiError {
        let message = format!("{} {:?} not found", subject.qualified(), subject.name);
        ApiError::new(404, "NotFound", message).about(subject)
    }

    /// 404 `NotFound` for a path nothing serves.
    pub fn path_not_found() -> ApiError {
        ApiError::new(404, "NotFound", "the server could not find the requested resource")
    }

    /// 405 `MethodNotAllowed`.
    pub fn method_not_allowed(verb: &str, resource: &str) -> ApiError {
        let message = format!("{verb} is not supported on resources of kind {resource:?}");
        ApiError::new(405, "MethodNotAllowed", message)
    }

    /// 406 `NotAcceptable`.
    pub fn not_acceptable(accept: &str) -> ApiError {
        let message = format!(
            "only the following media types are accepted: application/json, \
             application/json;stream=watch; got {accept:?}"
        );
        ApiError::new(406, "NotAcceptable", message)
    }

    /// 409 `AlreadyExists`.
    pub fn already_exists(subject: Subject) -> ApiError {
        let message = format!("{} {:?} already exists", subject.qualified(), subject.name);
        ApiError::new(409, "AlreadyExists", message).about(subject)
    }

    /// 409 `Conflict` with Kubernetes' "operation cannot be fulfilled" message.
    pub fn conflict(subject: Subject, why: impl Into<String>) -> ApiError {
        let message = format!(
            "Operation cannot be fulfilled on {} {:?}: {}",
            subject.qualified(),
            subject.name,
            why.into()
        );
        ApiError::new(409, "Conflict", message).about(subject)
    }

    /// 422 `Invalid` for a patch that does not apply (a failed `test`, a path into nothing):
    /// kube-apiserver's generic server response, the patch library's message as the one cause
    /// (kubectl prints `The request is invalid: <cause>`).
    pub fn patch_failed(why: String) -> ApiError {
        let mut err = ApiError::new(
            422,
            "Invalid",
            "the server rejected our request due to an error in our request",
        );
        err.details.causes.push(Cause {
            reason: "UnexpectedServerResponse".into(),
            message: why,
            field: String::new(),
        });
        err
    }

    /// 409 `Conflict` of a server-side apply: one `FieldManagerConflict` cause per field,
    /// `(message, field)`.
    pub fn apply_conflict(message: String, causes: Vec<(String, String)>) -> ApiError {
        let mut err = ApiError::new(409, "Conflict", message);
        err.details.causes = causes
            .into_iter()
            .map(|(message, field)| Cause { reason: "FieldManagerConflict".into(), message, field })
            .collect();
        err
    }

    /// 409 `Conflict` for a stale `resourceVersion`.
    pub fn stale(subject: Subject) -> ApiError {
        ApiError::conflict(
            subject,
            "the object has been modified; please apply your changes to the latest version and \
             try again",
        )
    }

    /// 410 `Expired` for a watch or list from a compacted resourceVersion.
    pub fn expired(message: impl Into<String>) -> ApiError {
        ApiError::new(410, "Expired", message)
    }

    /// 413 `RequestEntityTooLarge`.
    pub fn too_large(message: impl Into<String>) -> ApiError {
        ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: {}", message.into()),
        )
    }

    /// 415 `UnsupportedMediaType`.
    pub fn unsupported_media_type(message: impl Into<String>) -> ApiError {
        ApiError::new(415, "UnsupportedMediaType", message)
    }

    /// 422 `Invalid` for an object: one cause per field error, message as kubectl prints it.
    /// `kind` is the Kind (`ManagedCluster`), not the plural, as Kubernetes does for `Invalid`.
    pub fn invalid(group: &str, kind: &str, name: &str, errors: &[FieldError]) -> ApiError {
        let qualified = if group.is_empty() { kind.to_owned() } else { format!("{kind}.{group}") };
        let list = errors.iter().map(ToString::to_string).collect::<Vec<_>>();
        let joined =
            if list.len() == 1 { list[0].clone() } else { format!("[{}]", list.join(", ")) };
        let message = format!("{qualified} {name:?} is invalid: {joined}");
        let mut err = ApiError::new(422, "Invalid", message).about(Subject {
            group: group.to_owned(),
            kind: kind.to_owned(),
            name: name.to_owned(),
        });
        err.details.causes = errors
            .iter()
            .map(|e| Cause {
                reason: e.kind.reason().to_owned(),
                message: e.cause_message(),
                field: e.field.clone(),
            })
            .collect();
        err
    }

    /// 422 `Invalid` for request options (`ListOptions`, `DeleteOptions`, `PatchOptions`).
    pub fn invalid_options(options_kind: &str, errors: &[FieldError]) -> ApiError {
        ApiError::invalid("meta.k8s.io", options_kind, "", errors)
    }

    /// 429 `TooManyRequests`.
    pub fn too_many_requests(message: impl Into<String>, retry_after: u32) -> ApiError {
        let mut err =
            ApiError::new(429, "TooManyRequests", format!("Too many requests: {}", message.into()));
        err.details.retry_after = Some(retry_after);
        err
    }

    /// 500 `InternalError`.
    pub fn internal(message: impl std::fmt::Display) -> ApiError {
        ApiError::new(500, "InternalError", format!("Internal error occurred: {message}"))
    }

    /// 503 `ServiceUnavailable`.
    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(503, "ServiceUnavailable", message)
    }

    /// 504 `Timeout` for a resourceVersion the server has not reached.
    pub fn too_large_resource_version(requested: u64, current: u64) -> ApiError {
        let mut err = ApiError::new(
            504,
            "Timeout",
            format!("Timeout: Too large resource version: {requested}, current: {current}"),
        );
        err.details.causes.push(Cause {
            reason: "ResourceVersionTooLarge".to_owned(),
            message: "Too large resource version".to_owned(),
            field: String::new(),
        });
        err.details.retry_after = Some(1);
        err
    }

    /// The `Status` object (kind `Status`, apiVersion `v1`).
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        let mut details = serde_json::Map::new();
        if let Some(s) = &self.details.subject {
            if !s.name.is_empty() {
                details.insert("name".into(), json!(s.name));
            }
            if !s.group.is_empty() {
                details.insert("group".into(), json!(s.group));
            }
            if !s.kind.is_empty() {
                details.insert("kind".into(), json!(s.kind));
            }
        }
        if !self.details.causes.is_empty() {
            let causes = self
                .details
                .causes
                .iter()
                .map(|c| {
                    let mut cause = json!({"reason": c.reason, "message": c.message});
                    if !c.field.is_empty() {
                        cause["field"] = json!(c.field);
                    }
                    cause
                })
                .collect::<Vec<_>>();
            details.insert("causes".into(), Value::Array(causes));
        }
        if let Some(secs) = self.details.retry_after {
            details.insert("retryAfterSeconds".into(), json!(secs));
        }
        if !details.is_empty() {
            status["details"] = Value::Object(details);
        }
        status
    }
}

/// Storage failures seen by the registry, for the object `subject`.
pub fn from_storage(err: ocm_storage::Error, subject: Subject) -> ApiError {
    use ocm_storage::Error as E;
    match err {
        E::NotFound { .. } => ApiError::not_found(subject),
        E::AlreadyExists { .. } => ApiError::already_exists(subject),
        E::Conflict { .. } => ApiError::stale(subject),
        E::TooLarge { size, limit, .. } => ApiError::too_large(format!(
            "the stored object would be {size} bytes; the limit is {limit}"
        )),
        E::CommitTooLarge { .. } => ApiError::too_large(err.to_string()),
        E::Compacted { requested, oldest } => ApiError::expired(format!(
            "too old resource version: {} ({})",
            requested.get(),
            oldest.get()
        )),
        E::FutureRevision { requested, current } => {
            ApiError::too_large_resource_version(requested.get(), current.get())
        }
        E::Unavailable { .. } | E::Fenced { .. } => ApiError::unavailable(err.to_string()),
        other => ApiError::internal(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_reads_like_kubernetes() {
        let s = Subject {
            group: "cluster.open-cluster-management.io".into(),
            kind: "managedclusters".into(),
            name: "c1".into(),
        };
        let st = ApiError::not_found(s).to_status();
        assert_eq!(
            st["message"],
            r#"managedclusters.cluster.open-cluster-management.io "c1" not found"#
        );
        assert_eq!(st["code"], 404);
        assert_eq!(st["details"]["kind"], "managedclusters");
    }

    #[test]
    fn invalid_lists_every_cause() {
        let errs = [
            FieldError::invalid("metadata.name", "A", "must be lowercase"),
            FieldError::required("spec", ""),
        ];
        let st = ApiError::invalid("example.com", "Widget", "A", &errs).to_status();
        assert_eq!(st["code"], 422);
        assert_eq!(st["details"]["causes"].as_array().unwrap().len(), 2);
        assert!(
            st["message"].as_str().unwrap().starts_with(r#"Widget.example.com "A" is invalid: ["#)
        );
    }
}
