//! The strategy's values read as sdk-go reads them (ocm-wave2.md §1.2): Go durations
//! (`time.ParseDuration`, every unit from `ns` to `h`, fractions and signs), `progressDeadline`
//! with its pattern and `None`, and the int-or-percent sizes `maxConcurrency` and `maxFailures`.

use k8s_openapi::jiff::Timestamp;
use ocm_proto::api::cluster::v1alpha1::PROGRESS_DEADLINE_NONE;
use ocm_proto::api::meta::IntOrString;

use super::RolloutError;

/// Go's largest duration (`math.MaxInt64` nanoseconds): sdk-go's "no deadline" and "no soak".
pub(super) const FOREVER: GoDuration = GoDuration(i64::MAX);

/// 2^63, the bound Go's duration parser checks its unsigned sums against.
const LIMIT: u64 = 1 << 63;

/// A Go `time.Duration`: signed nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct GoDuration(pub(super) i64);

impl GoDuration {
    /// `start + self`, starting from `now` without a start; `None` for [`FOREVER`] (sdk-go's
    /// `calculateRecheckTime`). Saturates at the ends of the representable times.
    pub(super) fn after(self, start: Option<Timestamp>, now: Timestamp) -> Option<Timestamp> {
        if self == FOREVER {
            return None;
        }
        let base = start.unwrap_or(now).as_nanosecond();
        let sum = base + i128::from(self.0);
        Some(Timestamp::from_nanosecond(sum).unwrap_or(if self.0 > 0 {
            Timestamp::MAX
        } else {
            Timestamp::MIN
        }))
    }
}

/// Why a Go duration did not parse; the messages are Go's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Not of the shape `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, or out of range.
    #[error("time: invalid duration {0:?}")]
    Invalid(String),
    /// A number without a unit.
    #[error("time: missing unit in duration {0:?}")]
    MissingUnit(String),
    /// A unit other than `ns`, `us`, `µs`, `μs`, `ms`, `s`, `m`, `h`.
    #[error("time: unknown unit {unit:?} in duration {text:?}")]
    UnknownUnit { unit: String, text: String },
}

/// Why a size is neither an integer nor a percentage; the messages are sdk-go's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// A string that does not end in `%`.
    #[error("'{0}' is an invalid maximum threshold value: string is not a percentage")]
    NotPercent(String),
    /// A string ending in `%` whose rest is no number.
    #[error("strconv.ParseFloat: parsing {0:?}: invalid syntax")]
    BadPercent(String),
}

/// Parses a Go duration exactly as `time.ParseDuration` does.
pub(super) fn go_duration(text: &str) -> Result<GoDuration, DurationError> {
    let invalid = || DurationError::Invalid(text.to_string());
    let (negative, mut rest) = match text.as_bytes() {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        all => (false, all),
    };
    if rest == b"0" {
        return Ok(GoDuration(0));
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let (nanos, after) = component(rest, text)?;
        total = total.checked_add(nanos).filter(|t| *t <= LIMIT).ok_or_else(invalid)?;
        rest = after;
    }
    if negative {
        return Ok(GoDuration(0i64.wrapping_sub_unsigned(total)));
    }
    i64::try_from(total).map(GoDuration).map_err(|_| invalid())
}

/// One `<number><unit>` of a Go duration, in nanoseconds, and what follows it.
fn component<'a>(s: &'a [u8], text: &str) -> Result<(u64, &'a [u8]), DurationError> {
    let invalid = || DurationError::Invalid(text.to_string());
    if !s.first().is_some_and(|c| *c == b'.' || c.is_ascii_digit()) {
        return Err(invalid());
    }
    let (whole, rest) = leading_int(s).ok_or_else(invalid)?;
    let had_whole = rest.len() != s.len();
    let (fraction, scale, rest, had_fraction) = match rest {
        [b'.', after @ ..] => {
            let (f, scale, rest) = leading_fraction(after);
            (f, scale, rest, rest.len() != after.len())
        }
        _ => (0, 1.0, rest, false),
    };
    if !had_whole && !had_fraction {
        return Err(invalid());
    }
    let unit_len = rest.iter().position(|c| *c == b'.' || c.is_ascii_digit()).unwrap_or(rest.len());
    if unit_len == 0 {
        return Err(DurationError::MissingUnit(text.to_string()));
    }
    let (unit, rest) = rest.split_at(unit_len);
    let per_unit = unit_nanos(unit).ok_or_else(|| DurationError::UnknownUnit {
        unit: String::from_utf8_lossy(unit).into_owned(),
        text: text.to_string(),
    })?;
    if whole > LIMIT / per_unit {
        return Err(invalid());
    }
    let mut nanos = whole * per_unit;
    if fraction > 0 {
        // As Go: float64 keeps fractions of an hour exact to the nanosecond.
        nanos += (fraction as f64 * (per_unit as f64 / scale)) as u64;
        if nanos > LIMIT {
            return Err(invalid());
        }
    }
    Ok((nanos, rest))
}

