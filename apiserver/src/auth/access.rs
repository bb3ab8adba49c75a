//! The hub's authorizer at run time: the RBAC index kept current from the watch cache (one
//! follower per RBAC kind), and the check every authenticated request passes before it is
//! served (a 403 `Forbidden` in kube-apiserver's words otherwise).

use std::collections::HashSet;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use crate::auth::authz::{self, RbacIndex};
use crate::machinery::background::Background;
use crate::machinery::error::{ApiError, Subject};
use crate::machinery::object;
use crate::machinery::requester::Identity;
use crate::machinery::requester::{Attributes, Decision, UserInfo};
use crate::machinery::scheme::ResourceType;
use crate::store::cache::EventType;
use crate::store::follow::{Resume, Seen, follow};
use crate::store::registry::Registry;

/// The RBAC kinds the index follows.
const RBAC_KINDS: [&str; 4] = ["roles", "clusterroles", "rolebindings", "clusterrolebindings"];

/// The authorizer of one hub.
#[derive(Debug)]
pub struct Access {
    index: RwLock<RbacIndex>,
    /// Counts the changes of the RBAC index.
    changes: std::sync::atomic::AtomicU64,
    /// The change count, published at most every [`PUBLISH_EVERY`]: open watches check again
    /// whether their caller may still watch (a deleted cluster's agent loses its streams). A
    /// burst of RBAC writes (a thousand clusters accepted) wakes each watcher once, not once
    /// per write.
    generation: tokio::sync::watch::Sender<u64>,
}

/// How often RBAC changes are published to open watches.
const PUBLISH_EVERY: Duration = Duration::from_millis(500);

