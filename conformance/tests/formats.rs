//! Every released store format opens, and a newer one is refused untouched. sled: the
//! committed fixtures `fixtures/sled-format-N/` (made by the code of the release that wrote
//! format N, `fixtures/make-sled-fixtures.sh`) are copied and opened with this build; every
//! key, value and revision reads back as their manifests say, at the current revision and at
//! each kept past one, a watch from the compaction revision replays the history, the store
//! takes writes and keeps them across a restart, and a hub serves it. A store marked with a
//! newer format (sled's marker file, etcd's marker key) is refused by `ocm-hub serve` with one
//! line naming both formats and a failing exit status, every file (every etcd key) left as it
//! was.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, ensure};
use bytes::Bytes;
use futures::StreamExt as _;
use ocm_apiserver::serve::server::ETCD_PREFIX;
use ocm_conformance::hub::{Backend, TestHub};
use ocm_storage::{
    Engine, Error, EtcdOptions, EventKind, ListOptions, Preconditions, Revision, SledOptions,
    Storage, Write,
};
use serde_json::Value;

/// `len` pseudo-random lowercase letters from `seed`: the generator's `large`
/// (`fixtures/sled-fixture-generator.rs`), which made the fixtures' large values.
fn large(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            b'a' + (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 59) as u8 % 26
        })
        .collect()
}

/// The ConfigMap stored under `key` (`/registry/core/configmaps/<namespace>/<name>`) with data
/// `v`: the generator's `configmap`, byte for byte.
fn configmap(key: &str, data: &[u8]) -> Bytes {
    let mut parts = key.rsplit('/');
    let (name, namespace) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    let data = String::from_utf8_lossy(data);
    Bytes::from(format!(
        "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"{name}\",\
         \"namespace\":\"{namespace}\"}},\"data\":{{\"v\":\"{data}\"}}}}"
    ))
}

const A: &str = "/registry/core/configmaps/fixture/a";
const B: &str = "/registry/core/configmaps/fixture/b";
const LARGE: &str = "/registry/core/configmaps/fixture/large";

fn fixture(format: u32) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("fixtures/sled-format-{format}"))
}

/// Copies the directory `from` to `to`, files and folders (sled's empty `blobs` folder is not
/// in git; sled makes it again).
fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &to.join(entry.file_name()))?;
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name()))?;
        }
    }
    Ok(())
}

/// One key's write at one revision, as the manifest says.
#[derive(Debug, Clone)]
struct Written {
    key: String,
    /// `None` for a delete.
    value: Option<Bytes>,
}

/// A fixture's manifest: the revisions it wrote, the compaction revision and the last one.
struct Manifest {
    revisions: Vec<(u64, Vec<Written>)>,
    compacted: u64,
    revision: u64,
}

fn manifest(format: u32) -> anyhow::Result<Manifest> {
    let path = fixture(format).join("manifest.json");
    let json: Value = serde_json::from_slice(&std::fs::read(&path)?)?;
    ensure!(json["format"] == format, "{} is format {}", path.display(), json["format"]);
    let number = |v: &Value| v.as_u64().context("a number");
    let mut revisions = Vec::new();
    for entry in json["revisions"].as_array().context("revisions")? {
        let mut writes = Vec::new();
        for w in entry["writes"].as_array().context("writes")? {
            let key = w["key"].as_str().context("key")?.to_owned();
            let value = match &w["value"] {
                Value::Null => None,
                v if v["text"].is_string() => {
                    Some(configmap(&key, v["text"].as_str().unwrap_or_default().as_bytes()))
                }
                v => {
                    let len = usize::try_from(number(&v["large"]["len"])?)?;
                    Some(configmap(&key, &large(number(&v["large"]["seed"])?, len)))
                }
            };
            writes.push(Written { key, value });
        }
        revisions.push((number(&entry["revision"])?, writes));
    }
    Ok(Manifest {
        revisions,
        compacted: number(&json["compacted"])?,
        revision: number(&json["revision"])?,
    })
}

