//! Authentication against a running hub: client certificates (valid, expired, from an unknown
//! CA), bootstrap tokens (valid, wrong, expired, revoked) made by `ocm-hub token create`,
//! service-account tokens from TokenRequest (and forged ones signed with the wrong algorithm,
//! audience, issuer or times), front-proxy headers honoured only from the front-proxy CA, the
//! anonymous paths, TokenReview, and client CA files re-read without a restart.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, ensure};
use base64::Engine as _;
use ocm_apiserver::auth::pki::Pki;
use ocm_apiserver::auth::tokens::TokenAuthority;
use ocm_conformance::hub::{Backend, TestHub, eventually};
use serde_json::{Value, json};

const WHOAMI: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";
const SAS: &str = "/api/v1/namespaces/default/serviceaccounts";

/// Who the hub says `client` is (with extra request headers), or the failing status code.
async fn whoami(
    hub: &TestHub,
    client: &reqwest::Client,
    headers: &[(&str, &str)],
) -> anyhow::Result<Result<Value, u16>> {
    let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let (code, v) = hub.call(client, reqwest::Method::POST, WHOAMI, Some(&body), headers).await?;
    Ok(match code {
        201 => Ok(v["status"]["userInfo"].clone()),
        _ => Err(code),
    })
}

fn unauthorized(r: Result<Value, u16>, what: &str) -> anyhow::Result<()> {
    ensure!(r == Err(401), "{what}: expected 401, got {r:?}");
    Ok(())
}

