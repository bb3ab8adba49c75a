//! Registration (ocm.md §3.2–§3.3, §3.6): the agent's ManagedCluster, its key and certificate
//! request, waiting for the hub's approval and acceptance, and certificate rotation. The key is
//! generated here (ECDSA P-256) and never leaves the data dir.

use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use ocm_proto::api::cluster::{self as api, v1::ManagedCluster};
use serde::Deserialize as _;
use serde_json::{Value, json};

use crate::error::AgentError;
use crate::hub;

/// OCM's limit: no new request while this many of the cluster's are outstanding.
const MAX_PENDING_CSRS: usize = 10;
/// How long the agent pauses before it looks again at a hub that is away or busy.
pub const POLL: Duration = Duration::from_millis(500);

/// The ManagedCluster API on a hub client.
pub fn clusters(client: kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(api::GROUP, "v1", "ManagedCluster");
    Api::all_with(client, &ApiResource::from_gvk_with_plural(&gvk, "managedclusters"))
}

/// A random agent name (OCM's: five lower-case characters).
pub fn new_agent_name() -> String {
    use rand::Rng as _;
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    (0..5).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char).collect()
}

/// Creates the ManagedCluster if it does not exist (with the bootstrap client). Returns it.
pub async fn ensure_cluster(
    hub: &kube::Client,
    url: &str,
    cluster: &str,
) -> Result<Value, AgentError> {
    let api = clusters(hub.clone());
    if let Some(mc) = api.get_opt(cluster).await.map_err(|e| hub::explain(url, e))? {
        return Ok(serde_json::to_value(mc).unwrap_or_default());
    }
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{}/v1", api::GROUP), "kind": "ManagedCluster",
        "metadata": {"name": cluster},
        "spec": {"hubAcceptsClient": false, "leaseDurationSeconds": 60},
    }))
    .map_err(|e| AgentError::Invalid(e.to_string()))?;
    match api.create(&PostParams::default(), &obj).await {
        Ok(mc) => Ok(serde_json::to_value(mc).unwrap_or_default()),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let mc = api.get(cluster).await.map_err(|e| hub::explain(url, e))?;
            Ok(serde_json::to_value(mc).unwrap_or_default())
        }
        Err(e) => Err(hub::explain(url, e)),
    }
}

/// A new key and the PEM certificate request for `cluster`/`agent`: CN
/// `system:open-cluster-management:<cluster>:<agent>`, O the cluster's group and the
/// managed-clusters group. Returns (key PEM, request PEM).
pub fn new_request(cluster: &str, agent: &str) -> Result<(String, String), AgentError> {
    let orgs = [api::agent_group(cluster), api::GROUP_MANAGED_CLUSTERS.to_owned()];
    subject_request(&api::agent_user(cluster, agent), &orgs, None)
}

/// A new key (ECDSA P-256) and a PEM certificate request for CN `cn`, the Os `orgs` and, if
/// given, one DNS name. Returns (key PEM, request PEM).
pub fn subject_request(
    cn: &str,
    orgs: &[String],
    dns: Option<&str>,
) -> Result<(String, String), AgentError> {
    let invalid = |e: rcgen::Error| AgentError::Invalid(e.to_string());
    let key = rcgen::KeyPair::generate().map_err(invalid)?;
    let mut params = rcgen::CertificateParams::default();
    let mut dn = rcgen::DistinguishedName::new();
    dn.push(rcgen::DnType::CommonName, cn);
    // rcgen keeps one value per attribute type: the second O goes in under its OID, so a
    // request names two Os at most (the hub's signer issues no more).
    match orgs {
        [] => {}
        [one] => dn.push(rcgen::DnType::OrganizationName, one.as_str()),
        [one, two] => {
            dn.push(rcgen::DnType::OrganizationName, one.as_str());
            dn.push(rcgen::DnType::CustomDnType(vec![2, 5, 4, 10]), two.as_str());
        }
        _ => return Err(AgentError::Invalid(format!("{} organizations: at most 2", orgs.len()))),
    }
    params.distinguished_name = dn;
    if let Some(dns) = dns {
        params.subject_alt_names = vec![rcgen::SanType::DnsName(dns.try_into().map_err(invalid)?)];
    }
    let csr = params.serialize_request(&key).and_then(|r| r.pem()).map_err(invalid)?;
    Ok((key.serialize_pem(), csr))
}