/// A key's state: value, create revision, mod revision.
type State = BTreeMap<String, (Bytes, u64, u64)>;

/// The keys as the manifest left them at `at`.
fn state_at(manifest: &Manifest, at: u64) -> State {
    let mut state = State::new();
    for (revision, writes) in manifest.revisions.iter().filter(|(r, _)| *r <= at) {
        for w in writes {
            match &w.value {
                None => {
                    state.remove(&w.key);
                }
                Some(v) => {
                    let created = state.get(&w.key).map_or(*revision, |s| s.1);
                    state.insert(w.key.clone(), (v.clone(), created, *revision));
                }
            }
        }
    }
    state
}

/// The store of a copied fixture at `path`, keeping its history whatever its age (the default
/// window drops revisions older than 10 minutes, as every fixture's are).
fn options(path: &Path) -> Engine {
    let mut options = SledOptions::new(path);
    options.local.history.max_age = Duration::from_secs(100 * 365 * 24 * 3600);
    Engine::Sled(options)
}

/// What the store lists under `/` at `at` (`None`: now), as a [`State`].
async fn listed(store: &Storage, at: Option<u64>) -> anyhow::Result<State> {
    let options = ListOptions { revision: at.map(Revision), ..Default::default() };
    let page = store.list("/", &options).await?;
    Ok(page
        .items
        .into_iter()
        .map(|kv| (kv.key, (kv.value, kv.create_revision.get(), kv.mod_revision.get())))
        .collect())
}

