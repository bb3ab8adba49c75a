//! The storage conformance suite against the sled backend.

ocm_conformance::storage_suite!(ocm_conformance::backends::sled);