/// Nanoseconds per Go duration unit.
fn unit_nanos(unit: &[u8]) -> Option<u64> {
    Some(match unit {
        b"ns" => 1,
        b"us" => 1_000,
        // U+00B5 (micro sign) and U+03BC (Greek small mu).
        [0xc2, 0xb5, b's'] | [0xce, 0xbc, b's'] => 1_000,
        b"ms" => 1_000_000,
        b"s" => 1_000_000_000,
        b"m" => 60_000_000_000,
        b"h" => 3_600_000_000_000,
        _ => return None,
    })
}

/// The leading decimal digits as an integer; `None` past 2^63.
fn leading_int(s: &[u8]) -> Option<(u64, &[u8])> {
    let digits = s.iter().take_while(|c| c.is_ascii_digit()).count();
    let mut value: u64 = 0;
    for c in &s[..digits] {
        if value > LIMIT / 10 {
            return None;
        }
        value = value * 10 + u64::from(c - b'0');
        if value > LIMIT {
            return None;
        }
    }
    Some((value, &s[digits..]))
}

/// The leading digits of a fraction as `value / scale`; digits past the precision of an
/// `i64` are consumed and ignored.
fn leading_fraction(s: &[u8]) -> (u64, f64, &[u8]) {
    let digits = s.iter().take_while(|c| c.is_ascii_digit()).count();
    let (mut value, mut scale) = (0u64, 1.0f64);
    for c in &s[..digits] {
        let next = value.checked_mul(10).map(|v| v + u64::from(c - b'0'));
        match next {
            Some(v) if value <= (LIMIT - 1) / 10 && v <= LIMIT => {
                value = v;
                scale *= 10.0;
            }
            _ => break,
        }
    }
    (value, scale, &s[digits..])
}

/// `progressDeadline`: absent, `""` and `None` wait forever ([`FOREVER`]); anything else must
/// match `^(([0-9])+[h|m|s])|None$` (unanchored per side, as Go matches it) and be a Go
/// duration.
pub(super) fn progress_deadline(value: Option<&str>) -> Result<GoDuration, RolloutError> {
    let text = value.unwrap_or_default();
    if text.is_empty() || text == PROGRESS_DEADLINE_NONE {
        return Ok(FOREVER);
    }
    if !matches_deadline_pattern(text) {
        return Err(RolloutError::DeadlineFormat(text.to_string()));
    }
    go_duration(text).map_err(RolloutError::Deadline)
}

/// Whether `text` matches `^(([0-9])+[h|m|s])|None$`: digits then `h`, `|`, `m` or `s` at the
/// start, or `None` at the end.
fn matches_deadline_pattern(text: &str) -> bool {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let unit = text.as_bytes().get(digits);
    (digits > 0 && matches!(unit, Some(b'h' | b'|' | b'm' | b's'))) || text.ends_with("None")
}

/// `minSuccessTime`: a Go duration, absent meaning 0.
pub(super) fn min_success_time(value: Option<&str>) -> Result<GoDuration, RolloutError> {
    match value {
        None => Ok(GoDuration(0)),
        Some(text) => go_duration(text).map_err(RolloutError::MinSuccessTime),
    }
}

/// An int-or-percent size, read but not yet measured against a population.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Size {
    Count(i32),
    Percent(f64),
}

impl Size {
    /// Reads a size (sdk-go's `parseRolloutSize`); absent is `0`.
    pub(super) fn parse(value: Option<&IntOrString>) -> Result<Size, SizeError> {
        match value {
            None => Ok(Size::Count(0)),
            Some(IntOrString::Int(n)) => Ok(Size::Count(*n)),
            Some(IntOrString::String(s)) => {
                let number = s.strip_suffix('%').ok_or_else(|| SizeError::NotPercent(s.clone()))?;
                let pct = number.parse().map_err(|_| SizeError::BadPercent(number.to_string()))?;
                Ok(Size::Percent(pct))
            }
        }
    }

    /// The size over `total`: a count as it is, a percentage as `ceil(p / 100 × total)`.
    fn of(self, total: usize) -> i64 {
        match self {
            Size::Count(n) => i64::from(n),
            // `as` saturates (NaN is 0); every such value is out of range below anyway.
            Size::Percent(p) => (p / 100.0 * total as f64).ceil() as i64,
        }
    }

    /// `maxConcurrency` over `total` clusters, as sdk-go: 0, negative or above `total` is
    /// `total`.
    pub(super) fn window(self, total: usize) -> usize {
        match usize::try_from(self.of(total)) {
            Ok(n) if n > 0 && n <= total => n,
            _ => total,
        }
    }

