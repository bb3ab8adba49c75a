//! The agent's one clock: every timestamp it writes and every age or expiry it computes reads
//! the time here.

use k8s_openapi::jiff::Timestamp;
use ocm_proto::api::meta::Time;

/// The time now.
pub fn timestamp() -> Timestamp {
    Timestamp::now()
}

/// The time now, as the API's `Time`.
pub fn now() -> Time {
    Time(timestamp())
}

/// Unix seconds now.
pub fn unix_now() -> i64 {
    timestamp().as_second()
}

/// The time now, as the `time` crate's (what certificate and expiry arithmetic uses).
pub fn offset_now() -> time::OffsetDateTime {
    time::OffsetDateTime::from_unix_timestamp_nanos(timestamp().as_nanosecond())
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}
