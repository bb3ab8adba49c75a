//! The storage conformance suite against the memory backend.

ocm_conformance::storage_suite!(ocm_conformance::backends::memory);