/// The fixture of `format`, copied, opened and read back, then written to and opened again.
async fn the_fixture_opens_and_works(format: u32) -> anyhow::Result<()> {
    let manifest = manifest(format)?;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("db");
    copy_dir(&fixture(format).join("db"), &path)?;
    let store = Storage::open(options(&path)).await?;
    ensure!(
        store.current_revision().await?.get() == manifest.revision,
        "format {format}: revision"
    );

    // Now, by key and listed; at every kept revision; below them, compacted.
    let now = state_at(&manifest, manifest.revision);
    ensure!(listed(&store, None).await? == now, "format {format}: the keys as they are");
    for (key, (value, created, modified)) in &now {
        let kv = store.get(key).await?;
        ensure!(
            kv.value == *value
                && kv.create_revision.get() == *created
                && kv.mod_revision.get() == *modified,
            "format {format}: {key}"
        );
    }
    ensure!(
        matches!(
            store.get("/registry/core/configmaps/fixture/gone").await,
            Err(Error::NotFound { .. })
        ),
        "format {format}: the deleted key"
    );
    for at in manifest.compacted..=manifest.revision {
        let expected = state_at(&manifest, at);
        ensure!(listed(&store, Some(at)).await? == expected, "format {format}: the keys at {at}");
    }
    let below = listed(&store, Some(manifest.compacted - 1)).await;
    ensure!(
        matches!(below.as_ref().map_err(|e| e.downcast_ref()), Err(Some(Error::Compacted { .. }))),
        "format {format}: a read below the compaction revision: {below:?}"
    );

    // A watch from the compaction revision replays every later write, with its previous value.
    let mut watch = store.watch("/", Revision(manifest.compacted)).await?;
    for (revision, writes) in manifest.revisions.iter().filter(|(r, _)| *r > manifest.compacted) {
        let before = state_at(&manifest, revision - 1);
        let mut writes = writes.clone();
        writes.sort_by(|a, b| a.key.cmp(&b.key));
        for w in writes {
            let event = tokio::time::timeout(Duration::from_secs(10), watch.next())
                .await
                .context("the replay stalled")?
                .context("the replay ended")??;
            let what = format!("format {format}: the event of {} at {revision}", w.key);
            ensure!(event.revision.get() == *revision && event.key == w.key, "{what}: {event:?}");
            match &w.value {
                Some(v) => ensure!(event.kind == EventKind::Put && event.value == *v, "{what}"),
                None => ensure!(event.kind == EventKind::Delete, "{what}"),
            }
            let prev = event.prev.as_ref().map(|kv| (kv.value.clone(), kv.mod_revision.get()));
            let was = before.get(&w.key).map(|(v, _, m)| (v.clone(), *m));
            ensure!(prev == was, "{what}: its previous value");
        }
    }
    drop(watch);

    // It takes writes (a large one too), one of several keys, and keeps them across a restart.
    let a = store.get(A).await?;
    let updated = store.update(A, configmap(A, b"alpha new"), a.mod_revision).await?;
    let new = "/registry/core/configmaps/fixture/new";
    store.create(new, configmap(new, &large(99, 40_000))).await?;
    let big = store.get(LARGE).await?;
    let c2 = "/registry/core/configmaps/fixture/c2";
    let committed = store
        .commit(vec![
            Write::Update {
                key: LARGE.into(),
                value: configmap(LARGE, b"small now"),
                expected: big.mod_revision,
            },
            Write::Create { key: c2.into(), value: configmap(c2, b"in a commit") },
        ])
        .await?;
    store.delete(B, &Preconditions::default()).await?;
    ensure!(committed.revision > updated.mod_revision, "format {format}: revisions go on");
    let written = listed(&store, None).await?;
    drop(store);
    let store = Storage::open(options(&path)).await?;
    ensure!(listed(&store, None).await? == written, "format {format}: the writes after a restart");
    ensure!(
        std::fs::read(path.join("format"))? == b"ocm-storage/sled/3\n",
        "format {format}: marked with this build's format"
    );
    drop(store);

    // A hub serves its ConfigMaps as they are, each at its revision.
    let hub_dir = tempfile::tempdir()?;
    copy_dir(&fixture(format).join("db"), &hub_dir.path().join("db"))?;
    let hub = TestHub::start_on(hub_dir, Backend::Sled).await?;
    let (code, list) =
        hub.call(&hub.http()?, reqwest::Method::GET, "/api/v1/configmaps", None, &[]).await?;
    ensure!(code == 200, "format {format}: a hub lists the fixture's ConfigMaps: {code} {list}");
    let mut served = BTreeMap::new();
    for cm in list["items"].as_array().context("items")? {
        let meta = &cm["metadata"];
        let (ns, name) = (meta["namespace"].as_str(), meta["name"].as_str());
        let key = format!("/registry/core/configmaps/{}/{}", ns.unwrap_or(""), name.unwrap_or(""));
        if now.contains_key(&key) {
            let rv: u64 = meta["resourceVersion"].as_str().context("rv")?.parse()?;
            served.insert(key, (cm["data"]["v"].as_str().unwrap_or_default().to_owned(), rv));
        }
    }
    let expected: BTreeMap<String, (String, u64)> = now
        .iter()
        .map(|(key, (value, _, modified))| {
            let stored: Value = serde_json::from_slice(value).unwrap_or_default();
            let data = stored["data"]["v"].as_str().unwrap_or_default().to_owned();
            (key.clone(), (data, *modified))
        })
        .collect();
    ensure!(served == expected, "format {format}: the hub serves the fixture's ConfigMaps");
    hub.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn format_1_opens_and_works() -> anyhow::Result<()> {
    the_fixture_opens_and_works(1).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn format_2_opens_and_works() -> anyhow::Result<()> {
    the_fixture_opens_and_works(2).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn format_3_opens_and_works() -> anyhow::Result<()> {
    the_fixture_opens_and_works(3).await
}

/// Every file under `dir` and its bytes.
fn files(dir: &Path) -> anyhow::Result<BTreeMap<PathBuf, Vec<u8>>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            out.extend(files(&path)?);
        } else {
            out.insert(path.clone(), std::fs::read(&path)?);
        }
    }
    Ok(out)
}

