//! The klusterlet agent: registration, heartbeat, work application and status reporting.
//!
//! Not built yet (registration issue). It may depend on `ocm-proto` only, never on the hub or
//! its storage (see `ARCHITECTURE.md`).
