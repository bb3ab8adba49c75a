//! Backup and restore end to end (issue 33): `ocm-hub backup` run against a hub while a writer
//! keeps writing (the file is one consistent point), restored with `ocm-hub restore` into sled
//! and into etcd (from either backend) and served; a restored hub on the original's addresses
//! serving a real klusterlet that joined the original, without a new join; the stream
//! authorized as a non-resource URL; the file private; damaged, truncated and misdirected
//! restores refused with one line and exit status 2.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, ensure};
use bytes::Bytes;
use futures::StreamExt as _;
use ocm_apiserver::machinery::backup::{Frame, HEADER_BYTES, Header};
use ocm_apiserver::machinery::scheme::Profile;
use ocm_apiserver::serve::server::StorageChoice;
use ocm_conformance::etcd::EtcdServer;
use ocm_conformance::hub::{Backend, TestHub, eventually};
use ocm_conformance::programs;
use reqwest::Method;
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const MCL: &str = "/apis/cluster.open-cluster-management.io/v1/managedclusters";
const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
const WAIT: Duration = Duration::from_secs(60);
/// The `--bump-revision` the restores here use (the default works as well; a smaller one keeps
/// the figures readable in failures).
const BUMP: u64 = 1_000_000;

/// What an `ocm-hub` client command did: its exit status, stdout and stderr.
struct Ran {
    code: i32,
    out: String,
    err: String,
}

