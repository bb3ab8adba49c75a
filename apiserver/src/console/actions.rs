//! The console's actions, each the API call a user would make with `ocm-hub` or kubectl, made
//! as the signed-in user so RBAC decides: accepting a cluster (`ocm-hub accept`), pausing,
//! resuming and undoing a rollout (`ocm-hub rollout`), disabling and enabling a policy (a
//! merge patch of `spec.disabled`, as `kubectl patch` sends it).

use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use http::{Method, StatusCode};
use serde_json::json;

use super::user::{self, Call};
use crate::cli::admin::CliError;
use crate::serve::rest::ApiState;

/// An action a path under `/ui/actions/` names.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Action<'a> {
    /// `clusters/{name}/accept`.
    Accept(&'a str),
    /// `rollouts/{ns}/{name}/pause` and `resume`.
    Pause(&'a str, &'a str, bool),
    /// `rollouts/{ns}/{name}/undo`.
    Undo(&'a str, &'a str),
    /// `policies/{ns}/{name}/disable` and `enable`.
    Disable(&'a str, &'a str, bool),
}

impl<'a> Action<'a> {
    /// The action `segments` (after `/ui/actions/`) name.
    pub(super) fn of(segments: &[&'a str]) -> Option<Action<'a>> {
        let ok = |s: &str| crate::machinery::object::check_dns_subdomain(s).is_ok();
        match *segments {
            ["clusters", c, "accept"] if ok(c) => Some(Action::Accept(c)),
            ["rollouts", ns, n, verb] if ok(ns) && ok(n) => match verb {
                "pause" => Some(Action::Pause(ns, n, true)),
                "resume" => Some(Action::Pause(ns, n, false)),
                "undo" => Some(Action::Undo(ns, n)),
                _ => None,
            },
            ["policies", ns, n, verb] if ok(ns) && ok(n) => match verb {
                "disable" => Some(Action::Disable(ns, n, true)),
                "enable" => Some(Action::Disable(ns, n, false)),
                _ => None,
            },
            _ => None,
        }
    }
}

/// Runs `action` as the user `token` names; answers `{"message": ...}` or the API's Status.
pub(super) async fn run(state: &Arc<ApiState>, token: &Arc<str>, action: Action<'_>) -> Response {
    let outcome = match action {
        Action::Accept(cluster) => {
            let mut said = Vec::new();
            let client = user::kube_client(state, token);
            crate::cli::admin::accept(client, &[cluster.to_owned()], |line| said.push(line))
                .await
                .map(|()| said.join("\n"))
        }
        Action::Pause(ns, name, paused) => {
            crate::cli::rollout::pause(&user::kube_client(state, token), ns, name, paused).await
        }
        Action::Undo(ns, name) => {
            crate::cli::rollout::undo(&user::kube_client(state, token), ns, name, None).await
        }
        Action::Disable(ns, name, disabled) => {
            return disable_policy(state, token, ns, name, disabled).await;
        }
    };
    match outcome {
        Ok(message) => message_response(&message),
        // The hub's own answer, as it gave it.
        Err(CliError::Hub(kube::Error::Api(status))) => {
            let code = StatusCode::from_u16(status.code).unwrap_or(StatusCode::BAD_GATEWAY);
            let body = serde_json::to_vec(&*status).unwrap_or_default();
            json_response(code, body)
        }
        Err(CliError::HubState(why)) => status_error(StatusCode::CONFLICT, "Conflict", &why),
        Err(other) => {
            status_error(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", &other.to_string())
        }
    }
}

/// Sets or clears a policy's `spec.disabled`.
async fn disable_policy(
    state: &Arc<ApiState>,
    token: &str,
    ns: &str,
    name: &str,
    disabled: bool,
) -> Response {
    let path =
        format!("/apis/policy.open-cluster-management.io/v1/namespaces/{ns}/policies/{name}");
    let body = json!({"spec": {"disabled": disabled}});
    let call = Call {
        method: Method::PATCH,
        content_type: Some("application/merge-patch+json"),
        body: Body::from(body.to_string()),
        ..Call::get(&path)
    };
    let resp = user::call(state, token, call).await;
    if !resp.status().is_success() {
        return resp;
    }
    let verb = if disabled { "disabled" } else { "enabled" };
    message_response(&format!("policy.policy.open-cluster-management.io/{name} {verb}"))
}

fn json_response(code: StatusCode, body: impl Into<Body>) -> Response {
    Response::builder()
        .status(code)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body.into())
        .expect("static headers are valid")
}

fn message_response(message: &str) -> Response {
    json_response(StatusCode::OK, json!({"message": message}).to_string())
}

/// A `Status` failure of an action that went wrong before or beside the API's own answers.
fn status_error(code: StatusCode, reason: &str, message: &str) -> Response {
    let status = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code.as_u16(),
    });
    json_response(code, status.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_actions() {
        assert_eq!(Action::of(&["clusters", "c1", "accept"]), Some(Action::Accept("c1")));
        assert_eq!(
            Action::of(&["rollouts", "ns", "app", "resume"]),
            Some(Action::Pause("ns", "app", false))
        );
        assert_eq!(Action::of(&["rollouts", "ns", "app", "undo"]), Some(Action::Undo("ns", "app")));
        assert_eq!(
            Action::of(&["policies", "ns", "p", "disable"]),
            Some(Action::Disable("ns", "p", true))
        );
        assert_eq!(Action::of(&["clusters", "c1", "delete"]), None);
        assert_eq!(Action::of(&["clusters", "../x", "accept"]), None);
    }
}
