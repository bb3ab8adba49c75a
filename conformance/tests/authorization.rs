//! Authorization against a running hub: identities from client certificates (CN user, O group),
//! decided by Kubernetes RBAC kept current from the store; each denial is kube-apiserver's 403.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use ocm_conformance::hub::{Backend, TestHub, eventually};
use serde_json::{Value, json};

const MCL: &str = "/apis/cluster.open-cluster-management.io/v1/managedclusters";

struct Scene {
    hub: TestHub,
    admin: reqwest::Client,
}

impl Scene {
    async fn start() -> anyhow::Result<Scene> {
        let hub = TestHub::start(Backend::Memory).await?;
        let admin = hub.http()?;
        Ok(Scene { hub, admin })
    }

    /// `(status, body)` of `method path` by `client`.
    async fn call(
        &self,
        client: &reqwest::Client,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<(u16, Value)> {
        self.hub.call(client, method, path, body, &[]).await
    }

    async fn get(&self, client: &reqwest::Client, path: &str) -> anyhow::Result<(u16, Value)> {
        self.call(client, reqwest::Method::GET, path, None).await
    }

    async fn admin_create(&self, path: &str, body: Value) -> anyhow::Result<()> {
        let (code, v) = self.call(&self.admin, reqwest::Method::POST, path, Some(&body)).await?;
        ensure!(code == 201, "POST {path}: {code} {v}");
        Ok(())
    }

    /// Waits until `client` may GET `path` (grants reach the authorizer through the watch
    /// cache, a moment after the write, as with kube-apiserver's informers).
    async fn until_allowed(&self, client: &reqwest::Client, path: &str) -> anyhow::Result<Value> {
        eventually(&format!("GET {path} allowed"), Duration::from_secs(5), || async {
            let (code, body) = self.get(client, path).await?;
            Ok((code == 200).then_some(body))
        })
        .await
    }
}

fn forbidden(resp: &(u16, Value), message: &str) -> anyhow::Result<()> {
    let (code, body) = resp;
    ensure!(*code == 403, "expected 403, got {code}: {body}");
    ensure!(body["kind"] == "Status" && body["reason"] == "Forbidden", "{body}");
    ensure!(body["message"] == message, "message {}\nexpected {message}", body["message"]);
    Ok(())
}

fn role(ns: &str, name: &str, rules: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
           "metadata": {"name": name, "namespace": ns}, "rules": rules})
}