async fn ocm_hub(args: &[&str]) -> anyhow::Result<Ran> {
    let out = tokio::process::Command::new(programs::ocm_hub()?)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await?;
    Ok(Ran {
        code: out.status.code().unwrap_or(-1),
        out: String::from_utf8_lossy(&out.stdout).into_owned(),
        err: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

fn path_arg(p: &Path) -> String {
    p.display().to_string()
}

/// `ocm-hub backup --to FILE --data-dir DIR`, which must succeed; what it printed.
async fn backup(hub: &TestHub, to: &Path) -> anyhow::Result<String> {
    let (to, dir) = (path_arg(to), path_arg(hub.path()));
    let ran = ocm_hub(&["backup", "--to", &to, "--data-dir", &dir]).await?;
    ensure!(ran.code == 0, "ocm-hub backup exited {}: {}{}", ran.code, ran.out, ran.err);
    Ok(ran.out)
}

/// `ocm-hub restore` of `from` into `dir`, on sled or (given its endpoint) etcd.
async fn restore(from: &Path, dir: &Path, etcd: Option<&str>) -> anyhow::Result<Ran> {
    let (from, dir, bump) = (path_arg(from), path_arg(dir), BUMP.to_string());
    let mut args = vec!["restore", "--from", &from, "--data-dir", &dir, "--bump-revision", &bump];
    if let Some(endpoint) = etcd {
        args.extend(["--storage", "etcd", "--etcd-endpoints", endpoint]);
    }
    ocm_hub(&args).await
}

/// A backup file read with the format's own decoder: header, keys (key, revision, value) and
/// identity files (name, mode).
struct BackupFile {
    header: Header,
    keys: Vec<(String, u64, Bytes)>,
    files: Vec<(String, u32)>,
}

fn read_backup(path: &Path) -> anyhow::Result<BackupFile> {
    let bytes = Bytes::from(std::fs::read(path)?);
    let header = Header::decode(&bytes[..HEADER_BYTES])?;
    let (mut keys, mut files) = (Vec::new(), Vec::new());
    let mut at = HEADER_BYTES;
    loop {
        let head: [u8; 5] = bytes[at..at + 5].try_into()?;
        let len = Frame::payload_len(&head, at as u64)?;
        let frame = Frame::decode(head[0], bytes.slice(at + 5..at + 5 + len), at as u64)?;
        at += 5 + len;
        match frame {
            Frame::Key { key, revision, value } => keys.push((key, revision, value)),
            Frame::File { name, mode, .. } => files.push((name, mode)),
            Frame::End(end) => {
                ensure!(end.objects == keys.len() as u64 && at == bytes.len(), "the end frame");
                return Ok(BackupFile { header, keys, files });
            }
            other => anyhow::bail!("unexpected frame {other:?}"),
        }
    }
}

#[cfg(unix)]
fn mode(path: &Path) -> anyhow::Result<u32> {
    use std::os::unix::fs::PermissionsExt as _;
    Ok(std::fs::metadata(path)?.permissions().mode() & 0o777)
}

/// The ConfigMaps of `default` as name → (data.v, resourceVersion), read from `hub` over REST,
/// with the list's resourceVersion.
async fn configmaps(hub: &TestHub) -> anyhow::Result<(BTreeMap<String, (String, u64)>, u64)> {
    let (code, list) = hub.call(&hub.http()?, Method::GET, CMS, None, &[]).await?;
    ensure!(code == 200, "list: {code} {list}");
    let rv = |v: &Value| v.as_str().and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
    let mut out = BTreeMap::new();
    for item in list["items"].as_array().context("items")? {
        let name = item["metadata"]["name"].as_str().context("name")?.to_owned();
        let v = item["data"]["v"].as_str().unwrap_or_default().to_owned();
        out.insert(name, (v, rv(&item["metadata"]["resourceVersion"])));
    }
    Ok((out, rv(&list["metadata"]["resourceVersion"])))
}

/// One acknowledged write: the ConfigMap, the value it holds from then on, its resourceVersion.
#[derive(Debug, Clone)]
struct Acked {
    name: String,
    value: String,
    rv: u64,
}

/// Writes until `stop` is set: a new ConfigMap `w-<i>`, then the ConfigMap `counter` updated to
/// `i` (compare-and-swap on its last resourceVersion), recording every acknowledged write.
async fn writer(
    hub_url: String,
    http: reqwest::Client,
    acked: Arc<Mutex<Vec<Acked>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> anyhow::Result<()> {
    let created = http
        .post(format!("{hub_url}{CMS}"))
        .json(&json!({"metadata": {"name": "counter"}, "data": {"v": "start"}}))
        .send()
        .await?;
    ensure!(created.status() == 201, "counter: {}", created.status());
    let body: Value = created.json().await?;
    let mut counter_rv = body["metadata"]["resourceVersion"].as_str().context("rv")?.to_owned();
    let mut i = 0u64;
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        let name = format!("w-{i:05}");
        let resp = http
            .post(format!("{hub_url}{CMS}"))
            .json(&json!({"metadata": {"name": name}, "data": {"v": i.to_string()}}))
            .send()
            .await?;
        ensure!(resp.status() == 201, "create {name}: {}", resp.status());
        let body: Value = resp.json().await?;
        let rv = body["metadata"]["resourceVersion"].as_str().context("rv")?.parse()?;
        acked.lock().unwrap().push(Acked { name, value: i.to_string(), rv });
        let update = json!({"metadata": {"name": "counter", "resourceVersion": counter_rv},
                            "data": {"v": i.to_string()}});
        let resp = http.put(format!("{hub_url}{CMS}/counter")).json(&update).send().await?;
        ensure!(resp.status() == 200, "update counter: {}", resp.status());
        let body: Value = resp.json().await?;
        counter_rv = body["metadata"]["resourceVersion"].as_str().context("rv")?.to_owned();
        let rv = counter_rv.parse()?;
        acked.lock().unwrap().push(Acked { name: "counter".into(), value: i.to_string(), rv });
        i += 1;
    }
    Ok(())
}

/// What the store held at revision `at`, by the acknowledged writes (each name's last one at or
/// below it), with the preloaded ConfigMaps.
fn model_at(
    preloaded: &BTreeMap<String, String>,
    acked: &[Acked],
    at: u64,
) -> BTreeMap<String, String> {
    let mut model = preloaded.clone();
    for a in acked.iter().filter(|a| a.rv <= at) {
        model.insert(a.name.clone(), a.value.clone());
    }
    model
}

/// Creates `n` ConfigMaps `pre-<i>` (a KiB of data each), 16 at a time.
async fn preload(hub: &TestHub, n: usize) -> anyhow::Result<BTreeMap<String, String>> {
    let http = hub.http()?;
    let filler = "x".repeat(1024);
    let results: Vec<anyhow::Result<(String, String)>> = futures::stream::iter(0..n)
        .map(|i| {
            let (http, url, filler) = (http.clone(), hub.url.clone(), filler.clone());
            async move {
                let name = format!("pre-{i:05}");
                let value = format!("p{i}");
                let body =
                    json!({"metadata": {"name": name}, "data": {"v": value, "filler": filler}});
                let resp = http.post(format!("{url}{CMS}")).json(&body).send().await?;
                ensure!(resp.status() == 201, "preload {name}: {}", resp.status());
                Ok((name, value))
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    results.into_iter().collect()
}

/// A backup taken from `hub` while a writer keeps writing: the file, what the writer had
/// acknowledged by the end, and the preloaded ConfigMaps.
async fn backup_during_writes(
    hub: &TestHub,
    file: &Path,
) -> anyhow::Result<(BackupFile, Vec<Acked>, BTreeMap<String, String>)> {
    let preloaded = preload(hub, 1500).await?;
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writing =
        tokio::spawn(writer(hub.url.clone(), hub.http()?, Arc::clone(&acked), Arc::clone(&stop)));
    let count = |acked: &Arc<Mutex<Vec<Acked>>>| acked.lock().unwrap().len();
    eventually("the writer's first writes", WAIT, || async {
        Ok((count(&acked) >= 20).then_some(()))
    })
    .await?;
    let said = backup(hub, file).await?;
    // Writes acknowledged after the backup ended are past its revision.
    let after_backup = count(&acked);
    eventually("writes after the backup", WAIT, || async {
        Ok((count(&acked) >= after_backup + 20).then_some(()))
    })
    .await?;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    writing.await??;
    let read = read_backup(file)?;
    ensure!(
        said.contains(&format!("at revision {}", read.header.revision)),
        "the command says what it wrote: {said}"
    );
    let acked = acked.lock().unwrap().clone();
    // The writer wrote while the backup ran: writes acknowledged before the command ended are
    // past the revision it read at.
    let at = read.header.revision;
    ensure!(
        acked[..after_backup].iter().any(|a| a.rv > at),
        "no write landed while the backup ran (revision {at})"
    );
    Ok((read, acked, preloaded))
}

/// The file is one consistent point: every ConfigMap write acknowledged at or below its
/// revision is in it, with the value and revision of the last such write, and no write above
/// it is; both kinds of write exist, so the check could fail.
fn check_consistent(
    read: &BackupFile,
    acked: &[Acked],
    preloaded: &BTreeMap<String, String>,
) -> anyhow::Result<()> {
    let at = read.header.revision;
    ensure!(acked.iter().any(|a| a.rv <= at), "no acknowledged write at or below {at}");
    ensure!(acked.iter().any(|a| a.rv > at), "no acknowledged write above {at}");
    let prefix = "/registry/core/configmaps/default/";
    let mut in_file: BTreeMap<String, (String, u64)> = BTreeMap::new();
    for (key, revision, value) in &read.keys {
        let Some(name) = key.strip_prefix(prefix) else { continue };
        let obj: Value = serde_json::from_slice(value)?;
        let v = obj["data"]["v"].as_str().unwrap_or_default().to_owned();
        ensure!(*revision <= at, "{key} at revision {revision}, past the backup's {at}");
        in_file.insert(name.to_owned(), (v, *revision));
    }
    let model = model_at(preloaded, acked, at);
    let file_values: BTreeMap<String, String> =
        in_file.iter().map(|(k, (v, _))| (k.clone(), v.clone())).collect();
    let missing: Vec<&String> = model.keys().filter(|k| !file_values.contains_key(*k)).collect();
    let extra: Vec<&String> = file_values.keys().filter(|k| !model.contains_key(*k)).collect();
    ensure!(missing.is_empty() && extra.is_empty(), "missing {missing:?}, extra {extra:?} at {at}");
    ensure!(model == file_values, "the file's values are not the store's at {at}");
    for a in acked.iter().filter(|a| a.rv <= at) {
        let last = acked.iter().filter(|b| b.name == a.name && b.rv <= at).map(|b| b.rv).max();
        if last == Some(a.rv) {
            ensure!(
                in_file[&a.name].1 == a.rv,
                "{} at {} in the file, acked at {}",
                a.name,
                in_file[&a.name].1,
                a.rv
            );
        }
    }
    Ok(())
}

/// A hub served from a restored data dir holds exactly the backup's ConfigMaps, every one at a
/// resourceVersion past the backup's revision and the bump; a watch from the backup's revision
/// is 410 Expired, one from the restored list's works.
async fn check_restored_hub(
    hub: &TestHub,
    expected: &BTreeMap<String, String>,
    backup_revision: u64,
) -> anyhow::Result<()> {
    let (got, list_rv) = configmaps(hub).await?;
    let values: BTreeMap<String, String> =
        got.iter().map(|(k, (v, _))| (k.clone(), v.clone())).collect();
    ensure!(&values == expected, "the restored ConfigMaps differ from the backup's");
    let floor = backup_revision + BUMP;
    ensure!(got.values().all(|(_, rv)| *rv > floor), "a resourceVersion at or below {floor}");
    ensure!(list_rv > floor, "listed at {list_rv}");
    let http = hub.http()?;
    let old =
        format!("{}{CMS}?watch=1&resourceVersion={backup_revision}&timeoutSeconds=5", hub.url);
    let text = http.get(old).send().await?.text().await?;
    ensure!(
        text.contains("\"code\":410") && text.contains("Expired"),
        "a watch from {backup_revision}: {text}"
    );
    let url = format!("{}{CMS}?watch=1&resourceVersion={list_rv}&timeoutSeconds=10", hub.url);
    let watching = tokio::spawn(http.get(url).send());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (code, made) = hub
        .call(&http, Method::POST, CMS, Some(&json!({"metadata": {"name": "after-restore"}})), &[])
        .await?;
    ensure!(code == 201, "a write to the restored hub: {code} {made}");
    let rv: u64 = made["metadata"]["resourceVersion"].as_str().context("rv")?.parse()?;
    ensure!(rv > list_rv, "the new write's resourceVersion {rv} after {list_rv}");
    let text = watching.await??.text().await?;
    ensure!(text.contains("\"ADDED\"") && text.contains("after-restore"), "the watch saw: {text}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_during_writes_is_one_point_and_restores_into_sled_and_etcd() -> anyhow::Result<()>
{
    let hub = TestHub::start(Backend::Sled).await?;
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("hub.backup");
    let (read, acked, preloaded) = backup_during_writes(&hub, &file).await?;
    #[cfg(unix)]
    ensure!(mode(&file)? == 0o600, "the backup's mode is {:o}", mode(&file)?);
    ensure!(read.header.backend == "sled", "{:?}", read.header);
    let names: Vec<&str> = read.files.iter().map(|(n, _)| n.as_str()).collect();
    for needed in ["ca.crt", "ca.key", "sa.key"] {
        ensure!(names.contains(&needed), "the identity holds {needed}: {names:?}");
    }
    ensure!(
        std::fs::read_dir(dir.path())?.count() == 1,
        "nothing but the backup is left beside it (no partial file)"
    );
    check_consistent(&read, &acked, &preloaded)?;
    hub.stop().await;
    let expected = model_at(&preloaded, &acked, read.header.revision);

    // Into sled.
    let sled_dir = tempfile::tempdir()?;
    let ran = restore(&file, sled_dir.path(), None).await?;
    ensure!(ran.code == 0, "restore into sled: {}{}", ran.out, ran.err);
    ensure!(ran.out.contains(&format!("restored {} objects", read.keys.len())), "{}", ran.out);
    #[cfg(unix)]
    ensure!(mode(&sled_dir.path().join("pki/ca.key"))? == 0o600, "the CA key stays private");
    let restored = TestHub::start_restored(sled_dir, StorageChoice::Sled, None, |_| {}).await?;
    check_restored_hub(&restored, &expected, read.header.revision).await?;
    restored.stop().await;

    // Into etcd: the migration from one machine to several.
    if ocm_conformance::etcd::skip("its restore into etcd") {
        return Ok(());
    }
    let etcd = tokio::task::spawn_blocking(EtcdServer::start).await??;
    let etcd_dir = tempfile::tempdir()?;
    let ran = restore(&file, etcd_dir.path(), Some(&etcd.endpoint)).await?;
    ensure!(ran.code == 0, "restore into etcd: {}{}", ran.out, ran.err);
    let endpoints = vec![etcd.endpoint.clone()];
    let restored =
        TestHub::start_restored(etcd_dir, StorageChoice::Etcd(endpoints), Some(etcd), |_| {})
            .await?;
    check_restored_hub(&restored, &expected, read.header.revision).await?;
    restored.stop().await;
    Ok(())
}

/// An etcd hub's backup (the same stream over etcd's revisions) restores into sled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_hub_backs_up_during_writes_and_restores_into_sled() -> anyhow::Result<()> {
    if ocm_conformance::etcd::skip("the whole test") {
        return Ok(());
    }
    let hub = TestHub::start(Backend::Etcd).await?;
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("hub.backup");
    let (read, acked, preloaded) = backup_during_writes(&hub, &file).await?;
    ensure!(read.header.backend == "etcd", "{:?}", read.header);
    check_consistent(&read, &acked, &preloaded)?;
    // The etcd hub led its election, so the backup holds the Lease its leader held.
    let scheme = ocm_apiserver::machinery::scheme::Scheme::new(Profile::Hub);
    let election = ocm_apiserver::controllers::leader::lease_key(&scheme);
    ensure!(read.keys.iter().any(|(k, _, _)| *k == election), "no election Lease backed up");
    hub.stop().await;
    let sled_dir = tempfile::tempdir()?;
    let ran = restore(&file, sled_dir.path(), None).await?;
    ensure!(ran.code == 0, "restore into sled: {}{}", ran.out, ran.err);
    let restored = TestHub::start_restored(sled_dir, StorageChoice::Sled, None, |_| {}).await?;
    let expected = model_at(&preloaded, &acked, read.header.revision);
    check_restored_hub(&restored, &expected, read.header.revision).await?;
    // No replica of the restored hub holds that Lease: the restore leaves it out.
    let lease = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/ocm-hub";
    let (code, body) = restored.call(&restored.http()?, Method::GET, lease, None, &[]).await?;
    ensure!(code == 404, "the old leader's Lease restored: {code} {body}");
    restored.stop().await;
    Ok(())
}

/// Only an admin (or a user granted `get` on the URL) may read the stream; a damaged, a
/// truncated or a foreign file is refused before anything is made, with one line and exit
/// status 2, as is a restore into a data dir or etcd prefix that holds anything, and a backup
/// whose --data-dir is no hub's. A failed backup leaves no file behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backups_are_admin_only_and_bad_restores_are_refused_in_one_line() -> anyhow::Result<()> {
    let hub = TestHub::start(Backend::Memory).await?;
    let path = ocm_apiserver::machinery::backup::PATH;
    let (code, _) = hub.call(&hub.anonymous()?, Method::GET, path, None, &[]).await?;
    ensure!(code == 401, "anonymous: {code}");
    let alice = hub.http_as("alice", None)?;
    let (code, body) = hub.call(&alice, Method::GET, path, None, &[]).await?;
    ensure!(
        code == 403 && body["message"].as_str().unwrap_or_default().contains(path),
        "alice: {code} {body}"
    );
    let monitor = hub.http_as("prometheus", Some("system:monitoring"))?;
    let (code, _) = hub.call(&monitor, Method::GET, path, None, &[]).await?;
    ensure!(code == 403, "monitoring may scrape, not back up: {code}");
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "backup"}, "rules": [{"verbs": ["get"], "nonResourceURLs": [path]}]});
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "backup"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "backup"},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}]});
    hub.create_rbac([role, binding]).await?;
    eventually("alice may back up", Duration::from_secs(10), || async {
        let resp = alice.get(format!("{}{path}", hub.url)).send().await?;
        Ok((resp.status() == 200
            && resp.headers()[reqwest::header::CONTENT_TYPE]
                == ocm_apiserver::machinery::backup::CONTENT_TYPE)
            .then_some(()))
    })
    .await?;

    let dir = tempfile::tempdir()?;
    let file = dir.path().join("ok.backup");
    backup(&hub, &file).await?;
    let bytes = std::fs::read(&file)?;
    let one_line = |ran: &Ran, what: &str, says: &str| -> anyhow::Result<()> {
        ensure!(ran.code == 2, "{what}: exit {} ({}{})", ran.code, ran.out, ran.err);
        ensure!(ran.err.lines().count() == 1 && ran.err.contains(says), "{what}: {:?}", ran.err);
        Ok(())
    };
    let target = dir.path().join("restored");
    let truncated = dir.path().join("truncated.backup");
    std::fs::write(&truncated, &bytes[..bytes.len() - 100])?;
    one_line(&restore(&truncated, &target, None).await?, "a truncated file", "truncated")?;
    let damaged = dir.path().join("damaged.backup");
    let mut flipped = bytes.clone();
    let middle = HEADER_BYTES + (bytes.len() - HEADER_BYTES) / 2;
    flipped[middle] ^= 0x20;
    std::fs::write(&damaged, &flipped)?;
    one_line(&restore(&damaged, &target, None).await?, "a damaged file", "damaged")?;
    let foreign = dir.path().join("foreign.backup");
    std::fs::write(&foreign, b"not a backup at all\n")?;
    one_line(&restore(&foreign, &target, None).await?, "another file", "not an ocm-hub backup")?;
    ensure!(!target.exists(), "a refused restore made {}", target.display());

    std::fs::create_dir(&target)?;
    std::fs::write(target.join("something"), b"x")?;
    one_line(&restore(&file, &target, None).await?, "a non-empty dir", "is not empty")?;
    ensure!(std::fs::read(target.join("something"))? == b"x", "the dir's contents untouched");

    let nowhere = tempfile::tempdir()?;
    let (to, from) = (path_arg(&dir.path().join("x.backup")), path_arg(nowhere.path()));
    let ran = ocm_hub(&["backup", "--to", &to, "--data-dir", &from]).await?;
    one_line(&ran, "a data dir without a hub", "holds no hub CA")?;

    // A hub that is not there: the command fails and leaves nothing.
    let copy = tempfile::tempdir()?;
    std::fs::copy(hub.path().join("admin.kubeconfig"), copy.path().join("admin.kubeconfig"))?;
    std::fs::create_dir(copy.path().join("pki"))?;
    for entry in std::fs::read_dir(hub.path().join("pki"))? {
        let entry = entry?;
        std::fs::copy(entry.path(), copy.path().join("pki").join(entry.file_name()))?;
    }
    hub.stop().await;
    let gone = dir.path().join("gone.backup");
    let (to, from) = (path_arg(&gone), path_arg(copy.path()));
    let ran = ocm_hub(&["backup", "--to", &to, "--data-dir", &from]).await?;
    ensure!(
        ran.code != 0 && ran.err.lines().count() == 1,
        "a stopped hub: {} {:?}",
        ran.code,
        ran.err
    );
    let left: Vec<PathBuf> =
        std::fs::read_dir(dir.path())?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    ensure!(!left.iter().any(|p| p.to_string_lossy().contains("gone")), "left behind: {left:?}");

    // etcd: a prefix that holds anything is refused, and left as it was.
    if ocm_conformance::etcd::skip("its etcd refusal") {
        return Ok(());
    }
    let etcd = tokio::task::spawn_blocking(EtcdServer::start).await??;
    let first = tempfile::tempdir()?;
    let ran = restore(&file, first.path(), Some(&etcd.endpoint)).await?;
    ensure!(ran.code == 0, "the first restore into etcd: {}{}", ran.out, ran.err);
    let second = tempfile::tempdir()?;
    let ran = restore(&file, second.path(), Some(&etcd.endpoint)).await?;
    one_line(&ran, "a non-empty etcd prefix", "is not empty")?;
    ensure!(
        std::fs::read_dir(second.path())?.next().is_none(),
        "the refused restore's data dir stays empty"
    );
    let restored = TestHub::start_restored(
        first,
        StorageChoice::Etcd(vec![etcd.endpoint.clone()]),
        Some(etcd),
        |_| {},
    )
    .await?;
    let (cms, _) = configmaps(&restored).await?;
    ensure!(cms.is_empty(), "the first restore is intact: {cms:?}");
    let (code, _) = restored
        .call(&restored.http()?, Method::GET, "/api/v1/namespaces/default", None, &[])
        .await?;
    ensure!(code == 200, "the restored etcd hub serves: {code}");
    restored.stop().await;
    Ok(())
}