impl Default for Access {
    fn default() -> Access {
        Access {
            index: RwLock::default(),
            changes: std::sync::atomic::AtomicU64::new(0),
            generation: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl Access {
    /// Follows every RBAC kind in the cache in the background; returns once each kind's
    /// objects are loaded, so the first request is decided on them.
    pub async fn start(registry: &Registry, background: &Background) -> Arc<Access> {
        let access = Arc::new(Access::default());
        let mut loaded = Vec::new();
        for plural in RBAC_KINDS {
            let Some(rt) = registry.scheme.lookup("rbac.authorization.k8s.io", "v1", plural) else {
                continue;
            };
            let (first, done) = tokio::sync::oneshot::channel();
            loaded.push(done);
            let (rt, access) = (Arc::clone(rt), Arc::clone(&access));
            let (cache, prefix) = (Arc::clone(&registry.cache), rt.prefix.clone());
            let mut first = Some(first);
            let mut known = HashSet::new();
            background.spawn(follow(cache, prefix, Resume::Snapshot, move |seen| match seen {
                Seen::Snapshot(objects) => {
                    known = access.load(&rt, objects, std::mem::take(&mut known));
                    if let Some(first) = first.take() {
                        let _ = first.send(());
                    }
                }
                Seen::Change(ev) => access.apply(&rt, ev.kind, &ev.object.value(), &mut known),
                Seen::Lost => {}
            }));
        }
        for done in loaded {
            // An error means the hub is stopping: nothing waits for the authorizer then.
            let _ = done.await;
        }
        background.spawn(publish_changes(Arc::clone(&access)));
        access
    }

    /// Replaces the kind's objects with a snapshot's, in one step under the write lock (what
    /// disappeared goes in the same step, so a revoked grant never outlives the resync);
    /// returns the keys now held.
    fn load(
        &self,
        rt: &ResourceType,
        snapshot: &[Arc<crate::store::cache::CacheEvent>],
        known: HashSet<(String, String)>,
    ) -> HashSet<(String, String)> {
        // One step under the write lock, so no check sees a half-loaded kind; each object is
        // parsed once, and only while it is indexed.
        let mut held = HashSet::with_capacity(snapshot.len());
        let mut index = self.index.write().unwrap_or_else(|e| e.into_inner());
        for ev in snapshot {
            let obj = ev.object.value();
            held.insert((object::namespace(&obj).to_owned(), object::name(&obj).to_owned()));
            index.upsert(&obj);
        }
        for (ns, name) in known.difference(&held) {
            index.remove(&rt.kind, ns, name);
        }
        drop(index);
        self.changes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        held
    }

    /// A receiver that wakes on every change of the RBAC index.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.generation.subscribe()
    }

    fn apply(
        &self,
        rt: &ResourceType,
        kind: EventType,
        obj: &serde_json::Value,
        known: &mut HashSet<(String, String)>,
    ) {
        let id = (object::namespace(obj).to_owned(), object::name(obj).to_owned());
        let mut index = self.index.write().unwrap_or_else(|e| e.into_inner());
        match kind {
            EventType::Deleted => {
                index.remove(&rt.kind, &id.0, &id.1);
                known.remove(&id);
            }
            EventType::Added | EventType::Modified => {
                index.upsert(obj);
                known.insert(id);
            }
        }
        drop(index);
        self.changes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// What RBAC decides for `user` doing `attrs`.
    pub fn decide(&self, user: &UserInfo, attrs: &Attributes) -> Decision {
        if privileged(user) {
            return Decision::Allow { reason: String::new() };
        }
        self.index.read().unwrap_or_else(|e| e.into_inner()).authorize(user, attrs)
    }

    /// The rules that apply to `user` in `namespace` (SelfSubjectRulesReview).
    pub fn rules(&self, user: &UserInfo, namespace: &str) -> crate::auth::authz::SubjectRules {
        self.index.read().unwrap_or_else(|e| e.into_inner()).rules_for(user, namespace)
    }

    /// Applies `Impersonate-User` / `Impersonate-Group` (kubectl `--as`, `--as-group`): the
    /// caller needs the `impersonate` verb on `users` (and `groups`) named so, else 403; the
    /// request then runs as that user, in the groups named plus `system:authenticated` (unless
    /// they name it or `system:unauthenticated`).
    /// Without the headers the identity is unchanged; groups without a user are a 400.
    pub fn impersonate(
        &self,
        identity: Identity,
        headers: &http::HeaderMap,
    ) -> Result<Identity, ApiError> {
        let values = |name: &str| -> Result<Vec<String>, ApiError> {
            headers
                .get_all(name)
                .iter()
                .map(|v| {
                    v.to_str().map(str::to_owned).map_err(|_| {
                        ApiError::bad_request(format!("the {name} header is not valid text"))
                    })
                })
                .collect()
        };
        let users = values("impersonate-user")?;
        let groups = values("impersonate-group")?;
        let Some(user) = users.first() else {
            if groups.is_empty() {
                return Ok(identity);
            }
            return Err(ApiError::bad_request(
                "requested Impersonate-Group without Impersonate-User",
            ));
        };
        // A service account is impersonated through `serviceaccounts` in its namespace, and
        // comes with its groups, as in Kubernetes.
        let mut as_groups = Vec::new();
        let user_check = match user
            .strip_prefix(authz::SERVICE_ACCOUNT_USER_PREFIX)
            .and_then(|r| r.split_once(':'))
        {
            Some((ns, name)) => {
                as_groups.push(authz::ALL_SERVICE_ACCOUNTS_GROUP.to_owned());
                as_groups.push(format!("{}:{ns}", authz::ALL_SERVICE_ACCOUNTS_GROUP));
                Attributes::resource("impersonate", "", "serviceaccounts", ns, name)
            }
            None => Attributes::resource("impersonate", "", "users", "", user),
        };
        self.check(&identity, &user_check)?;
        for g in &groups {
            self.check(&identity, &Attributes::resource("impersonate", "", "groups", "", g))?;
        }
        // kube-apiserver's rule: `system:authenticated` is added unless a group named says
        // already whether the user is authenticated.
        let said = groups
            .iter()
            .any(|g| g == authz::AUTHENTICATED_GROUP || g == authz::UNAUTHENTICATED_GROUP);
        as_groups.extend(groups);
        if !said {
            as_groups.push(authz::AUTHENTICATED_GROUP.to_owned());
        }
        Ok(Identity::new(UserInfo { name: user.clone(), groups: as_groups, ..Default::default() }))
    }

    /// Allows the request or answers the 403 kube-apiserver would (the reason is worked out
    /// only for a denial).
    pub fn check(&self, user: &UserInfo, attrs: &Attributes) -> Result<(), ApiError> {
        if privileged(user) {
            return Ok(());
        }
        let index = self.index.read().unwrap_or_else(|e| e.into_inner());
        if index.allows(user, attrs) {
            return Ok(());
        }
        match index.authorize(user, attrs) {
            Decision::Allow { .. } => Ok(()),
            decision @ Decision::Deny { .. } => Err(ApiError::forbidden_with(
                Subject {
                    group: attrs.api_group.clone(),
                    kind: attrs.resource.clone(),
                    name: attrs.name.clone(),
                },
                crate::auth::authz::forbidden_message(user, attrs, decision.reason()),
            )),
        }
    }
}

/// Publishes the change count when it moved, at most every [`PUBLISH_EVERY`].
async fn publish_changes(access: Arc<Access>) {
    let mut interval = tokio::time::interval(PUBLISH_EVERY);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        let now = access.changes.load(std::sync::atomic::Ordering::Relaxed);
        access.generation.send_if_modified(|g| std::mem::replace(g, now) != now);
    }
}

/// kube-apiserver's privileged-group authorizer, ahead of RBAC: `system:masters` may do
/// anything, also where no RBAC is served (the cluster profile).
fn privileged(user: &UserInfo) -> bool {
    user.groups.iter().any(|g| g == authz::MASTERS_GROUP)
}

impl crate::machinery::requester::Authorizer for Access {
    fn decide(&self, user: &UserInfo, attrs: &Attributes) -> Decision {
        Access::decide(self, user, attrs)
    }
}
