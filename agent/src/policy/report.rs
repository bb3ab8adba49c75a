//! What the agent reports of a replicated policy (framework-addon's status sync, ocm-wave2.md
//! §3.3): per template its compliance and its history of compliance messages (newest first, at
//! most 10, a message added only when it differs from the newest), and the policy's compliance
//! over its templates (NonCompliant wins, then Pending; Compliant only when all are).

use ocm_proto::api::policy::v1::{ComplianceHistory, DetailsPerTemplate, RawObject};
use ocm_proto::api::policy::{COMPLIANT, NON_COMPLIANT, PENDING, overall};
use serde_json::json;

/// The most history entries a template keeps.
const HISTORY: usize = 10;

/// A template's detail with `message` (`<State>; ...`) added to its history at `now` when it
/// is new; `eventName` is `<replica>.<hex nanos>` as OCM names its events.
pub(super) fn with_message(
    previous: Option<&DetailsPerTemplate>,
    template: &str,
    replica: &str,
    message: &str,
    now: k8s_openapi::jiff::Timestamp,
) -> DetailsPerTemplate {
    let mut history = previous.map(|d| d.history.clone()).unwrap_or_default();
    if history.first().and_then(|h| h.message.as_deref()) != Some(message) {
        history.insert(
            0,
            ComplianceHistory {
                event_name: Some(format!("{replica}.{:x}", now.as_nanosecond())),
                last_timestamp: Some(ocm_proto::api::meta::Time(
                    now.round(k8s_openapi::jiff::Unit::Second).unwrap_or(now),
                )),
                message: Some(message.to_owned()),
            },
        );
        history.truncate(HISTORY);
    }
    DetailsPerTemplate {
        compliant: Some(compliance_of(message).to_owned()),
        history,
        template_meta: Some(RawObject(json!({"name": template}))),
    }
}

/// A message's compliance: it starts with the state.
fn compliance_of(message: &str) -> &'static str {
    if message.starts_with(COMPLIANT) {
        COMPLIANT
    } else if message.starts_with(PENDING) {
        PENDING
    } else {
        NON_COMPLIANT
    }
}

/// The policy's compliance over its templates' details (none when it has none).
pub(super) fn policy_compliance(details: &[DetailsPerTemplate]) -> Option<String> {
    overall(details.iter().filter_map(|d| d.compliant.as_deref())).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_grows_only_with_new_messages_and_keeps_ten() {
        let t = k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap();
        let mut d = with_message(None, "cfg", "ns.p", "NonCompliant; violation - x", t);
        assert_eq!(d.compliant.as_deref(), Some(NON_COMPLIANT));
        d = with_message(Some(&d), "cfg", "ns.p", "NonCompliant; violation - x", t);
        assert_eq!(d.history.len(), 1);
        for i in 0..12 {
            d = with_message(Some(&d), "cfg", "ns.p", &format!("Compliant; notification - {i}"), t);
        }
        assert_eq!(d.history.len(), 10);
        assert_eq!(d.history[0].message.as_deref(), Some("Compliant; notification - 11"));
        assert_eq!(policy_compliance(&[d]).as_deref(), Some(COMPLIANT));
    }
}