/// A `klusterlet` process and its output (stderr), for failures.
struct Agent {
    _child: tokio::process::Child,
    log: PathBuf,
}

impl Agent {
    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

async fn status_of(hub: &TestHub, name: &str, condition: &str) -> anyhow::Result<Option<String>> {
    let (code, mc) =
        hub.call(&hub.http()?, Method::GET, &format!("{MCL}/{name}"), None, &[]).await?;
    if code != 200 {
        return Ok(None);
    }
    let found = mc.pointer("/status/conditions").and_then(Value::as_array).and_then(|c| {
        c.iter()
            .find(|c| c["type"] == condition)
            .and_then(|c| c["status"].as_str().map(str::to_owned))
    });
    Ok(found)
}

async fn csr_count(hub: &TestHub) -> anyhow::Result<usize> {
    let (code, list) = hub.call(&hub.http()?, Method::GET, CSRS, None, &[]).await?;
    ensure!(code == 200, "csrs: {code}");
    Ok(list["items"].as_array().map_or(0, Vec::len))
}

/// Sends a ManifestWork of one ConfigMap to `c1` and waits for the ConfigMap on the cluster.
async fn work_reaches(
    hub: &TestHub,
    cluster: &TestHub,
    name: &str,
    agent: &Agent,
) -> anyhow::Result<()> {
    let works = "/apis/work.open-cluster-management.io/v1/namespaces/c1/manifestworks";
    let work = json!({"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": name, "namespace": "c1"},
        "spec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": {"from": name}}]}}});
    let (code, body) = hub.call(&hub.http()?, Method::POST, works, Some(&work), &[]).await?;
    ensure!(code == 201, "create work {name}: {code} {body}");
    let path = format!("/api/v1/namespaces/default/configmaps/{name}");
    eventually(&format!("{name}'s ConfigMap on c1"), WAIT, || async {
        let (code, _) = cluster.call(&cluster.http()?, Method::GET, &path, None, &[]).await?;
        Ok((code == 200).then_some(()))
    })
    .await
    .with_context(|| agent.output())
}

