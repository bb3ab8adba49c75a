//! Field errors: the one shape every validation failure takes, from the schema checks of the OCM
//! kinds to the registry's metadata rules, rendered as Kubernetes renders them (a 422 `Invalid`
//! Status whose `details.causes` carry one entry per field).

use std::fmt;

/// What is wrong with a field; each maps to the `reason` of a Kubernetes `StatusCause`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// A required field is missing (`FieldValueRequired`, "Required value").
    Required,
    /// A value is malformed or out of range (`FieldValueInvalid`, "Invalid value").
    Invalid,
    /// A value is not one of the allowed enumeration (`FieldValueNotSupported`, "Unsupported value").
    NotSupported,
    /// A value has the wrong JSON type (`FieldValueTypeInvalid`, "Invalid value").
    TypeInvalid,
    /// A value may not be set or changed here (`FieldValueForbidden`, "Forbidden").
    Forbidden,
    /// A string or list is too long (`FieldValueTooLong`, "Too long").
    TooLong,
    /// A list has too many items (`FieldValueTooMany`, "Too many").
    TooMany,
    /// A list item or key repeats (`FieldValueDuplicate`, "Duplicate value").
    Duplicate,
}

impl FieldErrorKind {
    /// The `StatusCause.reason` Kubernetes uses for this kind.
    pub fn reason(self) -> &'static str {
        match self {
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::Invalid => "FieldValueInvalid",
            FieldErrorKind::NotSupported => "FieldValueNotSupported",
            FieldErrorKind::TypeInvalid => "FieldValueTypeInvalid",
            FieldErrorKind::Forbidden => "FieldValueForbidden",
            FieldErrorKind::TooLong => "FieldValueTooLong",
            FieldErrorKind::TooMany => "FieldValueTooMany",
            FieldErrorKind::Duplicate => "FieldValueDuplicate",
        }
    }

    /// The phrase apimachinery's `field.Error` prints after the path.
    fn phrase(self) -> &'static str {
        match self {
            FieldErrorKind::Required => "Required value",
            FieldErrorKind::Invalid | FieldErrorKind::TypeInvalid => "Invalid value",
            FieldErrorKind::NotSupported => "Unsupported value",
            FieldErrorKind::Forbidden => "Forbidden",
            FieldErrorKind::TooLong => "Too long",
            FieldErrorKind::TooMany => "Too many",
            FieldErrorKind::Duplicate => "Duplicate value",
        }
    }
}

/// One invalid field: its path in Kubernetes notation (`spec.taints[0].effect`,
/// `metadata.labels[app]`), the offending value when there is one, and a human detail.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// What is wrong.
    pub kind: FieldErrorKind,
    /// The field path, without a leading dot.
    pub field: String,
    /// The value found, shown in the message (absent for `Required`).
    pub value: Option<serde_json::Value>,
    /// Why, in words (may be empty).
    pub detail: String,
}

impl FieldError {
    /// A field error of any kind.
    pub fn new(
        kind: FieldErrorKind,
        field: impl Into<String>,
        value: Option<serde_json::Value>,
        detail: impl Into<String>,
    ) -> FieldError {
        FieldError { kind, field: field.into(), value, detail: detail.into() }
    }

    /// `field: Required value: detail`.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> FieldError {
        FieldError::new(FieldErrorKind::Required, field, None, detail)
    }

    /// `field: Invalid value: <value>: detail`.
    pub fn invalid(
        field: impl Into<String>,
        value: impl Into<serde_json::Value>,
        detail: impl Into<String>,
    ) -> FieldError {
        FieldError::new(FieldErrorKind::Invalid, field, Some(value.into()), detail)
    }

    /// `field: Forbidden: detail`.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> FieldError {
        FieldError::new(FieldErrorKind::Forbidden, field, None, detail)
    }

    /// The cause message without the path, as in a `StatusCause.message`
    /// (`Invalid value: "x": must be a number`).
    pub fn cause_message(&self) -> String {
        let mut out = String::from(self.kind.phrase());
        if let Some(value) = &self.value {
            out.push_str(": ");
            out.push_str(&render_value(value));
        }
        if !self.detail.is_empty() {
            out.push_str(": ");
            out.push_str(&self.detail);
        }
        out
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.cause_message())
    }
}

/// Values print the way Go's `%#v` shows them in apimachinery messages: strings quoted, numbers
/// and booleans bare, anything structured as compact JSON.
fn render_value(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => format!("{s:?}"),
        serde_json::Value::Null => "null".to_owned(),
        other => other.to_string(),
    }
}

/// Lowercase alphanumerics and `-`, alphanumeric at both ends (one part of a DNS-1123 name;
/// no length limit).
pub fn is_dns_label_chars(part: &str) -> bool {
    let b = part.as_bytes();
    !b.is_empty()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// A DNS-1123 label (names of namespaces and managed clusters): at most 63 of
/// [`is_dns_label_chars`].
pub fn is_dns_label(s: &str) -> bool {
    s.len() <= 63 && is_dns_label_chars(s)
}

/// `[a-z0-9]{n}`.
fn token_part(s: &str, n: usize) -> bool {
    s.len() == n && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// Whether `id` is a bootstrap token id: `[a-z0-9]{6}`.
pub fn is_bootstrap_token_id(id: &str) -> bool {
    token_part(id, 6)
}

/// A bootstrap token's parts (kubeadm's format): `[a-z0-9]{6}.[a-z0-9]{16}`.
pub fn parse_bootstrap_token(token: &str) -> Option<(&str, &str)> {
    let (id, secret) = token.split_once('.')?;
    (is_bootstrap_token_id(id) && token_part(secret, 16)).then_some((id, secret))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_like_apimachinery() {
        let e = FieldError::invalid("spec.size", "x", "must be a number");
        assert_eq!(e.to_string(), r#"spec.size: Invalid value: "x": must be a number"#);
        assert_eq!(e.kind.reason(), "FieldValueInvalid");
        let r = FieldError::required("spec", "");
        assert_eq!(r.to_string(), "spec: Required value");
    }
}
