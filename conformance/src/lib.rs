//! Black-box suites and harnesses: the storage suite run per backend, the etcd test harness.