/// The done criterion: a cluster joined to a hub keeps working, without joining again, with a
/// hub restored from that hub's backup and served on its addresses (`etcd`: the restore goes
/// into etcd, the move from one machine to several).
async fn restored_hub_serves_joined_agents(etcd: Option<EtcdServer>) -> anyhow::Result<()> {
    let hub = TestHub::start_with_controllers(Backend::Sled).await?;
    let http = hub.http()?;
    let cluster = TestHub::start_with(Backend::Memory, |c| c.profile = Profile::Cluster).await?;
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}});
    let (code, _) =
        cluster.call(&cluster.http()?, Method::POST, "/api/v1/nodes", Some(&node), &[]).await?;
    ensure!(code == 201, "node: {code}");
    let token =
        ocm_apiserver::cli::admin::token_create(hub.kube().await?, Duration::from_secs(3600))
            .await?;
    let agent_dir = tempfile::tempdir()?;
    let log = agent_dir.path().join("agent.log");
    let child = tokio::process::Command::new(programs::klusterlet()?)
        .args(["join", "--hub", &hub.url, "--token", &token, "--cluster-name", "c1"])
        .arg("--ca-file")
        .arg(hub.path().join("pki/ca.crt"))
        .arg("--data-dir")
        .arg(agent_dir.path().join("state"))
        .arg("--cluster-kubeconfig")
        .arg(cluster.kubeconfig())
        .args(["--cluster-healthcheck-period", "1"])
        .env("RUST_LOG", std::env::var("OCM_AGENT_LOG").unwrap_or_else(|_| "warn".into()))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .kill_on_drop(true)
        .spawn()?;
    let agent = Agent { _child: child, log };
    eventually("c1 registered", WAIT, || async {
        let (code, _) = hub.call(&http, Method::GET, &format!("{MCL}/c1"), None, &[]).await?;
        Ok((code == 200).then_some(()))
    })
    .await
    .with_context(|| agent.output())?;
    let data_dir = path_arg(hub.path());
    let ran = ocm_hub(&["accept", "c1", "--data-dir", &data_dir]).await?;
    ensure!(ran.code == 0, "accept: {}{}", ran.out, ran.err);
    eventually("c1 available", WAIT, || async {
        Ok((status_of(&hub, "c1", "ManagedClusterConditionAvailable").await?.as_deref()
            == Some("True"))
        .then_some(()))
    })
    .await
    .with_context(|| agent.output())?;
    // Renew every second, so renewals against the restored hub show within seconds.
    let patch = json!({"spec": {"leaseDurationSeconds": 1}});
    let headers = [("content-type", "application/merge-patch+json")];
    let (code, _) =
        hub.call(&http, Method::PATCH, &format!("{MCL}/c1"), Some(&patch), &headers).await?;
    ensure!(code == 200, "lease duration: {code}");
    work_reaches(&hub, &cluster, "before-backup", &agent).await?;
    let csrs = csr_count(&hub).await?;

    let dir = tempfile::tempdir()?;
    let file = dir.path().join("hub.backup");
    backup(&hub, &file).await?;
    let (https, grpc) = hub.addresses();
    hub.stop().await;

    let restored_dir = tempfile::tempdir()?;
    let endpoint = etcd.as_ref().map(|e| e.endpoint.clone());
    let ran = restore(&file, restored_dir.path(), endpoint.as_deref()).await?;
    ensure!(ran.code == 0, "restore: {}{}", ran.out, ran.err);
    let storage = match &endpoint {
        Some(endpoint) => StorageChoice::Etcd(vec![endpoint.clone()]),
        None => StorageChoice::Sled,
    };
    let hub = TestHub::start_restored(restored_dir, storage, etcd, |c| {
        c.registration.enabled = true;
        c.listen = https;
        c.grpc_listen = grpc;
    })
    .await?;
    ensure!(hub.join_command.is_none(), "a restored hub is no first start: it prints no join");
    let lease = "/apis/coordination.k8s.io/v1/namespaces/c1/leases/managed-cluster-lease";
    let http = hub.http()?;
    let (code, restored_lease) = hub.call(&http, Method::GET, lease, None, &[]).await?;
    ensure!(code == 200, "the restored Lease: {code}");
    eventually("the agent renews against the restored hub", WAIT, || async {
        let (_, now) = hub.call(&http, Method::GET, lease, None, &[]).await?;
        Ok((now["spec"]["renewTime"] != restored_lease["spec"]["renewTime"]).then_some(()))
    })
    .await
    .with_context(|| agent.output())?;
    eventually("c1 available on the restored hub", WAIT, || async {
        Ok((status_of(&hub, "c1", "ManagedClusterConditionAvailable").await?.as_deref()
            == Some("True"))
        .then_some(()))
    })
    .await
    .with_context(|| agent.output())?;
    work_reaches(&hub, &cluster, "after-restore", &agent).await?;
    ensure!(csr_count(&hub).await? == csrs, "no new join: the agent asked for no new certificate");
    ensure!(
        status_of(&hub, "c1", "ManagedClusterConditionAvailable").await?.as_deref() == Some("True"),
        "c1 stays available"
    );
    hub.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_restored_into_sled_serves_the_agents_joined_to_it() -> anyhow::Result<()> {
    restored_hub_serves_joined_agents(None).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_restored_into_etcd_serves_the_agents_joined_to_it() -> anyhow::Result<()> {
    if ocm_conformance::etcd::skip("the whole test") {
        return Ok(());
    }
    let etcd = tokio::task::spawn_blocking(EtcdServer::start).await??;
    restored_hub_serves_joined_agents(Some(etcd)).await
}
