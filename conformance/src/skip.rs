//! Skipping a test, or a part of one, said the one way. A run told to do without a program
//! (`OCM_SKIP_ETCD=1`, `OCM_SKIP_KUBECTL=1`, `OCM_SKIP_PROMTOOL=1`, `OCM_SKIP_BROWSER=1`;
//! `OCM_SKIP_TMPFS=1`, a run without the root a tmpfs mount needs, `OCM_SKIP_NETNS=1` one
//! without the root a network namespace needs) never lets a test that skipped pass as if it
//! had run: [`requested`] prints `SKIPPED <binary>::<test>: <what> (<VAR>=1)` on stderr, past
//! the test harness's output capture, and appends the same line to the file `$OCM_SKIP_REPORT`
//! names; `scripts/test.sh` sets it, counts the tests it lists at the end, and
//! fails under CI when there is any. Without the variable a missing program fails its test.

use std::io::Write as _;

/// The environment variable naming the file every skip is appended to (`scripts/test.sh`).
pub const REPORT_ENV: &str = "OCM_SKIP_REPORT";

/// The marker every skip line starts with.
pub const MARKER: &str = "SKIPPED";

/// Whether this run skips what `env` names (`env=1`). If it does, reports that the
/// running test skips `what` ("the whole test", "its etcd run", "its promtool check"), so the
/// caller must then not do it. Call it on the test's own thread (the test body, not a spawned
/// task): the test harness names that thread after the test.
pub fn requested(env: &str, what: &str) -> bool {
    let skip = std::env::var(env).is_ok_and(|v| v == "1");
    if skip {
        report(&format!("{MARKER} {}: {what} ({env}=1)", test_name()));
    }
    skip
}

/// `<binary>::<test>`: the test binary's name without Cargo's hash, and the running thread's
/// name, which libtest sets to the test's path (`?` when the thread has none).
fn test_name() -> String {
    let binary = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|stem| match stem.rsplit_once('-') {
            Some((name, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => name.to_owned(),
            _ => stem,
        })
        .unwrap_or_else(|| "?".to_owned());
    let thread = std::thread::current();
    format!("{binary}::{}", thread.name().unwrap_or("?"))
}

/// Writes `line` to stderr as one write (not through `eprintln!`, which the test harness
/// captures and shows only for failing tests) and appends it to `$OCM_SKIP_REPORT` when set.
/// A report file that cannot be written fails the test: a skip nobody counts is the silence
/// this module exists to prevent.
fn report(line: &str) {
    let line = format!("{line}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
    if let Some(path) = std::env::var_os(REPORT_ENV) {
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut file| file.write_all(line.as_bytes()));
        if let Err(e) = appended {
            panic!("recording a skip in {REPORT_ENV}={}: {e}", path.to_string_lossy());
        }
    }
}
