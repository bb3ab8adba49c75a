//! CertificateSigningRequests as a cluster's agent makes them, for the suites that create CSRs
//! as one identity or another: a real PKCS#10 request (the agent library's) for a subject, with
//! the client-auth signer and usages and the cluster-name label.

use serde_json::{Value, json};

/// A client-auth CSR for CN `cn` and Os `orgs`, labelled for cluster `label`, named `name` (or,
/// without one, generated from `<label>-`).
pub fn client_csr(
    name: Option<&str>,
    label: &str,
    cn: &str,
    orgs: &[&str],
) -> anyhow::Result<Value> {
    let orgs: Vec<String> = orgs.iter().map(|o| (*o).to_owned()).collect();
    let (_, pem) = ocm_agent::registration::subject_request(cn, &orgs, None)?;
    use base64::Engine as _;
    let mut metadata = json!({"labels": {"open-cluster-management.io/cluster-name": label}});
    match name {
        Some(name) => metadata["name"] = json!(name),
        None => metadata["generateName"] = json!(format!("{label}-")),
    }
    Ok(json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": metadata,
        "spec": {"signerName": "kubernetes.io/kube-apiserver-client",
                 "usages": ["digital signature", "key encipherment", "client auth"],
                 "request": base64::engine::general_purpose::STANDARD.encode(pem)}}))
}