fn named(r: Result<Value, u16>, user: &str, groups: &[&str]) -> anyhow::Result<()> {
    let info = r.map_err(|code| anyhow::anyhow!("expected {user}, got {code}"))?;
    ensure!(info["username"] == user, "{info}");
    let got: Vec<&str> =
        info["groups"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    ensure!(got == groups, "groups {got:?}, expected {groups:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_and_anonymous() -> anyhow::Result<()> {
    let hub = TestHub::start(Backend::Memory).await?;
    let pki = Pki::open(hub.path())?;
    let (crt, key) = pki.issue_client("alice", Some("team-a"), 1)?;
    named(
        whoami(&hub, &hub.http_with_cert(&crt, &key)?, &[]).await?,
        "alice",
        &["team-a", "system:authenticated"],
    )?;
    // Expired: the handshake succeeds, the request is a 401 (as kube-apiserver answers).
    let now = time::OffsetDateTime::now_utc();
    let (crt, key) = pki.issue_client_between(
        "alice",
        Some("team-a"),
        now - time::Duration::days(2),
        now - time::Duration::days(1),
    )?;
    unauthorized(
        whoami(&hub, &hub.http_with_cert(&crt, &key)?, &[]).await?,
        "expired certificate",
    )?;
    // Signed by a CA the hub does not know, even with the admin's name and group.
    let stranger = tempfile::tempdir()?;
    let other = Pki::load_or_create(stranger.path(), &[])?;
    let (crt, key) = other.issue_client("ocm-admin", Some("system:masters"), 1)?;
    let forged = hub.http_with_cert(&crt, &key)?;
    unauthorized(whoami(&hub, &forged, &[]).await?, "unknown CA")?;
    let (code, _) =
        hub.call(&forged, reqwest::Method::GET, "/api/v1/namespaces", None, &[]).await?;
    ensure!(code == 401, "unknown CA listed namespaces: {code}");
    // Anonymous: only the health and version paths.
    let anon = hub.anonymous()?;
    for path in ["/healthz", "/livez", "/readyz", "/version"] {
        let (code, _) = hub.call(&anon, reqwest::Method::GET, path, None, &[]).await?;
        ensure!(code == 200, "anonymous GET {path}: {code}");
    }
    for path in ["/api", "/apis", "/openapi/v3", "/api/v1/namespaces", "/metrics"] {
        let (code, body) = hub.call(&anon, reqwest::Method::GET, path, None, &[]).await?;
        ensure!(
            code == 401 && body["reason"] == "Unauthorized",
            "anonymous GET {path}: {code} {body}"
        );
    }
    hub.stop().await;
    Ok(())
}

/// Runs `ocm-hub token ...` against the hub; returns (exit code, stdout, stderr).
async fn ocm_hub(args: &[&str], data_dir: &Path) -> anyhow::Result<(i32, String, String)> {
    let out = tokio::process::Command::new(ocm_conformance::programs::ocm_hub()?)
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .output()
        .await?;
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        String::from_utf8_lossy(&out.stderr).trim().to_owned(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_tokens() -> anyhow::Result<()> {
    let hub = TestHub::start(Backend::Memory).await?;
    let dir = hub.path().to_path_buf();
    let (code, token, err) = ocm_hub(&["token", "create", "--ttl", "30m"], &dir).await?;
    ensure!(code == 0, "token create: {code} {err}");
    let (id, secret) = ocm_apiserver::auth::authn::parse_bootstrap_token(&token)
        .with_context(|| format!("not a bootstrap token: {token:?}"))?;
    let me = hub.http_bearer(&token)?;
    // The new Secret reaches the authenticator through the watch cache, a moment after the
    // create was answered.
    let info = eventually("the new token authenticates", Duration::from_secs(5), || async {
        Ok(whoami(&hub, &me, &[]).await?.ok())
    })
    .await?;
    named(
        Ok(info),
        &format!("system:bootstrap:{id}"),
        &["system:bootstrappers", "system:bootstrappers:managedcluster", "system:authenticated"],
    )?;
    // The bootstrap role: create and get ManagedClusters, nothing of Secrets.
    let mcl = json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
                     "metadata": {"name": "c1"}, "spec": {"hubAcceptsClient": false}});
    let path = "/apis/cluster.open-cluster-management.io/v1/managedclusters";
    let (code, body) = hub.call(&me, reqwest::Method::POST, path, Some(&mcl), &[]).await?;
    ensure!(code == 201, "bootstrap create managedcluster: {code} {body}");
    let (code, _) = hub
        .call(&me, reqwest::Method::GET, "/api/v1/namespaces/kube-system/secrets", None, &[])
        .await?;
    ensure!(code == 403, "bootstrap token read secrets: {code}");
    // A wrong secret for the same id, and a token of nobody.
    let wrong = format!("{id}.{}", if secret.starts_with('a') { "b" } else { "a" }.repeat(16));
    unauthorized(whoami(&hub, &hub.http_bearer(&wrong)?, &[]).await?, "wrong secret")?;
    unauthorized(
        whoami(&hub, &hub.http_bearer("zzzzzz.0123456789abcdef")?, &[]).await?,
        "unknown id",
    )?;
    unauthorized(whoami(&hub, &hub.http_bearer("not-a-token")?, &[]).await?, "garbage")?;
    // Listed by id, never with the secret.
    let (code, listed, err) = ocm_hub(&["token", "list"], &dir).await?;
    ensure!(
        code == 0 && listed.contains(id) && !listed.contains(secret),
        "token list: {code} {listed} {err}"
    );
    // An expired token (its Secret says so) stops working. Its twin, created after it and
    // valid, is the control: once the twin authenticates, the cache holds both.
    let admin = hub.http()?;
    let secret_for = |id: &str, expiration: &str| {
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("bootstrap-token-{id}"), "namespace": "kube-system"},
            "type": "bootstrap.kubernetes.io/token",
            "stringData": {"token-id": id, "token-secret": "0123456789abcdef",
                           "expiration": expiration,
                           "usage-bootstrap-authentication": "true",
                           "auth-extra-groups": "system:bootstrappers:managedcluster"}})
    };
    let secrets = "/api/v1/namespaces/kube-system/secrets";
    for (id, expiration) in [("exp001", "2020-01-01T00:00:00Z"), ("liv001", "2099-01-01T00:00:00Z")]
    {
        let body = secret_for(id, expiration);
        let (code, body) =
            hub.call(&admin, reqwest::Method::POST, secrets, Some(&body), &[]).await?;
        ensure!(code == 201, "{code} {body}");
    }
    let twin = hub.http_bearer("liv001.0123456789abcdef")?;
    eventually("the valid twin authenticates", Duration::from_secs(5), || async {
        Ok(whoami(&hub, &twin, &[]).await?.ok())
    })
    .await?;
    unauthorized(
        whoami(&hub, &hub.http_bearer("exp001.0123456789abcdef")?, &[]).await?,
        "expired token",
    )?;
    // Revoked: refused on the very next request.
    let (code, out, err) = ocm_hub(&["token", "revoke", &token], &dir).await?;
    ensure!(code == 0, "token revoke: {code} {out} {err}");
    // A delete is answered once the watch cache has seen it: no waiting here.
    unauthorized(whoami(&hub, &me, &[]).await?, "revoked token")?;
    // Bad input to the commands: exit 2 with one line.
    for args in [
        &["token", "create", "--ttl", "0s"][..],
        &["token", "create", "--ttl", "1000h"],
        &["token", "create", "--ttl", "soon"],
        &["token", "revoke", "NOT-AN-ID"],
    ] {
        let (code, _, err) = ocm_hub(args, &dir).await?;
        ensure!(code == 2 && err.lines().count() == 1, "{args:?}: {code} {err}");
    }
    hub.stop().await;
    Ok(())
}

