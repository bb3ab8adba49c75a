//! Faults the hub heals from without a restart. etcd killed for 10 s and started again: the
//! watch cache follows the store again, so writes, consistent lists, a watch left open through
//! the outage and new watches all work within seconds; `/readyz` says the hub is not ready
//! while its store cannot serve, and ready again after. A watch resumed after a restart gets
//! the events it missed.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use ocm_conformance::hub::{Backend, TestHub, eventually};
use reqwest::Method;

fn config_map(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: kube::api::ObjectMeta { name: Some(name.into()), ..Default::default() },
        ..Default::default()
    }
}

async fn readyz(hub: &TestHub) -> anyhow::Result<u16> {
    Ok(hub.call(&hub.anonymous()?, Method::GET, "/readyz", None, &[]).await?.0)
}

/// The names of the objects the watch reports added, until `name` is among them.
async fn added_until(
    events: &mut (impl futures::Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin),
    name: &str,
) -> anyhow::Result<()> {
    while let Some(event) = events.try_next().await? {
        match event {
            WatchEvent::Added(cm) if cm.metadata.name.as_deref() == Some(name) => return Ok(()),
            WatchEvent::Error(e) => anyhow::bail!("the watch ended with {e:?}"),
            _ => {}
        }
    }
    anyhow::bail!("the watch ended before {name} was added")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_outage_heals_without_a_restart() -> anyhow::Result<()> {
    if ocm_conformance::etcd::skip("an_etcd_outage_heals_without_a_restart") {
        return Ok(());
    }
    let mut hub = TestHub::start(Backend::Etcd).await?;
    let cms: Api<ConfigMap> = Api::namespaced(hub.kube().await?, "default");
    cms.create(&PostParams::default(), &config_map("before")).await?;
    ensure!(readyz(&hub).await? == 200, "not ready before the outage");
    let rv = cms.list(&ListParams::default()).await?.metadata.resource_version.context("rv")?;
    let mut open = cms.watch(&WatchParams::default().timeout(290), &rv).await?.boxed();

    let etcd = hub.etcd_server().context("an etcd hub has its etcd")?;
    etcd.stop()?;
    eventually("/readyz failing while etcd is down", Duration::from_secs(10), || async {
        Ok((readyz(&hub).await? == 500).then_some(()))
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(10)).await;
    hub.etcd_server().context("its etcd")?.restart()?;

    // Writes, then a consistent list that sees them (it waits for the watch cache to reach
    // the store's revision: it follows etcd again).
    eventually("a write after etcd's return", Duration::from_secs(20), || async {
        Ok(cms.create(&PostParams::default(), &config_map("after")).await.ok())
    })
    .await?;
    let listed = cms.list(&ListParams::default()).await?;
    let names: Vec<_> = listed.items.iter().filter_map(|c| c.metadata.name.clone()).collect();
    ensure!(names.contains(&"before".into()) && names.contains(&"after".into()), "{names:?}");
    // The watch left open through the outage reports the write.
    tokio::time::timeout(Duration::from_secs(10), added_until(&mut open, "after"))
        .await
        .context("the watch open through the outage saw nothing of the write")??;
    // A new watch from the list reports the next write.
    let rv = listed.metadata.resource_version.context("rv")?;
    let mut fresh = cms.watch(&WatchParams::default().timeout(290), &rv).await?.boxed();
    cms.create(&PostParams::default(), &config_map("later")).await?;
    tokio::time::timeout(Duration::from_secs(10), added_until(&mut fresh, "later"))
        .await
        .context("a new watch saw nothing")??;
    ensure!(readyz(&hub).await? == 200, "not ready after the outage");
    Ok(())
}

/// A watch resumed after a hub restart from a resourceVersion still in the store's history gets
/// the events it missed (the cache starts with the history it reads back), not 410 Gone: a
/// restart costs its watchers no relist.
async fn a_watch_resumes_across_a_restart(backend: Backend) -> anyhow::Result<()> {
    let mut hub = TestHub::start(backend).await?;
    let cms: Api<ConfigMap> = Api::namespaced(hub.kube().await?, "default");
    cms.create(&PostParams::default(), &config_map("seen")).await?;
    let rv = cms.list(&ListParams::default()).await?.metadata.resource_version.context("rv")?;
    cms.create(&PostParams::default(), &config_map("missed")).await?;
    hub.restart().await?;
    let cms: Api<ConfigMap> = Api::namespaced(hub.kube().await?, "default");
    let mut resumed = cms.watch(&WatchParams::default().timeout(290), &rv).await?.boxed();
    tokio::time::timeout(Duration::from_secs(10), added_until(&mut resumed, "missed"))
        .await
        .context("the resumed watch saw nothing")??;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_resumes_across_a_restart_on_sled() -> anyhow::Result<()> {
    a_watch_resumes_across_a_restart(Backend::Sled).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_resumes_across_a_restart_on_etcd() -> anyhow::Result<()> {
    if ocm_conformance::etcd::skip("a_watch_resumes_across_a_restart_on_etcd") {
        return Ok(());
    }
    a_watch_resumes_across_a_restart(Backend::Etcd).await
}
