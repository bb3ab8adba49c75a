//! The storage conformance suite against the etcd backend.

ocm_conformance::storage_suite!(ocm_conformance::backends::etcd);