/// A TokenRequest for `name` (with `spec`), answered by the hub.
async fn token_request(hub: &TestHub, name: &str, spec: Value) -> anyhow::Result<(u16, Value)> {
    let body =
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec});
    hub.call(&hub.http()?, reqwest::Method::POST, &format!("{SAS}/{name}/token"), Some(&body), &[])
        .await
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_account_tokens() -> anyhow::Result<()> {
    let hub = TestHub::start(Backend::Memory).await?;
    let admin = hub.http()?;
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}});
    let (code, created) = hub.call(&admin, reqwest::Method::POST, SAS, Some(&sa), &[]).await?;
    ensure!(code == 201, "{code} {created}");
    let (code, answer) = token_request(&hub, "robot", json!({"expirationSeconds": 3600})).await?;
    ensure!(code == 201 && answer["kind"] == "TokenRequest", "{code} {answer}");
    let token = answer["status"]["token"].as_str().context("no token")?.to_owned();
    ensure!(answer["status"]["expirationTimestamp"].is_string(), "{answer}");
    let robot = hub.http_bearer(&token)?;
    let info = whoami(&hub, &robot, &[]).await?.map_err(|c| anyhow::anyhow!("{c}"))?;
    ensure!(info["username"] == "system:serviceaccount:default:robot", "{info}");
    ensure!(info["uid"] == created["metadata"]["uid"], "{info}");
    ensure!(
        info["groups"]
            == json!([
                "system:serviceaccounts",
                "system:serviceaccounts:default",
                "system:authenticated"
            ]),
        "{info}"
    );
    ensure!(
        info["extra"]["authentication.kubernetes.io/credential-id"][0]
            .as_str()
            .is_some_and(|s| s.starts_with("JTI=")),
        "{info}"
    );
    // TokenReview (what an aggregated server or a webhook asks).
    let review = |t: &str| json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": t}});
    let (code, r) = hub
        .call(
            &admin,
            reqwest::Method::POST,
            "/apis/authentication.k8s.io/v1/tokenreviews",
            Some(&review(&token)),
            &[],
        )
        .await?;
    ensure!(
        code == 201
            && r["status"]["authenticated"] == true
            && r["status"]["user"]["username"] == "system:serviceaccount:default:robot",
        "{code} {r}"
    );
    let (code, r) = hub
        .call(
            &admin,
            reqwest::Method::POST,
            "/apis/authentication.k8s.io/v1/tokenreviews",
            Some(&review("x.y.z")),
            &[],
        )
        .await?;
    ensure!(code == 201 && r["status"]["authenticated"] == false, "{code} {r}");
    // The robot itself may not review tokens.
    let (code, _) = hub
        .call(
            &robot,
            reqwest::Method::POST,
            "/apis/authentication.k8s.io/v1/tokenreviews",
            Some(&review(&token)),
            &[],
        )
        .await?;
    ensure!(code == 403, "robot reviewed tokens: {code}");
    // Bad requests.
    let (code, r) = token_request(&hub, "robot", json!({"expirationSeconds": 60})).await?;
    ensure!(
        code == 422 && r["details"]["causes"][0]["field"] == "spec.expirationSeconds",
        "{code} {r}"
    );
    // Longer than the hub signs: shortened to the maximum, as kube-apiserver does.
    let (code, r) = token_request(&hub, "robot", json!({"expirationSeconds": 72 * 3600})).await?;
    ensure!(code == 201 && r["spec"]["expirationSeconds"] == 48 * 3600, "{code} {r}");
    let (code, r) = token_request(
        &hub,
        "robot",
        json!({"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "p"}}),
    )
    .await?;
    ensure!(
        code == 422 && r["details"]["causes"][0]["field"] == "spec.boundObjectRef",
        "{code} {r}"
    );
    let (code, _) = token_request(&hub, "nobody", json!({})).await?;
    ensure!(code == 404, "token for a missing account: {code}");
    // A token for another audience is not accepted here.
    let (_, other) =
        token_request(&hub, "robot", json!({"audiences": ["https://vault.example"]})).await?;
    let other = other["status"]["token"].as_str().context("no token")?;
    unauthorized(whoami(&hub, &hub.http_bearer(other)?, &[]).await?, "foreign audience")?;
    // TokenReview answers for the audiences asked, with the overlap.
    let reviews = "/apis/authentication.k8s.io/v1/tokenreviews";
    let for_aud = |t: &str, aud: &str| json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": t, "audiences": [aud]}});
    let (code, r) = hub
        .call(
            &admin,
            reqwest::Method::POST,
            reviews,
            Some(&for_aud(other, "https://vault.example")),
            &[],
        )
        .await?;
    ensure!(
        code == 201
            && r["status"]["authenticated"] == true
            && r["status"]["audiences"] == json!(["https://vault.example"]),
        "{code} {r}"
    );
    let (code, r) = hub
        .call(&admin, reqwest::Method::POST, reviews, Some(&for_aud(&token, "my-addon")), &[])
        .await?;
    ensure!(
        code == 201 && r["status"]["authenticated"] == false,
        "a hub token passed for another audience: {code} {r}"
    );
    let empty = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": ""}});
    let (code, r) = hub.call(&admin, reqwest::Method::POST, reviews, Some(&empty), &[]).await?;
    ensure!(
        code == 400 && r["message"] == "token is required for TokenReview in authentication",
        "{code} {r}"
    );

    // Forgeries, made with the hub's own signing key where a signature matters.
    let authority = TokenAuthority::load_or_create(
        &hub.path().join("pki"),
        ocm_apiserver::auth::tokens::DEFAULT_ISSUER,
    )?;
    let parts: Vec<&str> = token.split('.').collect();
    let claims: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(parts[1])?,
    )?;
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let mut cases: Vec<(&str, String)> = vec![
        (
            "alg none",
            format!("{}.{}.", b64(json!({"alg": "none"}).to_string().as_bytes()), parts[1]),
        ),
        (
            "HS256 header, EdDSA signature",
            format!(
                "{}.{}.{}",
                b64(json!({"alg": "HS256", "typ": "JWT"}).to_string().as_bytes()),
                parts[1],
                parts[2]
            ),
        ),
        (
            "tampered subject",
            format!(
                "{}.{}.{}",
                parts[0],
                b64({
                    let mut c = claims.clone();
                    c["sub"] = json!("system:serviceaccount:kube-system:admin");
                    c
                }
                .to_string()
                .as_bytes()),
                parts[2]
            ),
        ),
    ];
    for (what, edit) in [
        ("expired", json!({"exp": now - 300})),
        ("not yet valid", json!({"nbf": now + 3600})),
        ("string exp", json!({"exp": (now + 3600).to_string()})),
        ("string nbf", json!({"nbf": now.to_string()})),
        ("wrong issuer", json!({"iss": "https://evil.example"})),
        ("wrong audience", json!({"aud": ["https://evil.example"]})),
        ("no jti", json!({"jti": ""})),
    ] {
        let mut c = claims.clone();
        for (k, v) in edit.as_object().context("edit")? {
            c[k] = v.clone();
        }
        cases.push((what, authority.sign_claims(&c)?));
    }
    // HS256 keyed with the hub's public key (algorithm confusion).
    let public = authority.public_key();
    let head = format!(
        "{}.{}",
        b64(json!({"alg": "HS256", "typ": "JWT"}).to_string().as_bytes()),
        parts[1]
    );
    let mac =
        ring::hmac::sign(&ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &public), head.as_bytes());
    cases.push(("HS256 keyed with the public key", format!("{head}.{}", b64(mac.as_ref()))));
    // The control: the same re-signing, unchanged, is accepted.
    let control = authority.sign_claims(&claims)?;
    named(
        whoami(&hub, &hub.http_bearer(&control)?, &[]).await?,
        "system:serviceaccount:default:robot",
        &["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"],
    )?;
    for (what, forged) in &cases {
        unauthorized(whoami(&hub, &hub.http_bearer(forged)?, &[]).await?, what)?;
    }
    // Deleting the account revokes its tokens; re-creating it does not bring them back.
    let (code, _) =
        hub.call(&admin, reqwest::Method::DELETE, &format!("{SAS}/robot"), None, &[]).await?;
    ensure!(code == 200, "{code}");
    unauthorized(whoami(&hub, &robot, &[]).await?, "deleted account")?;
    let (code, _) = hub.call(&admin, reqwest::Method::POST, SAS, Some(&sa), &[]).await?;
    ensure!(code == 201);
    // The control: a token of the new account works (so the cache holds it), the old one not.
    let (code, fresh) = token_request(&hub, "robot", json!({})).await?;
    ensure!(code == 201, "{code} {fresh}");
    let fresh = hub.http_bearer(fresh["status"]["token"].as_str().context("no token")?)?;
    ensure!(whoami(&hub, &fresh, &[]).await?.is_ok(), "the re-created account's token fails");
    unauthorized(whoami(&hub, &robot, &[]).await?, "re-created account")?;
    hub.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn front_proxy_headers_only_from_the_front_proxy() -> anyhow::Result<()> {
    let fp_dir = tempfile::tempdir()?;
    let front_proxy = Pki::load_or_create(fp_dir.path(), &[])?;
    let ca = front_proxy.ca_file();
    let hub = TestHub::start_with(Backend::Memory, |c| {
        c.requestheader_ca = Some(ca);
        c.requestheader_allowed_names = vec!["front-proxy-client".into()];
    })
    .await?;
    let (crt, key) = front_proxy.issue_client("front-proxy-client", None, 1)?;
    let proxy = hub.http_with_cert(&crt, &key)?;
    let alice = [
        ("X-Remote-User", "alice"),
        ("X-Remote-Group", "g1"),
        ("X-Remote-Group", "g2"),
        ("X-Remote-Extra-Acme.com%2Fproject", "p1"),
    ];
    let info = whoami(&hub, &proxy, &alice).await?.map_err(|c| anyhow::anyhow!("{c}"))?;
    ensure!(info["username"] == "alice", "{info}");
    ensure!(info["groups"] == json!(["g1", "g2", "system:authenticated"]), "{info}");
    ensure!(info["extra"]["acme.com/project"] == json!(["p1"]), "{info}");
    // RBAC applies to the named user.
    let (code, _) =
        hub.call(&proxy, reqwest::Method::GET, "/api/v1/namespaces", None, &alice).await?;
    ensure!(code == 403, "alice listed namespaces through the proxy: {code}");
    // The front-proxy certificate alone names nobody.
    unauthorized(whoami(&hub, &proxy, &[]).await?, "front proxy without headers")?;
    // kube-apiserver's availability probe and the aggregator's own discovery requests.
    let probe = [("X-Remote-User", "system:kube-aggregator"), ("X-Remote-Group", "system:masters")];
    let gv = "/apis/cluster.open-cluster-management.io/v1";
    let (code, _) = hub.call(&proxy, reqwest::Method::GET, gv, None, &probe).await?;
    ensure!(code == 200, "availability probe: {code}");
    let aggregator = [("X-Remote-User", "system:kube-aggregator")];
    for path in ["/apis", gv, "/openapi/v3"] {
        let (code, _) = hub.call(&proxy, reqwest::Method::GET, path, None, &aggregator).await?;
        ensure!(code == 200, "aggregator GET {path}: {code}");
    }
    // Spoofing: the same headers from anyone else are removed and ignored.
    let (crt, key) = front_proxy.issue_client("intruder", None, 1)?;
    let intruder = hub.http_with_cert(&crt, &key)?;
    unauthorized(whoami(&hub, &intruder, &alice).await?, "front-proxy CA, name not allowed")?;
    unauthorized(whoami(&hub, &hub.anonymous()?, &alice).await?, "no certificate")?;
    let masters = [("X-Remote-User", "mallory"), ("X-Remote-Group", "system:masters")];
    let admin = whoami(&hub, &hub.http()?, &masters).await?;
    named(admin, "ocm-admin", &["system:masters", "system:authenticated"])?;
    let pki = Pki::open(hub.path())?;
    let (crt, key) = pki.issue_client("bob", None, 1)?;
    named(
        whoami(&hub, &hub.http_with_cert(&crt, &key)?, &masters).await?,
        "bob",
        &["system:authenticated"],
    )?;
    // A client certificate from the front-proxy CA is not a user certificate.
    let (crt, key) = front_proxy.issue_client("front-proxy-client", Some("system:masters"), 1)?;
    let (code, _) = hub
        .call(
            &hub.http_with_cert(&crt, &key)?,
            reqwest::Method::GET,
            "/api/v1/namespaces",
            None,
            &[],
        )
        .await?;
    ensure!(code == 401, "front-proxy certificate used as a user: {code}");
    hub.stop().await;
    Ok(())
}

