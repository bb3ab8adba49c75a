//! The hub's one clock: every timestamp it writes and every age or expiry it computes reads
//! the time here.

use time::OffsetDateTime;

/// The time now, in UTC.
pub fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

/// The time now, as the API types' timestamp.
pub fn timestamp() -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::now()
}
