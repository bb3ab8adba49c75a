#!/usr/bin/env bash
# Runs the whole test suite: every crate, every storage backend (memory, sled, a real etcd),
# the reliability tests (model-based, crash-kill, watch stress) and the tidy checks.
#
# Needs Debian packages a fresh machine may lack: protobuf-compiler (the tests that regenerate
# the committed generated gRPC code and compare it, and the etcd-client crate the storage
# benchmark builds; the hub itself builds without protoc), etcd-server (the etcd suites start a
# real etcd), prometheus (its promtool checks /metrics and the alert rules) and systemd
# (systemd-analyze verifies the units under deploy/). When they are missing and this runs as
# root with apt-get, it installs them; otherwise it stops with the command to run.
# OCM_SKIP_ETCD=1 skips the etcd suites and OCM_SKIP_KUBECTL=1 the kubectl suite for a quick
# local run, OCM_SKIP_PROMTOOL=1 the promtool checks, OCM_SKIP_TMPFS=1 the full-disk tests
# (they mount a small tmpfs, which needs root), OCM_SKIP_NETNS=1 the partition test (it makes a
# network namespace, which needs root and iproute2), OCM_SKIP_BROWSER=1 the console's browser
# tests (Chromium and playwright-core) (CI sets none of them).
# Every test that skips all or part of itself says so in a `SKIPPED <test>: <what> (<VAR>=1)`
# line (conformance/src/skip.rs); the count and the list are printed at the end, and with
# OCM_FAIL_ON_SKIP=1 (set by .ci/run) any skip fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

need() { # need COMMAND PACKAGE
  command -v "$1" >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test.sh: $1 is missing; installing Debian's $2" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$2" >/dev/null ||
      { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$2" >/dev/null; }
    command -v "$1" >/dev/null 2>&1 && return 0
  fi
  echo "test.sh: $1 not found: run 'apt-get install -y $2' first" >&2
  exit 2
}

need protoc protobuf-compiler
if [ "${OCM_SKIP_ETCD:-}" != 1 ]; then
  need etcd etcd-server
fi
# /metrics and the alert rules are checked by the real promtool (Debian's prometheus package).
if [ "${OCM_SKIP_PROMTOOL:-}" != 1 ]; then
  need promtool prometheus
fi
# The systemd units under deploy/ are checked by systemd-analyze verify.
need systemd-analyze systemd
# Clients nobody here wrote meet the hub's early answers and certificates: Python's requests and
# strict ssl, curl over HTTP/2, openssl verify -x509_strict.
need python3 python3
need curl curl
need openssl openssl
# The console's browser tests drive Debian's Chromium with playwright-core (npm, pinned by
# conformance/console/package-lock.json). OCM_SKIP_BROWSER=1 skips them.
if [ "${OCM_SKIP_BROWSER:-}" != 1 ]; then
  need chromium chromium
  need npm npm
  if [ ! -f conformance/console/node_modules/playwright-core/package.json ]; then
    echo "test.sh: installing playwright-core for the console's browser tests (npm ci)" >&2
    npm ci --prefix conformance/console --no-audit --no-fund >/dev/null
  fi
fi
# The partition test cuts a replica off from etcd in a network namespace of its own.
if [ "${OCM_SKIP_NETNS:-}" != 1 ]; then
  need ip iproute2
fi
if ! python3 -c 'import requests' >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test.sh: Python's requests is missing; installing Debian's python3-requests" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-requests >/dev/null ||
      { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-requests >/dev/null; }
  fi
  python3 -c 'import requests' >/dev/null 2>&1 ||
    { echo "test.sh: Python's requests not found: run 'apt-get install -y python3-requests' first" >&2; exit 2; }
fi
# The kubectl suite drives the real kubectl (1.32; not a Debian package, so not installed here).
if [ "${OCM_SKIP_KUBECTL:-}" != 1 ] && ! command -v kubectl >/dev/null 2>&1; then
  echo "test.sh: kubectl not found: install kubectl 1.32, or set OCM_SKIP_KUBECTL=1 to skip the kubectl suite" >&2
  exit 2
fi

# The conformance suites run the real `ocm-hub` and `klusterlet` binaries (client commands,
# agents joining);
# `cargo test` builds only test harnesses of binaries, so the binary is built first, in the same
# profile as the tests.
profile=()
for arg in "$@"; do
  if [ "$arg" = --release ]; then profile=(--release); fi
done
cargo build -p ocm-apiserver --bin ocm-hub -p ocm-agent --bin klusterlet "${profile[@]}"

# The tests append their skips here; counted when the run ends, however it ends.
OCM_SKIP_REPORT=$(mktemp "${TMPDIR:-/tmp}/ocm-skips.XXXXXX")
export OCM_SKIP_REPORT
report_skips() {
  local status=$? tests
  # One line per skip; a test that skipped several parts is one test.
  tests=$(sed -n 's/^SKIPPED \([^ ]*\): .*/\1/p' "$OCM_SKIP_REPORT" | sort -u)
  if [ -z "$tests" ]; then
    echo "test.sh: no test skipped" >&2
  else
    echo "test.sh: tests that skipped all or part of themselves: $(printf '%s\n' "$tests" | wc -l)" >&2
    sort -u "$OCM_SKIP_REPORT" | sed 's/^/  /' >&2
    if [ "${OCM_FAIL_ON_SKIP:-}" = 1 ] && [ "$status" = 0 ]; then
      echo "test.sh: OCM_FAIL_ON_SKIP=1: a run that must not skip skipped tests" >&2
      status=1
    fi
  fi
  rm -f "$OCM_SKIP_REPORT"
  exit "$status"
}
trap report_skips EXIT
cargo test --workspace --all-targets "$@"