    /// `maxFailures` over `total` clusters: 0 or negative is 0, above `total` is `total`
    /// (sdk-go makes that 0; see the module docs).
    pub(super) fn tolerance(self, total: usize) -> usize {
        usize::try_from(self.of(total)).map_or(0, |n| n.min(total))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: i64 = 1_000_000_000;

    fn ok(text: &str) -> i64 {
        go_duration(text).unwrap_or_else(|e| panic!("{text}: {e}")).0
    }

    #[test]
    fn go_durations_parse_as_go_does() {
        let cases: &[(&str, i64)] = &[
            ("0", 0),
            ("+0", 0),
            ("-0", 0),
            ("5s", 5 * SECOND),
            ("30s", 30 * SECOND),
            ("1478s", 1478 * SECOND),
            ("-5s", -5 * SECOND),
            ("+5s", 5 * SECOND),
            ("-0s", 0),
            ("5.0s", 5 * SECOND),
            ("5.6s", 5 * SECOND + 600_000_000),
            ("5.s", 5 * SECOND),
            (".5s", SECOND / 2),
            ("1.0s", SECOND),
            ("1.00s", SECOND),
            ("1.004s", SECOND + 4_000_000),
            ("100.00100s", 100 * SECOND + 1_000_000),
            ("10ns", 10),
            ("11us", 11_000),
            ("12µs", 12_000),
            ("12μs", 12_000),
            ("13ms", 13_000_000),
            ("14s", 14 * SECOND),
            ("15m", 15 * 60 * SECOND),
            ("16h", 16 * 3600 * SECOND),
            ("3h30m", (3 * 3600 + 30 * 60) * SECOND),
            ("10.5s4m", 4 * 60 * SECOND + 10 * SECOND + SECOND / 2),
            ("-2m3.4s", -(2 * 60 * SECOND + 3 * SECOND + 400_000_000)),
            ("1h2m3s4ms5us6ns", 3_723_004_005_006),
            ("39h9m14.425s", 140_954_425_000_000),
            ("52763797000ns", 52_763_797_000),
            ("0.3333333333333333333h", 20 * 60 * SECOND),
            ("9007199254740993ns", 9_007_199_254_740_993),
            ("9223372036854775807ns", i64::MAX),
            ("9223372036854775.807us", i64::MAX),
            ("9223372036s854ms775us807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("-9223372036854775.808us", i64::MIN),
            ("-2562047h47m16.854775808s", i64::MIN),
            ("0.100000000000000000000h", 6 * 60 * SECOND),
            ("0.830103483285477580700h", 2_988_372_539_827),
        ];
        for (text, nanos) in cases {
            assert_eq!(ok(text), *nanos, "{text}");
        }
    }

    #[test]
    fn bad_go_durations_are_refused_with_go_messages() {
        for text in [
            "",
            "3",
            "-",
            "s",
            ".",
            "-.",
            ".s",
            "+.s",
            "1d",
            "\u{85}\u{85}",
            "\u{FFFD}",
            "9223372036854775810ns",
            "9223372036854775808ns",
            "-9223372036854775809ns",
            "1h-1m",
            "3000000h",
            "9223372036854775.808us",
            "9223372036854ms775us808ns",
            "1.5",
            "1 h",
        ] {
            assert!(go_duration(text).is_err(), "{text:?}");
        }
        assert_eq!(
            go_duration("3").unwrap_err().to_string(),
            "time: missing unit in duration \"3\""
        );
        assert_eq!(
            go_duration("1d").unwrap_err().to_string(),
            "time: unknown unit \"d\" in duration \"1d\""
        );
        assert_eq!(go_duration(".s").unwrap_err().to_string(), "time: invalid duration \".s\"");
    }

    #[test]
    fn deadlines_follow_the_pattern_then_go() {
        assert_eq!(progress_deadline(None), Ok(FOREVER));
        assert_eq!(progress_deadline(Some("")), Ok(FOREVER));
        assert_eq!(progress_deadline(Some("None")), Ok(FOREVER));
        assert_eq!(progress_deadline(Some("90s")), Ok(GoDuration(90 * SECOND)));
        assert_eq!(progress_deadline(Some("0s")), Ok(GoDuration(0)));
        // Only the start is checked: the rest is Go's.
        assert_eq!(progress_deadline(Some("10m30s")), Ok(GoDuration(630 * SECOND)));
        assert_eq!(progress_deadline(Some("1m.5s")), Ok(GoDuration(60 * SECOND + SECOND / 2)));
        assert_eq!(progress_deadline(Some("5ms")), Ok(GoDuration(5_000_000)));
        for bad in ["0", "-1h", "+1h", "1.5h", ".5h", "5us", "h", "abc", " 1h"] {
            assert_eq!(
                progress_deadline(Some(bad)),
                Err(RolloutError::DeadlineFormat(bad.to_string())),
                "{bad}"
            );
        }
        // Past the pattern, Go's parser decides.
        for bad in ["10|", "1hNone", "xNone", "5None", "1h-1m"] {
            assert!(
                matches!(progress_deadline(Some(bad)), Err(RolloutError::Deadline(_))),
                "{bad}"
            );
        }
        assert_eq!(
            progress_deadline(Some("10|")).unwrap_err().to_string(),
            "time: unknown unit \"|\" in duration \"10|\""
        );
    }

    #[test]
    fn min_success_time_is_a_go_duration() {
        assert_eq!(min_success_time(None), Ok(GoDuration(0)));
        assert_eq!(min_success_time(Some("0")), Ok(GoDuration(0)));
        assert_eq!(min_success_time(Some("1m")), Ok(GoDuration(60 * SECOND)));
        assert_eq!(min_success_time(Some("1.5m")), Ok(GoDuration(90 * SECOND)));
        assert!(matches!(min_success_time(Some("1y")), Err(RolloutError::MinSuccessTime(_))));
    }

    fn size(v: IntOrString) -> Size {
        Size::parse(Some(&v)).unwrap()
    }

    #[test]
    fn sizes_read_ints_and_percentages() {
        assert_eq!(Size::parse(None), Ok(Size::Count(0)));
        assert_eq!(size(IntOrString::Int(3)), Size::Count(3));
        assert_eq!(size(IntOrString::String("50%".into())), Size::Percent(50.0));
        // The parser takes floats; the CRD pattern admits only integers.
        assert_eq!(size(IntOrString::String("12.5%".into())), Size::Percent(12.5));
        assert_eq!(
            Size::parse(Some(&IntOrString::String("3".into()))).unwrap_err().to_string(),
            "'3' is an invalid maximum threshold value: string is not a percentage"
        );
        assert_eq!(
            Size::parse(Some(&IntOrString::String("x%".into()))).unwrap_err().to_string(),
            "strconv.ParseFloat: parsing \"x\": invalid syntax"
        );
        assert!(Size::parse(Some(&IntOrString::String("%".into()))).is_err());
    }

    #[test]
    fn windows_fall_back_to_all() {
        let pct = |p: f64| Size::Percent(p);
        assert_eq!(Size::Count(2).window(6), 2);
        assert_eq!(Size::Count(0).window(6), 6);
        assert_eq!(Size::Count(-1).window(6), 6);
        assert_eq!(Size::Count(7).window(6), 6);
        assert_eq!(Size::Count(3).window(0), 0);
        assert_eq!(pct(50.0).window(6), 3);
        assert_eq!(pct(50.0).window(5), 3, "percentages round up");
        assert_eq!(pct(30.0).window(3), 1, "0.3 × 3 is 0.899… in floating point");
        assert_eq!(pct(1.0).window(10), 1);
        assert_eq!(pct(0.0).window(10), 10);
        assert_eq!(pct(150.0).window(10), 10);
        assert_eq!(pct(f64::NAN).window(10), 10);
        assert_eq!(pct(f64::INFINITY).window(10), 10);
    }

    #[test]
    fn tolerances_clamp_to_the_population() {
        let pct = |p: f64| Size::Percent(p);
        assert_eq!(Size::Count(1).tolerance(3), 1);
        assert_eq!(Size::Count(0).tolerance(3), 0);
        assert_eq!(Size::Count(-4).tolerance(3), 0);
        // sdk-go answers 0 for these two; here they tolerate every failure.
        assert_eq!(Size::Count(5).tolerance(3), 3);
        assert_eq!(pct(150.0).tolerance(4), 4);
        assert_eq!(pct(100.0).tolerance(6), 6);
        assert_eq!(pct(30.0).tolerance(3), 1);
        assert_eq!(pct(0.0).tolerance(3), 0);
        assert_eq!(pct(f64::NAN).tolerance(3), 0);
        assert_eq!(Size::Count(2).tolerance(0), 0);
    }

    #[test]
    fn recheck_times_add_durations() {
        let t = |s: i64| Timestamp::from_second(s).unwrap();
        assert_eq!(FOREVER.after(Some(t(10)), t(0)), None);
        assert_eq!(GoDuration(5 * SECOND).after(Some(t(10)), t(0)), Some(t(15)));
        assert_eq!(GoDuration(5 * SECOND).after(None, t(100)), Some(t(105)));
        assert_eq!(GoDuration(-5 * SECOND).after(None, t(100)), Some(t(95)));
        assert_eq!(
            GoDuration(i64::MAX - 1).after(Some(Timestamp::MAX), t(0)),
            Some(Timestamp::MAX)
        );
    }
}