fn binding(
    kind: &str,
    ns: Option<&str>,
    name: &str,
    role_kind: &str,
    role: &str,
    subjects: Value,
) -> Value {
    let mut meta = json!({"name": name});
    if let Some(ns) = ns {
        meta["namespace"] = json!(ns);
    }
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta,
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
           "subjects": subjects})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_get_what_rbac_grants_and_nothing_else() -> anyhow::Result<()> {
    let s = Scene::start().await?;
    let alice = s.hub.http_as("alice", None)?;
    // Discovery and /version are open to every authenticated user (system:discovery,
    // system:public-info-viewer); data is not.
    ensure!(s.get(&alice, "/apis").await?.0 == 200);
    ensure!(s.get(&alice, "/version").await?.0 == 200);
    forbidden(
        &s.get(&alice, "/api/v1/namespaces/default/configmaps").await?,
        "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\"",
    )?;
    forbidden(
        &s.get(&alice, &format!("{MCL}/c1")).await?,
        "managedclusters.cluster.open-cluster-management.io \"c1\" is forbidden: User \"alice\" cannot get resource \"managedclusters\" in API group \"cluster.open-cluster-management.io\" at the cluster scope",
    )?;

    // A Role in namespace `team` bound to alice: read config maps there, and only there.
    for ns in ["team", "other"] {
        s.admin_create("/api/v1/namespaces", json!({"metadata": {"name": ns}})).await?;
        s.admin_create(
            &format!("/api/v1/namespaces/{ns}/configmaps"),
            json!({"metadata": {"name": "cm"}}),
        )
        .await?;
    }
    s.admin_create(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/team/roles",
        role("team", "reader", json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}])),
    )
    .await?;
    s.admin_create(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/team/rolebindings",
        binding(
            "RoleBinding",
            Some("team"),
            "alice-reads",
            "Role",
            "reader",
            json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}]),
        ),
    )
    .await?;
    let list = s.until_allowed(&alice, "/api/v1/namespaces/team/configmaps").await?;
    ensure!(list["items"].as_array().map(Vec::len) == Some(1), "{list}");
    ensure!(s.get(&alice, "/api/v1/namespaces/team/configmaps/cm").await?.0 == 200);
    forbidden(
        &s.get(&alice, "/api/v1/namespaces/other/configmaps").await?,
        "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"other\"",
    )?;
    // Across namespaces needs a cluster-wide grant: 403, never a filtered list.
    forbidden(
        &s.get(&alice, "/api/v1/configmaps").await?,
        "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" at the cluster scope",
    )?;
    ensure!(s.get(&alice, "/api/v1/configmaps?watch=true&timeoutSeconds=1").await?.0 == 403);
    // Reading is not writing.
    let (code, body) = s
        .call(
            &alice,
            reqwest::Method::POST,
            "/api/v1/namespaces/team/configmaps",
            Some(&json!({"metadata": {"name": "x"}})),
        )
        .await?;
    ensure!(code == 403, "{code} {body}");
    // Removing the binding takes the grant away.
    let (code, _) = s
        .call(
            &s.admin,
            reqwest::Method::DELETE,
            "/apis/rbac.authorization.k8s.io/v1/namespaces/team/rolebindings/alice-reads",
            None,
        )
        .await?;
    ensure!(code == 200);
    // The authorizer follows the cache a moment behind the answer.
    eventually("the grant ends with its binding", Duration::from_secs(5), || async {
        Ok((s.get(&alice, "/api/v1/namespaces/team/configmaps").await?.0 == 403).then_some(()))
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_names_subresources_and_groups() -> anyhow::Result<()> {
    let s = Scene::start().await?;
    for name in ["c1", "c2"] {
        s.admin_create(
            MCL,
            json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
                                   "metadata": {"name": name}, "spec": {"hubAcceptsClient": true}}),
        )
        .await?;
    }
    // A ClusterRole naming one cluster, bound to a group (certificate O).
    s.admin_create(
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "c1-reader"},
               "rules": [{"apiGroups": ["cluster.open-cluster-management.io"], "resources": ["managedclusters"],
                          "resourceNames": ["c1"], "verbs": ["get", "list", "watch"]}]}),
    )
    .await?;
    s.admin_create(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        binding(
            "ClusterRoleBinding",
            None,
            "c1-readers",
            "ClusterRole",
            "c1-reader",
            json!([{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "agents"}]),
        ),
    )
    .await?;
    let agent = s.hub.http_as("agent-1", Some("agents"))?;
    let c1 = s.until_allowed(&agent, &format!("{MCL}/c1")).await?;
    ensure!(c1["metadata"]["name"] == "c1");
    ensure!(s.get(&agent, &format!("{MCL}/c2")).await?.0 == 403);
    // resourceNames never allow a whole list; a list narrowed to the name is that name.
    ensure!(s.get(&agent, MCL).await?.0 == 403);
    let narrowed = s.get(&agent, &format!("{MCL}?fieldSelector=metadata.name%3Dc1")).await?;
    ensure!(
        narrowed.0 == 200 && narrowed.1["items"].as_array().map(Vec::len) == Some(1),
        "{narrowed:?}"
    );
    // A rule on managedclusters does not reach its status subresource.
    forbidden(
        &s.get(&agent, &format!("{MCL}/c1/status")).await?,
        "managedclusters.cluster.open-cluster-management.io \"c1\" is forbidden: User \"agent-1\" cannot get resource \"managedclusters/status\" in API group \"cluster.open-cluster-management.io\" at the cluster scope",
    )?;
    // Someone outside the group gets nothing.
    let stranger = s.hub.http_as("stranger", Some("others"))?;
    ensure!(s.get(&stranger, &format!("{MCL}/c1")).await?.0 == 403);
    // The admin (system:masters, bound to cluster-admin by default) reads everything.
    ensure!(s.get(&s.admin, MCL).await?.0 == 200);
    let crb = s
        .get(&s.admin, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/cluster-admin")
        .await?;
    ensure!(crb.0 == 200 && crb.1["subjects"][0]["name"] == "system:masters", "{crb:?}");
    let _ = s.hub.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_stays_open_and_strangers_are_unauthorized() -> anyhow::Result<()> {
    let s = Scene::start().await?;
    let anonymous = s.hub.anonymous()?;
    for path in ["/healthz", "/livez", "/readyz"] {
        ensure!(s.get(&anonymous, path).await?.0 == 200, "{path}");
    }
    let (code, body) = s.get(&anonymous, MCL).await?;
    ensure!(code == 401 && body["reason"] == "Unauthorized", "{code} {body}");
    let nobody = s.hub.http_as("nobody", None)?;
    let (code, body) = s.get(&nobody, "/api/v1/namespaces").await?;
    ensure!(code == 403, "{code} {body}");
    ensure!(
        body["message"]
            .as_str()
            .context("message")?
            .contains("User \"nobody\" cannot list resource \"namespaces\""),
        "{body}"
    );
    Ok(())
}

/// `kubectl auth can-i` (protobuf SelfSubjectAccessReviews), `can-i --list`
/// (SelfSubjectRulesReview) and `auth whoami` (SelfSubjectReview) as the admin and as a user
/// with one namespaced grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_reviews() -> anyhow::Result<()> {
    if ocm_conformance::kubectl::skip("the whole test") {
        return Ok(());
    }
    let s = Scene::start().await?;
    let admin = ocm_conformance::kubectl::Kubectl::new(&s.hub)?;
    ensure!(admin.ok(&["auth", "can-i", "create", "managedclusters"]).await?.trim() == "yes");
    let who = admin.ok(&["auth", "whoami"]).await?;
    ensure!(who.contains("ocm-admin") && who.contains("system:masters"), "{who}");

    s.admin_create("/api/v1/namespaces", json!({"metadata": {"name": "team"}})).await?;
    s.admin_create(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/team/roles",
        role(
            "team",
            "reader",
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]),
        ),
    )
    .await?;
    s.admin_create(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/team/rolebindings",
        binding(
            "RoleBinding",
            Some("team"),
            "alice-reads",
            "Role",
            "reader",
            json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}]),
        ),
    )
    .await?;
    let alice = ocm_conformance::kubectl::Kubectl::with_kubeconfig(
        s.hub.kubeconfig_as("alice", Some("devs"))?,
    )?;
    let who = alice.ok(&["auth", "whoami"]).await?;
    ensure!(
        who.contains("alice") && who.contains("devs") && who.contains("system:authenticated"),
        "{who}"
    );
    // The grant reaches the authorizer through the cache; wait for it, then ask.
    s.until_allowed(&s.hub.http_as("alice", Some("devs"))?, "/api/v1/namespaces/team/configmaps")
        .await?;
    ensure!(
        alice.ok(&["auth", "can-i", "list", "configmaps", "-n", "team"]).await?.trim() == "yes"
    );
    let r = alice.run(&["auth", "can-i", "list", "configmaps", "-n", "default"]).await?;
    ensure!(r.code == 1 && r.stdout.trim() == "no", "{r:?}");
    let r = alice.run(&["auth", "can-i", "delete", "configmaps", "-n", "team"]).await?;
    ensure!(r.code == 1 && r.stdout.trim() == "no", "{r:?}");
    let list = alice.ok(&["auth", "can-i", "--list", "-n", "team"]).await?;
    let row = list.lines().find(|l| l.starts_with("configmaps ")).context(list.clone())?;
    ensure!(row.contains("[get list]"), "{list}");
    ensure!(!list.lines().any(|l| l.starts_with("*.*")), "alice is no admin: {list}");
    // Data stays closed to her outside the grant, as kubectl shows.
    let r = alice.run(&["get", "configmaps", "-n", "default"]).await?;
    ensure!(r.code == 1 && r.stderr.contains("Error from server (Forbidden)"), "{r:?}");

    // Impersonation: the admin may act as alice (and then has only her rights); alice may not
    // act as anyone.
    let r =
        admin.run(&["auth", "can-i", "list", "configmaps", "-n", "default", "--as=alice"]).await?;
    ensure!(r.code == 1 && r.stdout.trim() == "no", "{r:?}");
    let who = admin.ok(&["auth", "whoami", "--as=alice", "--as-group=devs"]).await?;
    ensure!(
        who.contains("alice") && who.contains("devs") && !who.contains("system:masters"),
        "{who}"
    );
    let r = alice.run(&["get", "configmaps", "-n", "team", "--as=ocm-admin"]).await?;
    ensure!(
        r.code == 1
            && r.stderr.contains("users \"ocm-admin\" is forbidden: User \"alice\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"),
        "{r:?}"
    );
    Ok(())
}