/// `ocm-hub serve` on a data dir whose store is marked with a newer format (the format-3
/// fixture, marked 99 beside the tree as a newer release marks it) exits with a failing status
/// and one line naming both formats, and leaves every file of the data dir as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_format_is_refused_by_the_hub_and_left_untouched() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    copy_dir(&fixture(3).join("db"), &dir.path().join("db"))?;
    std::fs::write(dir.path().join("db/format"), "ocm-storage/sled/99\n")?;
    let before = files(dir.path())?;
    let data_dir = dir.path().to_string_lossy().into_owned();
    let (status, stderr) = serve_until_exit(&["--data-dir", &data_dir]).await?;
    ensure!(!status.success(), "ocm-hub serve exited {status:?}: {stderr}");
    let refusal: Vec<&str> = stderr.lines().filter(|l| l.contains("format 99")).collect();
    ensure!(refusal.len() == 1, "one line names the store's format 99: {stderr}");
    ensure!(refusal[0].contains("format 3"), "the line names this build's format 3: {stderr}");
    ensure!(files(dir.path())? == before, "a refused store's data dir changed");
    Ok(())
}

/// Runs `ocm-hub serve` with `args` until it exits, waiting at most 60 s: its exit status and
/// stderr.
async fn serve_until_exit(args: &[&str]) -> anyhow::Result<(std::process::ExitStatus, String)> {
    let hub = ocm_conformance::programs::ocm_hub()?;
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(&hub)
            .args(["serve", "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0"])
            .args(args)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .context("ocm-hub serve on a newer store did not exit within 60 s")??;
    Ok((out.status, String::from_utf8_lossy(&out.stderr).into_owned()))
}

/// An etcd store records no format of its own (format 1 stores the contract's keys as they
/// are): this build opens one, writing no marker. One a newer release marked
/// (`<prefix>#meta/format`) is refused, by the store and by `ocm-hub serve`, with one line
/// naming both formats, and nothing is written to etcd (its revision stays).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_store_of_a_newer_format_is_refused_and_left_untouched() -> anyhow::Result<()> {
    if ocm_conformance::etcd::skip("an_etcd_store_of_a_newer_format_is_refused_and_left_untouched")
    {
        return Ok(());
    }
    let etcd = tokio::task::spawn_blocking(ocm_conformance::etcd::EtcdServer::start).await??;
    let endpoints = vec![etcd.endpoint.clone()];
    let options = |prefix: &str| Engine::Etcd(EtcdOptions::new(endpoints.clone(), prefix));
    let store = Storage::open(options("/formats")).await?;
    store.create("/k", "kept").await?;
    drop(store);
    // The markers, as keys of the stores `<prefix>#meta`.
    let meta = Storage::open(options("/formats#meta")).await?;
    let hub_meta = Storage::open(options(&format!("{ETCD_PREFIX}#meta"))).await?;
    ensure!(meta.try_get("/format").await?.is_none(), "this build writes no marker");

    meta.create("/format", "ocm-storage/etcd/7").await?;
    let before = meta.current_revision().await?;
    let refused = Storage::open(options("/formats")).await;
    let Err(err) = refused else { anyhow::bail!("a store of a newer format opened") };
    ensure!(matches!(err, Error::NewerFormat { found: 7, supported: 1 }), "{err:?}");
    ensure!(!err.to_string().contains('\n'), "one line: {err}");
    ensure!(meta.current_revision().await? == before, "etcd was written to");

    // The hub's own store, marked likewise.
    hub_meta.create("/format", "ocm-storage/etcd/7").await?;
    let before = meta.current_revision().await?;
    let dir = tempfile::tempdir()?;
    let data_dir = dir.path().to_string_lossy().into_owned();
    let (status, stderr) = serve_until_exit(&[
        "--data-dir",
        &data_dir,
        "--storage",
        "etcd",
        "--etcd-endpoints",
        &etcd.endpoint,
    ])
    .await?;
    ensure!(!status.success(), "ocm-hub serve exited {status:?}: {stderr}");
    let refusal: Vec<&str> = stderr.lines().filter(|l| l.contains("format 7")).collect();
    ensure!(refusal.len() == 1, "one line names the store's format 7: {stderr}");
    ensure!(refusal[0].contains("format 1"), "the line names this build's format 1: {stderr}");
    ensure!(meta.current_revision().await? == before, "the hub wrote to etcd");
    Ok(())
}
