//! Kubernetes' two log line formats (ecosystem.md §2.6, KEP-1602) as `tracing-subscriber`
//! formatters: klog's text header with a structured message (the default) and `--logging-format
//! json`'s one object per line with the keys `ts`, `caller`, `msg`, `v`, `err`, then the event's
//! fields. Verbosity follows klog's `-v N`: 0–3 info, 4 debug, 5 and above trace.
//!
//! [`subscriber`] builds the logger both binaries install (their `main.rs` installs it).

use std::fmt::{self, Write as _};

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Which of Kubernetes' formats to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// klog's text: `I1025 00:15:15.525108   12345 file.rs:116] "msg" key="value"`.
    Text,
    /// One JSON object per line: `{"ts":1580306777.04728,"caller":"file.rs:116","msg":"...","v":0}`.
    Json,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        match s {
            "text" => Ok(Format::Text),
            "json" => Ok(Format::Json),
            _ => Err(format!("{s:?} is not a logging format (text, json)")),
        }
    }
}

/// The logger of a binary: `format` lines on stderr, filtered by [`filter`]. Install it with
/// `SubscriberInitExt::try_init`, which also routes the `log` facade (sled, rustls) into it.
pub fn subscriber(
    format: Format,
    v: u8,
    directives: Option<&str>,
) -> impl Subscriber + Send + Sync + 'static {
    tracing_subscriber::fmt()
        .event_format(Kubernetes(format))
        .with_env_filter(filter(v, directives))
        .with_writer(std::io::stderr)
        .finish()
}

/// The most verbose level `-v N` lets through (klog: 0–3 info, 4 debug, 5+ trace).
pub fn level_for_verbosity(v: u8) -> Level {
    match v {
        0..=3 => Level::INFO,
        4 => Level::DEBUG,
        _ => Level::TRACE,
    }
}

/// Our crates, whose debug and trace events `-v 4` and `-v 5` turn on (other crates' stay at
/// info: klog's verbosity is the component's own, not its libraries').
const OUR_CRATES: [&str; 6] =
    ["ocm_apiserver", "ocm_hub", "ocm_agent", "klusterlet", "ocm_storage", "ocm_proto"];

/// The filter of `-v N`, or `directives` (`RUST_LOG`'s syntax) when given and valid.
pub fn filter(v: u8, directives: Option<&str>) -> tracing_subscriber::EnvFilter {
    if let Some(parsed) = directives.and_then(|d| tracing_subscriber::EnvFilter::try_new(d).ok()) {
        return parsed;
    }
    let level = level_for_verbosity(v).as_str().to_ascii_lowercase();
    let mut text = String::from("info");
    for c in OUR_CRATES {
        let _ = write!(text, ",{c}={level}");
    }
    tracing_subscriber::EnvFilter::new(text)
}

/// The klog verbosity a level is logged at (`v` in JSON; errors and warnings have none).
fn verbosity(level: Level) -> Option<u8> {
    match level {
        Level::INFO => Some(0),
        Level::DEBUG => Some(4),
        Level::TRACE => Some(5),
        _ => None,
    }
}

/// The formatter: `Kubernetes(Format::Text)` or `Kubernetes(Format::Json)`.
#[derive(Debug, Clone, Copy)]
pub struct Kubernetes(pub Format);

/// An event's message and fields, in the order they were recorded.
#[derive(Default)]
struct Fields {
    message: String,
    err: Option<String>,
    pairs: Vec<(&'static str, Value)>,
    /// Where a `log` record came from (libraries logging through the `log` facade arrive with
    /// `log.file` and `log.line` fields instead of metadata).
    log_file: Option<String>,
    log_line: Option<u64>,
}

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        match (field.name(), value) {
            ("message", Value::String(s)) => self.message = s,
            ("message", v) => self.message = v.to_string(),
            // Kubernetes' key for an error is `err`.
            ("error" | "err", Value::String(s)) => self.err = Some(s),
            ("error" | "err", v) => self.err = Some(v.to_string()),
            ("log.file", Value::String(f)) => self.log_file = Some(f),
            ("log.line", v) => self.log_line = v.as_u64(),
            ("log.target" | "log.module_path" | "log.file", _) => {}
            (name, v) => self.pairs.push((name, v)),
        }
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::String(value.to_owned()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::Bool(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, Value::String(value.to_string()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, Value::String(format!("{value:?}")));
    }
}

/// `file:line` of an event (or of the `log` record it carries), with the file's base name as
/// klog prints it.
fn caller(event: &Event<'_>, fields: &Fields) -> String {
    let meta = event.metadata();
    let file = fields.log_file.as_deref().or(meta.file()).unwrap_or("unknown");
    let line = fields.log_line.or(meta.line().map(u64::from)).unwrap_or(0);
    let base = file.rsplit(['/', '\\']).next().unwrap_or(file);
    format!("{base}:{line}")
}

/// Writes `s` as a Go `%q` string (what klog prints for messages and string values).
fn quoted(out: &mut impl fmt::Write, s: &str) -> fmt::Result {
    // JSON's escapes are Go's for everything a log line holds.
    out.write_str(&Value::String(s.to_owned()).to_string())
}

impl<S, N> FormatEvent<S, N> for Kubernetes
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let now = time::OffsetDateTime::now_utc();
        let level = *event.metadata().level();
        match self.0 {
            Format::Text => text_line(&mut writer, now, level, &caller(event, &fields), &fields),
            Format::Json => {
                let caller = caller(event, &fields);
                json_line(&mut writer, now, level, &caller, fields)
            }
        }
    }
}