/// Authorization and routing read a path the same way: an empty segment names nothing (it
/// once let `/apis//v1/secrets` pass as a discovery path and be served as every Secret), a
/// namespace's own subresources are `namespaces/status|finalize`, and a named GET is a get
/// whatever `watch` says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_are_read_once_for_routing_and_authorization() -> anyhow::Result<()> {
    let s = Scene::start().await?;
    s.admin_create(
        "/api/v1/namespaces/default/secrets",
        json!({"metadata": {"name": "top"}, "data": {}}),
    )
    .await?;
    let bob = s.hub.http_as("bob", None)?;
    for path in [
        "/apis//v1/secrets",
        "/api//v1/secrets",
        "/api/v1/namespaces//secrets",
        "/api/v1/namespaces/default//secrets",
        "/apis//v1/secrets?watch=true",
    ] {
        // reqwest keeps `//` in the path as sent.
        let (code, body) = s.get(&bob, path).await?;
        ensure!(code == 404, "{path}: {code} {body}");
        ensure!(s.get(&s.admin, path).await?.0 == 404, "{path} as admin");
    }
    // Only `watch` on one namespace's status: a get of it is refused, as is a get through
    // `?watch=true` on a name.
    s.admin_create("/api/v1/namespaces", json!({"metadata": {"name": "team"}})).await?;
    s.admin_create(
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "ns-status"},
               "rules": [{"apiGroups": [""], "resources": ["namespaces/status"], "verbs": ["get"]},
                         {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["watch"]}]}),
    )
    .await?;
    s.admin_create(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        binding(
            "ClusterRoleBinding",
            None,
            "bob-ns-status",
            "ClusterRole",
            "ns-status",
            json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "bob"}]),
        ),
    )
    .await?;
    let status = s.until_allowed(&bob, "/api/v1/namespaces/team/status").await?;
    ensure!(status["metadata"]["name"] == "team", "{status}");
    forbidden(
        &s.get(&bob, "/api/v1/namespaces/team").await?,
        "namespaces \"team\" is forbidden: User \"bob\" cannot get resource \"namespaces\" in API group \"\" in the namespace \"team\"",
    )?;
    s.admin_create("/api/v1/namespaces/team/configmaps", json!({"metadata": {"name": "cm"}}))
        .await?;
    forbidden(
        &s.get(&bob, "/api/v1/namespaces/team/configmaps/cm?watch=true").await?,
        "configmaps \"cm\" is forbidden: User \"bob\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"team\"",
    )?;
    Ok(())
}