/// A client CA bundle replaced on disk is used for new connections within seconds, without a
/// restart; a bundle that does not load keeps the previous one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_ca_files_reload_without_restart() -> anyhow::Result<()> {
    let (a_dir, b_dir) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let (ca_a, ca_b) =
        (Pki::load_or_create(a_dir.path(), &[])?, Pki::load_or_create(b_dir.path(), &[])?);
    let bundle_dir = tempfile::tempdir()?;
    let bundle = bundle_dir.path().join("extra-ca.crt");
    std::fs::write(&bundle, &ca_a.ca_pem)?;
    let path = bundle.clone();
    let hub = TestHub::start_with(Backend::Memory, |c| {
        c.client_ca_files = vec![path];
        c.tls_reload_every = Duration::from_millis(100);
    })
    .await?;
    let (a_crt, a_key) = ca_a.issue_client("from-a", None, 1)?;
    let (b_crt, b_key) = ca_b.issue_client("from-b", None, 1)?;
    named(
        whoami(&hub, &hub.http_with_cert(&a_crt, &a_key)?, &[]).await?,
        "from-a",
        &["system:authenticated"],
    )?;
    unauthorized(
        whoami(&hub, &hub.http_with_cert(&b_crt, &b_key)?, &[]).await?,
        "B before the change",
    )?;
    // A broken bundle is not taken (ten reload intervals pass).
    std::fs::write(&bundle, "not a certificate")?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    named(
        whoami(&hub, &hub.http_with_cert(&a_crt, &a_key)?, &[]).await?,
        "from-a",
        &["system:authenticated"],
    )?;
    std::fs::write(&bundle, &ca_b.ca_pem)?;
    // A fresh client per try: certificates are judged once per connection.
    eventually("the new client CA is used", Duration::from_secs(10), || async {
        Ok(whoami(&hub, &hub.http_with_cert(&b_crt, &b_key)?, &[]).await?.ok())
    })
    .await?;
    unauthorized(
        whoami(&hub, &hub.http_with_cert(&a_crt, &a_key)?, &[]).await?,
        "A after the change",
    )?;
    // The hub's own CA is trusted throughout.
    named(
        whoami(&hub, &hub.http()?, &[]).await?,
        "ocm-admin",
        &["system:masters", "system:authenticated"],
    )?;
    hub.stop().await;
    Ok(())
}