/// Creates the cluster's CertificateSigningRequest for `request_pem`; returns its name.
pub async fn create_csr(
    hub: &kube::Client,
    url: &str,
    cluster: &str,
    request_pem: &str,
    expiration: Option<Duration>,
) -> Result<String, AgentError> {
    let api: Api<CertificateSigningRequest> = Api::all(hub.clone());
    let label = format!("{}={cluster}", api::LABEL_CLUSTER_NAME);
    let pending = api
        .list(&ListParams::default().labels(&label))
        .await
        .map_err(|e| hub::explain(url, e))?
        .items
        .into_iter()
        .filter(|c| c.status.as_ref().and_then(|s| s.certificate.as_ref()).is_none())
        .filter(|c| c.status.as_ref().and_then(|s| s.conditions.as_ref()).is_none_or(Vec::is_empty))
        .count();
    if pending >= MAX_PENDING_CSRS {
        return Err(AgentError::Invalid(format!(
            "{pending} certificate requests of {cluster} are still pending on the hub: approve or delete them (`kubectl get csr -l {label}`)"
        )));
    }
    let labels = json!({ api::LABEL_CLUSTER_NAME: cluster });
    let signer = ocm_proto::api::addon::KUBE_APISERVER_CLIENT_SIGNER_NAME;
    create_request(hub, url, &format!("{cluster}-"), labels, signer, request_pem, expiration).await
}

/// Creates a client-certificate CertificateSigningRequest (`generateName`, labels) of `signer`
/// for `request_pem`; returns its name.
pub async fn create_request(
    hub: &kube::Client,
    url: &str,
    generate_name: &str,
    labels: Value,
    signer: &str,
    request_pem: &str,
    expiration: Option<Duration>,
) -> Result<String, AgentError> {
    let api: Api<CertificateSigningRequest> = Api::all(hub.clone());
    let mut spec = json!({
        "request": base64::engine::general_purpose::STANDARD.encode(request_pem),
        "signerName": signer,
        "usages": ["digital signature", "key encipherment", "client auth"],
    });
    if let Some(d) = expiration {
        spec["expirationSeconds"] = json!(d.as_secs());
    }
    let csr: CertificateSigningRequest = serde_json::from_value(json!({
        "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"generateName": generate_name, "labels": labels},
        "spec": spec,
    }))
    .map_err(|e| AgentError::Invalid(e.to_string()))?;
    let created =
        api.create(&PostParams::default(), &csr).await.map_err(|e| hub::explain(url, e))?;
    Ok(created.metadata.name.unwrap_or_default())
}

/// What became of a certificate request.
pub enum CsrState {
    Pending,
    Issued(String),
}

/// Where a request stands: its certificate once issued; an error once denied or failed.
pub fn csr_state(csr: &CertificateSigningRequest) -> Result<CsrState, AgentError> {
    let name = csr.metadata.name.as_deref().unwrap_or_default();
    let Some(status) = &csr.status else { return Ok(CsrState::Pending) };
    for c in status.conditions.iter().flatten() {
        if c.status == "True" && (c.type_ == "Denied" || c.type_ == "Failed") {
            return Err(AgentError::CsrRefused {
                name: name.to_owned(),
                verdict: if c.type_ == "Denied" { "denied" } else { "failed" },
                message: c.message.clone().unwrap_or_default(),
            });
        }
    }
    match &status.certificate {
        Some(cert) if !cert.0.is_empty() => String::from_utf8(cert.0.clone())
            .map(CsrState::Issued)
            .map_err(|_| AgentError::Invalid(format!("certificate of {name} is not PEM"))),
        _ => Ok(CsrState::Pending),
    }
}

/// Waits for the certificate of request `name`: its PEM once issued, an error once refused.
pub async fn issued_certificate(
    hub: &kube::Client,
    url: &str,
    name: &str,
    waiting: impl FnMut(u64),
) -> Result<String, AgentError> {
    let api: Api<CertificateSigningRequest> = Api::all(hub.clone());
    watch_until(api, name, url, waiting, |csr| {
        Ok(match csr_state(csr)? {
            CsrState::Issued(cert) => Some(cert),
            CsrState::Pending => None,
        })
    })
    .await
}