/// Impersonating a service account needs `impersonate` on `serviceaccounts` in its namespace,
/// and the request then carries the account's groups.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impersonating_service_accounts() -> anyhow::Result<()> {
    let s = Scene::start().await?;
    s.admin_create("/api/v1/namespaces", json!({"metadata": {"name": "team"}})).await?;
    // carol may impersonate any user, but no service account.
    s.admin_create(
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "user-impersonator"},
               "rules": [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"]}]}),
    )
    .await?;
    s.admin_create(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        binding(
            "ClusterRoleBinding",
            None,
            "carol",
            "ClusterRole",
            "user-impersonator",
            json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "carol"}]),
        ),
    )
    .await?;
    let carol = s.hub.http_as("carol", None)?;
    let whoami = |client: &reqwest::Client, user: &'static str| {
        client
            .post(format!("{}/apis/authentication.k8s.io/v1/selfsubjectreviews", s.hub.url))
            .header("impersonate-user", user)
            .json(&json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}))
            .send()
    };
    eventually("carol may impersonate users", Duration::from_secs(5), || async {
        Ok((whoami(&carol, "dave").await?.status() == 201).then_some(()))
    })
    .await?;
    let sa = "system:serviceaccount:team:builder";
    let resp = whoami(&carol, sa).await?;
    ensure!(resp.status() == 403, "{}", resp.status());
    let body: Value = resp.json().await?;
    ensure!(
        body["message"].as_str().is_some_and(|m| m.contains("cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"team\"")),
        "{body}"
    );
    // The admin may: the account's groups come along.
    let resp = whoami(&s.admin, sa).await?;
    ensure!(resp.status() == 201);
    let body: Value = resp.json().await?;
    let groups: Vec<&str> = body["status"]["userInfo"]["groups"]
        .as_array()
        .context("groups")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    ensure!(
        body["status"]["userInfo"]["username"] == sa
            && groups
                == [
                    "system:serviceaccounts",
                    "system:serviceaccounts:team",
                    "system:authenticated"
                ],
        "{body}"
    );
    Ok(())
}