/// Aggregated mode, with a second hub standing in for kube-apiserver (it serves TokenReview and
/// SubjectAccessReview like one): tokens hub A did not issue are reviewed by B, and what A's own
/// RBAC denies is asked of B's RBAC.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delegation_to_a_kube_apiserver() -> anyhow::Result<()> {
    let cluster = TestHub::start(Backend::Memory).await?;
    let kubeconfig = cluster.kubeconfig().display().to_string();
    let hub = TestHub::start_with(Backend::Memory, |c| {
        c.authentication_kubeconfig = Some(kubeconfig.clone());
        c.authorization_kubeconfig = Some(kubeconfig);
    })
    .await?;
    // A token of the cluster's service account, used on the hub.
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "builder"}});
    let (code, _) =
        cluster.call(&cluster.http()?, reqwest::Method::POST, SAS, Some(&sa), &[]).await?;
    ensure!(code == 201);
    let (code, answer) = token_request(&cluster, "builder", json!({})).await?;
    ensure!(code == 201, "{code} {answer}");
    let token = answer["status"]["token"].as_str().context("no token")?;
    let builder = hub.http_bearer(token)?;
    named(
        whoami(&hub, &builder, &[]).await?,
        "system:serviceaccount:default:builder",
        &["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"],
    )?;
    unauthorized(whoami(&hub, &hub.http_bearer("a.b.c")?, &[]).await?, "token neither knows")?;
    // Rights granted in the cluster's RBAC only.
    let mcl = "/apis/cluster.open-cluster-management.io/v1/managedclusters";
    let (code, _) = hub.call(&builder, reqwest::Method::GET, mcl, None, &[]).await?;
    ensure!(code == 403, "allowed before any grant: {code}");
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "mcl-reader"},
        "rules": [{"apiGroups": ["cluster.open-cluster-management.io"], "resources": ["managedclusters"], "verbs": ["list"]}]});
    let bind = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "mcl-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "mcl-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "builder", "namespace": "default"}]});
    let admin = cluster.http()?;
    for (path, body) in [
        ("/apis/rbac.authorization.k8s.io/v1/clusterroles", role),
        ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", bind),
    ] {
        let (code, v) = cluster.call(&admin, reqwest::Method::POST, path, Some(&body), &[]).await?;
        ensure!(code == 201, "{code} {v}");
    }
    // The deny above is cached for 10 s, as k8s.io/apiserver caches it.
    eventually("the cluster's grant reaches the hub", Duration::from_secs(20), || async {
        let (code, _) = hub.call(&builder, reqwest::Method::GET, mcl, None, &[]).await?;
        ensure!(code == 200 || code == 403, "{code}");
        Ok((code == 200).then_some(()))
    })
    .await?;
    let (code, _) = hub
        .call(&builder, reqwest::Method::GET, "/api/v1/namespaces/default/secrets", None, &[])
        .await?;
    ensure!(code == 403, "granted nowhere, yet allowed: {code}");
    // The host's grants are asked only for users the host named, and only for the OCM groups:
    // a grant on secrets in the host does not open the hub's secrets.
    let secrets_role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "builder-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "builder", "namespace": "default"},
                     {"kind": "User", "name": "carol"}]});
    let (code, v) = cluster
        .call(
            &admin,
            reqwest::Method::POST,
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            Some(&secrets_role),
            &[],
        )
        .await?;
    ensure!(code == 201, "{code} {v}");
    // The control: the host's cluster-admin grant is live (a request never asked before, so
    // no cached answer, is allowed through delegation).
    let sets = "/apis/cluster.open-cluster-management.io/v1beta2/managedclustersets";
    eventually("the host's cluster-admin grant is live", Duration::from_secs(10), || async {
        let (code, _) = hub.call(&builder, reqwest::Method::GET, sets, None, &[]).await?;
        Ok((code == 200).then_some(()))
    })
    .await?;
    let kube_system = "/api/v1/namespaces/kube-system/secrets";
    let (code, _) = hub.call(&builder, reqwest::Method::GET, kube_system, None, &[]).await?;
    ensure!(code == 403, "the host's grant opened the hub's secrets: {code}");
    // carol is a user of the hub itself (its CA): the host's grant is not hers here.
    let pki = Pki::open(hub.path())?;
    let (crt, key) = pki.issue_client("carol", None, 1)?;
    let carol = hub.http_with_cert(&crt, &key)?;
    let (code, _) = hub.call(&carol, reqwest::Method::GET, sets, None, &[]).await?;
    ensure!(code == 403, "a hub user was authorized by the host: {code}");
    hub.stop().await;
    cluster.stop().await;
    Ok(())
}
