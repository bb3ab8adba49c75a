//! Key and prefix rules, and the byte ranges they cover: the only place keys are validated.
//!
//! A **key** is a UTF-8 path such as `/registry/managedclusters/c1`: it starts with `/`, does not
//! end with `/`, has no empty, `.` or `..` segments, no control characters, and is at most
//! [`MAX_KEY_BYTES`] long. A **prefix** (for `list` and `watch`) follows the same rules but must
//! end with `/`; `/` alone is the prefix of every key. Because a prefix always ends at a segment
//! boundary, listing `/ns1/` can never return `/ns10/x` (the "prefix confusion" bug the
//! Kubernetes storage tests guard against).

use crate::error::{Error, Result};

/// The longest key accepted, in bytes.
pub const MAX_KEY_BYTES: usize = 1024;

/// Checks `key` against the key rules.
pub fn validate_key(key: &str) -> Result<()> {
    if key.ends_with('/') {
        return Err(invalid(key, "a key must not end with '/'"));
    }
    validate_path(key)
}

/// Checks `prefix` against the prefix rules.
pub fn validate_prefix(prefix: &str) -> Result<()> {
    if !prefix.ends_with('/') {
        return Err(invalid(prefix, "a prefix must end with '/'"));
    }
    if prefix == "/" {
        return Ok(());
    }
    validate_path(&prefix[..prefix.len() - 1])
}

fn validate_path(path: &str) -> Result<()> {
    if path.is_empty() {
        return Err(invalid(path, "must not be empty"));
    }
    if path.len() > MAX_KEY_BYTES {
        return Err(invalid(path, "longer than 1024 bytes"));
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(invalid(path, "must start with '/'"));
    };
    if path.chars().any(char::is_control) {
        return Err(invalid(path, "must not contain control characters"));
    }
    for segment in rest.split('/') {
        match segment {
            "" => return Err(invalid(path, "must not contain an empty segment ('//')")),
            "." | ".." => return Err(invalid(path, "must not contain '.' or '..' segments")),
            _ => {}
        }
    }
    Ok(())
}

fn invalid(key: &str, reason: &'static str) -> Error {
    let mut shown: String = key.chars().take(128).collect();
    if shown.len() < key.len() {
        shown.push('…');
    }
    Error::InvalidKey { key: shown, reason }
}

/// The exclusive end of the key range covered by a valid prefix: every key starting with
/// `prefix` sorts in `[prefix, prefix_end(prefix))`. A prefix ends with `/` (0x2F), so the end
/// is the same string with that last byte replaced by `0` (0x30).
pub fn prefix_end(prefix: &str) -> String {
    debug_assert!(prefix.ends_with('/'));
    let mut end = prefix[..prefix.len() - 1].to_owned();
    end.push('0');
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        for good in ["/a", "/registry/managedclusters/c1", "/a/b-c.d_e:f"] {
            assert!(validate_key(good).is_ok(), "{good}");
        }
        for bad in ["", "a", "/", "/a/", "//a", "/a//b", "/a/./b", "/a/..", "/a\0b", "/a\nb"] {
            assert!(matches!(validate_key(bad), Err(Error::InvalidKey { .. })), "{bad:?}");
        }
        assert!(validate_key(&format!("/{}", "x".repeat(MAX_KEY_BYTES - 1))).is_ok());
        assert!(validate_key(&format!("/{}", "x".repeat(MAX_KEY_BYTES))).is_err());
    }

    #[test]
    fn prefixes() {
        for good in ["/", "/a/", "/registry/managedclusters/"] {
            assert!(validate_prefix(good).is_ok(), "{good}");
        }
        for bad in ["", "a/", "/a", "//", "/a//", "/../"] {
            assert!(matches!(validate_prefix(bad), Err(Error::InvalidKey { .. })), "{bad:?}");
        }
    }

    #[test]
    fn prefix_range_excludes_siblings() {
        let end = prefix_end("/ns1/");
        assert_eq!(end, "/ns10");
        assert!("/ns1/x" < end.as_str() && "/ns1/x" >= "/ns1/");
        // `/ns10/x` sorts at or after the end, so a list of `/ns1/` cannot reach it.
        assert!("/ns10/x" >= end.as_str());
        assert_eq!(prefix_end("/"), "0");
    }
}