/// `kubectl auth can-i --list` as an agent (a certificate with OCM's agent subject) shows its own
/// cluster's rights in its own namespace, and nothing of the prefix-related cluster `a-x`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_sees_only_its_own_cluster_rights() -> anyhow::Result<()> {
    use ocm_apiserver::auth::cluster_rbac::{
        agent_group, agent_user, cluster_objects, shared_roles,
    };
    if ocm_conformance::kubectl::skip("the whole test") {
        return Ok(());
    }
    let s = Scene::start().await?;
    for ns in ["a", "a-x"] {
        s.admin_create("/api/v1/namespaces", json!({"metadata": {"name": ns}})).await?;
    }
    let mut objects = shared_roles();
    objects.extend(cluster_objects("a", true));
    objects.extend(cluster_objects("a-x", true));
    s.hub.create_rbac(objects).await?;
    let (user, group) = (agent_user("a", "agent"), agent_group("a"));
    let http = s.hub.http_as(&user, Some(&group))?;
    s.until_allowed(&http, "/apis/work.open-cluster-management.io/v1/namespaces/a/manifestworks")
        .await?;
    let agent = ocm_conformance::kubectl::Kubectl::with_kubeconfig(
        s.hub.kubeconfig_as(&user, Some(&group))?,
    )?;
    let own = agent.ok(&["auth", "can-i", "--list", "-n", "a"]).await?;
    let row =
        |list: &str, prefix: &str| list.lines().find(|l| l.starts_with(prefix)).map(str::to_owned);
    let works = row(&own, "manifestworks.work.open-cluster-management.io ").context(own.clone())?;
    ensure!(works.contains("[get list watch update patch]"), "{own}");
    let mcl =
        row(&own, "managedclusters.cluster.open-cluster-management.io ").context(own.clone())?;
    ensure!(mcl.contains("[a]") && !mcl.contains("a-x"), "{own}");
    ensure!(!own.lines().any(|l| l.starts_with("*.*")), "an agent is no admin: {own}");
    let other = agent.ok(&["auth", "can-i", "--list", "-n", "a-x"]).await?;
    ensure!(row(&other, "manifestworks").is_none(), "cluster a's agent has rights in a-x: {other}");
    ensure!(row(&other, "leases").is_none(), "{other}");
    let r = agent.run(&["get", "manifestworks", "-n", "a-x"]).await?;
    ensure!(r.code == 1 && r.stderr.contains("Forbidden"), "{r:?}");
    let r = agent.run(&["get", "manifestworks", "-A"]).await?;
    ensure!(r.code == 1 && r.stderr.contains("Forbidden"), "an all-namespace list is a 403: {r:?}");
    Ok(())
}