/// Watches object `name` of `api` until `check` yields, as OCM's agent waits on informers: one
/// long-running request (which takes no in-flight seat on the hub), not a request every half
/// second. `waiting` is told every second how long it has waited. A hub that is away or busy is
/// waited out (the watch starts again after a pause); the object missing or deleted, and any
/// other refusal, end the wait with an error.
pub async fn watch_until<K, T>(
    api: Api<K>,
    name: &str,
    url: &str,
    mut waiting: impl FnMut(u64),
    mut check: impl FnMut(&K) -> Result<Option<T>, AgentError>,
) -> Result<T, AgentError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    use futures::StreamExt as _;
    use kube::runtime::watcher::{self, Event};
    // The first list is the latest state (no resourceVersion): an object created a moment ago
    // is in it even if the hub's watch cache has not applied the create yet.
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = std::pin::pin!(watcher::watcher(api, config));
    let start = tokio::time::Instant::now();
    let mut tick = tokio::time::interval_at(start + Duration::from_secs(1), Duration::from_secs(1));
    let mut paused_until = None;
    let mut seen = false;
    let gone = || AgentError::Invalid(format!("{name} is not on the hub (deleted?)"));
    loop {
        let event = tokio::select! {
            e = events.next(), if paused_until.is_none() => e,
            () = tokio::time::sleep_until(paused_until.unwrap_or(start)), if paused_until.is_some() => {
                paused_until = None;
                continue;
            }
            _ = tick.tick() => {
                waiting(start.elapsed().as_secs());
                continue;
            }
        };
        match event {
            Some(Ok(Event::Init)) => seen = false,
            Some(Ok(Event::InitApply(obj) | Event::Apply(obj))) => {
                seen = true;
                if let Some(v) = check(&obj)? {
                    return Ok(v);
                }
            }
            Some(Ok(Event::InitDone)) if !seen => return Err(gone()),
            Some(Ok(Event::InitDone)) => {}
            Some(Ok(Event::Delete(_))) | None => return Err(gone()),
            Some(Err(e)) => {
                let e = match e {
                    watcher::Error::InitialListFailed(e)
                    | watcher::Error::WatchStartFailed(e)
                    | watcher::Error::WatchFailed(e) => hub::explain(url, e),
                    // History gone: the watcher lists again on its own.
                    watcher::Error::WatchError(s) if s.code == 410 => continue,
                    watcher::Error::WatchError(s) => hub::explain(url, kube::Error::Api(s)),
                    e @ watcher::Error::NoResourceVersion => AgentError::Invalid(e.to_string()),
                };
                if !(e.is_unreachable() || e.is_busy()) {
                    return Err(e);
                }
                tracing::debug!(error = %e, "hub away or busy while watching");
                paused_until = Some(tokio::time::Instant::now() + POLL);
            }
        }
    }
}

/// Checks an issued certificate is for `key_pem` and names `cn`; returns its validity
/// (not before, not after) in Unix seconds.
pub fn check_certificate(
    cert_pem: &str,
    key_pem: &str,
    cn: &str,
) -> Result<(i64, i64), AgentError> {
    let bad =
        |why: &str| AgentError::Invalid(format!("the hub issued an unusable certificate: {why}"));
    let der = hub::pem_certificates(cert_pem).into_iter().next().ok_or_else(|| bad("no PEM"))?;
    let (_, cert) = x509_parser::parse_x509_certificate(&der).map_err(|_| bad("not X.509"))?;
    let key = rcgen::KeyPair::from_pem(key_pem).map_err(|_| bad("the key is unreadable"))?;
    if cert.tbs_certificate.subject_pki.subject_public_key.data.as_ref() != key.public_key_raw() {
        return Err(bad("it is not for this agent's key"));
    }
    let names: Vec<&str> =
        cert.subject().iter_common_name().filter_map(|a| a.as_str().ok()).collect();
    if names != [cn] {
        return Err(bad(&format!("it names {names:?}, not {cn:?}")));
    }
    let v = cert.validity();
    Ok((v.not_before.timestamp(), v.not_after.timestamp()))
}

/// Where a cluster stands on the hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acceptance {
    /// Not accepted, and never decided.
    Waiting,
    /// `hubAcceptsClient` is set; the hub has not yet said `HubAcceptedManagedCluster` (it does
    /// within moments).
    Accepting,
    Accepted,
    Denied,
}

/// The acceptance of a ManagedCluster.
pub fn acceptance(mc: &ManagedCluster) -> Acceptance {
    let accepts = mc.spec.as_ref().and_then(|s| s.hub_accepts_client) == Some(true);
    let conditions = mc.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
    let condition =
        ocm_proto::api::meta::find_condition(conditions, api::v1::CONDITION_HUB_ACCEPTED);
    match (accepts, condition.map(|c| c.status.as_str())) {
        (true, Some("True")) => Acceptance::Accepted,
        (true, _) => Acceptance::Accepting,
        (false, Some(_)) => Acceptance::Denied,
        (false, None) => Acceptance::Waiting,
    }
}

/// A ManagedCluster the hub served (through [`clusters`]), typed and as its JSON.
pub fn managed_cluster(obj: &DynamicObject) -> Result<(ManagedCluster, Value), AgentError> {
    let bad = |e: serde_json::Error| {
        AgentError::Invalid(format!(
            "ManagedCluster {}: {e}",
            obj.metadata.name.as_deref().unwrap_or("")
        ))
    };
    let value = serde_json::to_value(obj).map_err(bad)?;
    Ok((ManagedCluster::deserialize(&value).map_err(bad)?, value))
}
