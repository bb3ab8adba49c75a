//! The review kinds: `SelfSubjectAccessReview`, `SubjectAccessReview`, `SelfSubjectRulesReview`
//! (authorization.k8s.io/v1), `SelfSubjectReview` and `TokenReview` (authentication.k8s.io/v1).
//! They are never stored: a create is answered with the request and its `status`, computed by the
//! authorizer or the authenticator (so `kubectl auth can-i [--list]` and `kubectl auth whoami`
//! work, and an aggregated server can delegate token checks here).

use serde_json::{Map, Value, json};

use crate::auth::access::Access;
use crate::auth::authn::{Authenticator, user_json};
use crate::machinery::error::ApiError;
use crate::machinery::requester::{Attributes, UserInfo};
use crate::machinery::scheme::Review;
use ocm_proto::validation::FieldError;

fn str_at<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The attributes a review's spec asks about: exactly one of `resourceAttributes` and
/// `nonResourceAttributes`.
fn asked(kind: &str, spec: &Value) -> Result<Attributes, ApiError> {
    let resource = spec.get("resourceAttributes").filter(|v| v.is_object());
    let non_resource = spec.get("nonResourceAttributes").filter(|v| v.is_object());
    match (resource, non_resource) {
        (Some(r), None) => Ok(Attributes {
            verb: str_at(r, "verb").to_owned(),
            resource_request: true,
            api_group: str_at(r, "group").to_owned(),
            api_version: str_at(r, "version").to_owned(),
            resource: str_at(r, "resource").to_owned(),
            subresource: str_at(r, "subresource").to_owned(),
            namespace: str_at(r, "namespace").to_owned(),
            name: str_at(r, "name").to_owned(),
            path: String::new(),
        }),
        (None, Some(n)) => Ok(Attributes::non_resource(str_at(n, "verb"), str_at(n, "path"))),
        _ => {
            let err = FieldError::invalid(
                "spec.resourceAttributes",
                Value::Null,
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            );
            Err(ApiError::invalid("authorization.k8s.io", kind, "", &[err]))
        }
    }
}

/// The user a `SubjectAccessReview` asks about.
fn subject(spec: &Value) -> Result<UserInfo, ApiError> {
    let name = str_at(spec, "user").to_owned();
    let groups = crate::machinery::object::strings(spec.get("groups"));
    if name.is_empty() && groups.is_empty() {
        let err =
            FieldError::invalid("spec.user", "", "at least one of user or group must be specified");
        return Err(ApiError::invalid("authorization.k8s.io", "SubjectAccessReview", "", &[err]));
    }
    Ok(UserInfo { name, uid: str_at(spec, "uid").to_owned(), groups, ..Default::default() })
}

/// Answers a review created by `me`: the request with its `status`.
pub fn answer(
    review: Review,
    access: &Access,
    authn: &Authenticator,
    me: &UserInfo,
    mut body: Value,
) -> Result<Value, ApiError> {
    if !body.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
    let status = match review {
        Review::SelfSubjectAccess | Review::SubjectAccess => {
            let kind = if review == Review::SubjectAccess {
                "SubjectAccessReview"
            } else {
                "SelfSubjectAccessReview"
            };
            let attrs = asked(kind, &spec)?;
            let asked_for;
            let user = if review == Review::SubjectAccess {
                asked_for = subject(&spec)?;
                &asked_for
            } else {
                me
            };
            let decision = access.decide(user, &attrs);
            let mut status = Map::new();
            status.insert("allowed".into(), Value::Bool(decision.is_allowed()));
            if !decision.reason().is_empty() {
                status.insert("reason".into(), Value::String(decision.reason().to_owned()));
            }
            Value::Object(status)
        }
        Review::SelfSubjectRules => {
            let namespace = str_at(&spec, "namespace");
            if namespace.is_empty() {
                let err = FieldError::required("spec.namespace", "");
                return Err(ApiError::invalid(
                    "authorization.k8s.io",
                    "SelfSubjectRulesReview",
                    "",
                    &[err],
                ));
            }
            access.rules(me, namespace).to_status()
        }
        Review::SelfSubject => json!({"userInfo": user_json(me)}),
        Review::Token => {
            if str_at(&spec, "token").is_empty() {
                return Err(ApiError::bad_request(
                    "token is required for TokenReview in authentication",
                ));
            }
            authn.token_review(&spec)
        }
    };
    let obj = body.as_object_mut().expect("checked above");
    let meta = obj.entry("metadata").or_insert_with(|| json!({}));
    if let Some(m) = meta.as_object_mut() {
        m.insert("creationTimestamp".into(), Value::Null);
    }
    obj.insert("status".into(), status);
    Ok(body)
}
