//! Prometheus checks with the real `promtool` (Debian's `prometheus` package, or
//! `$OCM_PROMTOOL_BIN`): `check metrics` on an exposition, `check rules` and `test rules` on
//! rule files; and a reader for the samples of a text exposition, for assertions on values.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{Context as _, bail};
use tokio::io::AsyncWriteExt as _;

/// Set to `1` to skip the promtool checks where promtool is missing (CI never sets it).
pub const SKIP_PROMTOOL_ENV: &str = "OCM_SKIP_PROMTOOL";

/// Whether the run was told to skip promtool (`OCM_SKIP_PROMTOOL=1`); when so, reported as the
/// running test skipping `what` ([`crate::skip::requested`]).
pub fn skip(what: &str) -> bool {
    crate::skip::requested(SKIP_PROMTOOL_ENV, what)
}

/// The promtool binary; an error naming what to install when it is missing.
pub fn promtool() -> anyhow::Result<PathBuf> {
    crate::programs::find("promtool", "OCM_PROMTOOL_BIN").with_context(|| {
        format!(
            "promtool not found on PATH: run `apt-get install -y prometheus` (Debian's package \
             ships it), set OCM_PROMTOOL_BIN, or set {SKIP_PROMTOOL_ENV}=1 to skip"
        )
    })
}

/// Runs promtool with `args` and `stdin`; its exit code and what it printed (both streams).
pub async fn run(args: &[&str], stdin: &str) -> anyhow::Result<(i32, String)> {
    let mut child = tokio::process::Command::new(promtool()?)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting promtool")?;
    let mut input = child.stdin.take().context("promtool's stdin")?;
    input.write_all(stdin.as_bytes()).await?;
    drop(input);
    let out = child.wait_with_output().await?;
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Ok((out.status.code().unwrap_or(-1), text))
}

/// `promtool check metrics` on an exposition: fails with promtool's findings unless clean.
pub async fn check_metrics(exposition: &str) -> anyhow::Result<()> {
    let (code, printed) = run(&["check", "metrics"], exposition).await?;
    if code != 0 {
        bail!("promtool check metrics exited {code}:\n{printed}");
    }
    Ok(())
}

/// [`check_metrics`], unless the run was told to skip promtool (reported as a skip of the
/// running test's promtool check).
pub async fn check_metrics_unless_skipped(exposition: &str) -> anyhow::Result<()> {
    if skip("its promtool check") {
        return Ok(());
    }
    check_metrics(exposition).await
}

/// `promtool <verb> rules FILE...` (verb `check` or `test`): fails with its output unless clean.
pub async fn rules(verb: &str, files: &[&Path]) -> anyhow::Result<String> {
    let mut args = vec![verb, "rules"];
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    args.extend(names.iter().map(String::as_str));
    let (code, printed) = run(&args, "").await?;
    if code != 0 {
        bail!("promtool {verb} rules exited {code}:\n{printed}");
    }
    Ok(printed)
}

/// One sample of a text exposition.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Metric name (with `_bucket`, `_sum`, `_count` for histogram parts).
    pub name: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Value.
    pub value: f64,
}

/// The samples of a Prometheus text exposition (comments skipped). Label values may hold
/// escaped quotes and backslashes.
pub fn samples(text: &str) -> anyhow::Result<Vec<Sample>> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (head, value) = line.rsplit_once(' ').with_context(|| format!("no value: {line}"))?;
        let value = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().with_context(|| format!("bad value: {line}"))?,
        };
        let (name, labels) = match head.split_once('{') {
            None => (head.to_owned(), BTreeMap::new()),
            Some((name, rest)) => {
                let body = rest.strip_suffix('}').with_context(|| format!("bad labels: {line}"))?;
                (name.to_owned(), labels(body).with_context(|| format!("bad labels: {line}"))?)
            }
        };
        out.push(Sample { name, labels, value });
    }
    Ok(out)
}

fn labels(mut body: &str) -> anyhow::Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    while !body.is_empty() {
        let (key, rest) = body.split_once("=\"").context("label without a value")?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => bail!("dangling escape"),
                },
                Some((i, '"')) => break i,
                Some((_, c)) => value.push(c),
                None => bail!("unterminated label value"),
            }
        };
        out.insert(key.to_owned(), value);
        body = rest[end + 1..].trim_start_matches(',');
    }
    Ok(out)
}

/// The samples named `name` whose labels include every pair of `with`.
fn matching<'a>(
    samples: &'a [Sample],
    name: &'a str,
    with: &'a [(&str, &str)],
) -> impl Iterator<Item = &'a Sample> {
    samples
        .iter()
        .filter(move |s| s.name == name)
        .filter(move |s| with.iter().all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v)))
}

/// The value of the one sample named `name` whose labels include every pair of `with`.
/// An error listing the series of that name when none or several match.
pub fn value(samples: &[Sample], name: &str, with: &[(&str, &str)]) -> anyhow::Result<f64> {
    let found: Vec<&Sample> = matching(samples, name, with).collect();
    match found.as_slice() {
        [one] => Ok(one.value),
        _ => {
            let series: Vec<String> = matching(samples, name, &[])
                .map(|s| format!("{:?} {}", s.labels, s.value))
                .collect();
            bail!(
                "{} samples of {name} with {with:?}; its series:\n{}",
                found.len(),
                series.join("\n")
            )
        }
    }
}

/// The sum of the samples named `name` whose labels include every pair of `with`.
pub fn sum(samples: &[Sample], name: &str, with: &[(&str, &str)]) -> f64 {
    matching(samples, name, with).map(|s| s.value).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_names_labels_escapes_and_infinities() {
        let text = "# HELP a x\n# TYPE a counter\na_total 3\nb{x=\"1\",y=\"q\\\"uo\\\\te\"} 2.5\nc_bucket{le=\"+Inf\"} 7\nd -Inf\n";
        let s = samples(text).unwrap();
        assert_eq!(s.len(), 4);
        assert_eq!(value(&s, "a_total", &[]).unwrap(), 3.0);
        assert_eq!(s[1].labels["y"], "q\"uo\\te");
        assert_eq!(value(&s, "b", &[("x", "1")]).unwrap(), 2.5);
        assert_eq!(value(&s, "c_bucket", &[("le", "+Inf")]).unwrap(), 7.0);
        assert!(value(&s, "b", &[("x", "2")]).is_err());
        assert_eq!(s[3].value, f64::NEG_INFINITY);
        assert!(samples("x{a=\"1} 2").is_err());
    }
}