fn text_line(
    out: &mut impl fmt::Write,
    now: time::OffsetDateTime,
    level: Level,
    caller: &str,
    fields: &Fields,
) -> fmt::Result {
    let severity = match level {
        Level::ERROR => 'E',
        Level::WARN => 'W',
        _ => 'I',
    };
    write!(
        out,
        "{severity}{:02}{:02} {:02}:{:02}:{:02}.{:06} {:>7} {caller}] ",
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second(),
        now.microsecond(),
        std::process::id(),
    )?;
    quoted(out, &fields.message)?;
    if let Some(err) = &fields.err {
        out.write_str(" err=")?;
        quoted(out, err)?;
    }
    for (key, value) in &fields.pairs {
        write!(out, " {key}=")?;
        match value {
            Value::String(s) => quoted(out, s)?,
            other => write!(out, "{other}")?,
        }
    }
    out.write_char('\n')
}

fn json_line(
    out: &mut impl fmt::Write,
    now: time::OffsetDateTime,
    level: Level,
    caller: &str,
    fields: Fields,
) -> fmt::Result {
    let mut line = Map::new();
    let ts = now.unix_timestamp_nanos() as f64 / 1e9;
    line.insert("ts".into(), Value::from(ts));
    line.insert("caller".into(), Value::String(caller.to_owned()));
    line.insert("msg".into(), Value::String(fields.message));
    if let Some(v) = verbosity(level) {
        line.insert("v".into(), Value::from(v));
    }
    if let Some(err) = fields.err {
        line.insert("err".into(), Value::String(err));
    }
    for (key, value) in fields.pairs {
        // The format's own keys are never overwritten by a field of the same name.
        line.entry(key).or_insert(value);
    }
    writeln!(out, "{}", Value::Object(line))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields() -> Fields {
        Fields {
            message: "Pod status \"updated\"".into(),
            err: Some("boom".into()),
            pairs: vec![
                ("pod", Value::from("kube-system/kubedns")),
                ("count", Value::from(3)),
                ("ts", Value::from("x")),
            ],
            ..Fields::default()
        }
    }

    fn at() -> time::OffsetDateTime {
        time::OffsetDateTime::from_unix_timestamp_nanos(1_761_351_315_525_108_000).unwrap()
    }

    #[test]
    fn text_is_klogs_header_and_a_structured_message() {
        let mut out = String::new();
        text_line(&mut out, at(), Level::WARN, "server.rs:116", &fields()).unwrap();
        let pid = format!("{:>7}", std::process::id());
        assert_eq!(
            out,
            format!(
                "W1025 00:15:15.525108 {pid} server.rs:116] \"Pod status \\\"updated\\\"\" err=\"boom\" pod=\"kube-system/kubedns\" count=3 ts=\"x\"\n"
            )
        );
    }

    #[test]
    fn json_has_kubernetes_keys_first_and_keeps_them() {
        let mut out = String::new();
        json_line(&mut out, at(), Level::DEBUG, "a.rs:1", fields()).unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert!((v["ts"].as_f64().unwrap() - 1_761_351_315.525108).abs() < 1e-3);
        assert_eq!(v["caller"], "a.rs:1");
        assert_eq!(v["msg"], "Pod status \"updated\"");
        assert_eq!(v["v"], 4);
        assert_eq!(v["err"], "boom");
        assert_eq!(v["count"], 3);
        // A field named like a format key does not replace it.
        assert!(v["ts"].is_f64());
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(&keys[..5], ["ts", "caller", "msg", "v", "err"]);
        assert!(out.ends_with("}\n") && out.lines().count() == 1);
    }

    #[test]
    fn errors_carry_no_verbosity() {
        let mut out = String::new();
        json_line(&mut out, at(), Level::ERROR, "a.rs:1", Fields::default()).unwrap();
        assert!(serde_json::from_str::<Value>(&out).unwrap().get("v").is_none());
        assert_eq!(level_for_verbosity(2), Level::INFO);
        assert_eq!(level_for_verbosity(4), Level::DEBUG);
        assert_eq!(level_for_verbosity(9), Level::TRACE);
    }
}
