//! Black-box suites and harnesses: the storage conformance suite run per backend, the backends
//! opened fresh for tests, and a real etcd started for tests and benchmarks.
//!
//! * [`storage_suite`]: one function per behaviour of the `ocm-storage` contract; the
//!   `storage_suite!` macro turns them into tests for one backend (`tests/storage_*.rs`).
//! * [`restore_suite`]: the suite's restore behaviours (`Storage::restore`), per backend.
//! * [`backends`]: fresh memory, sled and etcd stores for tests, each with an empty target of
//!   its backend to restore into.
//! * [`data`]: incompressible test data, the same in every process.
//! * [`etcd`]: Debian's `etcd` on free loopback ports with a temporary data dir.
//! * [`hub`]: a real hub on a free port over real TLS, with reqwest and kube clients.
//! * [`replicas`]: hub replicas as `ocm-hub serve` processes over one etcd cluster.
//! * [`simfleet`]: a simulated fleet over REST (accepted, Available clusters, their Leases
//!   renewed) for the benchmarks that need clusters but no agents.
//! * [`fidelity`]: OCM objects checked against the real CRD schemas; published OpenAPI schemas
//!   compared with them, against the explained-differences file.
//! * [`kubectl`]: the real kubectl run against a test hub; [`programs`] finds such programs.
//! * [`flood`]: the HTTP/2 rapid-reset flood and a well-behaved client served beside it.
//! * [`tmpfs`]: a small filesystem of a test's own, filled and freed (a full disk on demand).
//! * [`skip`]: the one way a test skips (a run told to do without etcd, kubectl or promtool):
//!   a `SKIPPED` line on stderr and in the file `scripts/test.sh` counts.
//!
//! Reliability tests live in `tests/` (model-based, crash-kill, watch stress); the storage
//! benchmark is the `storage-bench` binary.

pub mod backends;
pub mod browser;
pub mod cloudevents;
pub mod csr;
pub mod data;
pub mod etcd;
pub mod fidelity;
pub mod fleet;
pub mod flood;
pub mod hub;
pub mod kubectl;
pub mod load;
pub mod netns;
pub mod ports;
pub mod programs;
pub mod prom;
pub mod replicas;
pub mod restore_suite;
pub mod simfleet;
pub mod skip;
pub mod storage_suite;
pub mod tmpfs;
