//! Opening each storage backend fresh for a test: a memory store, a sled store in a temporary
//! directory, or an etcd backend on a real etcd started for the test; each with an empty target
//! of the same backend to restore into.

use std::any::Any;

use ocm_storage::{Engine, EtcdOptions, LocalOptions, SledOptions, Storage};

use crate::etcd::EtcdServer;

/// A store plus whatever must live as long as it (temporary directory, etcd process).
pub struct TestStore {
    /// The store under test.
    pub storage: Storage,
    /// An empty store of the same backend, not yet opened (another directory; another prefix
    /// of the same etcd), for restores.
    pub restore_target: Engine,
    _keep: Box<dyn Any + Send>,
}

impl TestStore {
    /// Wraps a store, an empty target beside it and the resources both need.
    pub fn new(storage: Storage, restore_target: Engine, keep: impl Any + Send) -> TestStore {
        TestStore { storage, restore_target, _keep: Box::new(keep) }
    }
}

/// A fresh memory store.
pub async fn memory() -> Option<TestStore> {
    memory_with(LocalOptions::default()).await
}

/// A fresh memory store with the given options.
pub async fn memory_with(options: LocalOptions) -> Option<TestStore> {
    let storage = Storage::open(Engine::Memory(options)).await.expect("open memory store");
    Some(TestStore::new(storage, Engine::Memory(options), ()))
}

/// A fresh sled store in a temporary directory.
pub async fn sled() -> Option<TestStore> {
    sled_with(LocalOptions::default()).await
}

/// A fresh sled store with the given options.
pub async fn sled_with(local: LocalOptions) -> Option<TestStore> {
    let dir = tempfile::tempdir().expect("temp dir");
    let options = SledOptions { local, ..SledOptions::new(dir.path().join("store")) };
    let storage = Storage::open(Engine::Sled(options)).await.expect("open sled store");
    let target = SledOptions { local, ..SledOptions::new(dir.path().join("restored")) };
    Some(TestStore::new(storage, Engine::Sled(target), dir))
}

/// A fresh etcd (own process, own data dir) and the etcd backend on it; `None` when the etcd
/// suites were told to skip (reported as the whole test skipped: call it in the test's body).
/// Panics with the reason when etcd cannot be found or started.
pub async fn etcd() -> Option<TestStore> {
    if crate::etcd::skip("the whole test") {
        return None;
    }
    let server = tokio::task::spawn_blocking(EtcdServer::start)
        .await
        .expect("etcd start task")
        .unwrap_or_else(|e| panic!("{e:#}"));
    let options = EtcdOptions::new(vec![server.endpoint.clone()], "/ocm-test");
    let storage = Storage::open(Engine::Etcd(options)).await.expect("open etcd store");
    let target = EtcdOptions::new(vec![server.endpoint.clone()], "/ocm-test-restored");
    Some(TestStore::new(storage, Engine::Etcd(target), server))
}
