//! matchConditions' `authorizer` answered by the cluster: each [`CheckKey`] the CEL library
//! (`matching::authz`) could not answer becomes a SubjectAccessReview (`authorization.k8s.io/v1`)
//! POSTed to the Kubernetes API with kube-rs, its answer a [`Decision`]. Depends on
//! `matching::authz`, `metrics`, `namespace_watch` (the client configuration), `kube` and
//! `k8s_openapi`.
//!
//! The cache follows kube-apiserver's webhook authorizer
//! (`staging/src/k8s.io/apiserver/plugin/pkg/authorizer/webhook/webhook.go`): `responseCache`
//! is an LRU expire cache of 8192 entries keyed by the SubjectAccessReview spec (`Authorize`
//! keys it by `json.Marshal(r.Spec)`); allowed answers live for the authorized TTL, denied ones
//! for the unauthorized TTL, errors are never cached, and `shouldCache` skips attributes whose
//! combined length is 10000 bytes or more. The TTL defaults are kube-apiserver's flags
//! `--authorization-webhook-cache-authorized-ttl` (5m) and
//! `--authorization-webhook-cache-unauthorized-ttl` (30s) (`pkg/kubeapiserver/options/authorization.go`).
//!
//! Two bounds upstream does not need: its user comes from its own authenticator, ours from the
//! AdmissionReview's `userInfo`, which whoever reaches the port writes (20,000 groups are about
//! 1 MB). So the cache key is the SHA-256 of the spec ([`SpecDigest`], 32 bytes whatever the
//! user), never the spec itself, and the entries together hold at most [`CACHE_BYTES`]: past
//! it the least recently used go first, as past the 8192 entries. An expired entry leaves when
//! it is looked up, when it reaches the least recently used end while an answer is added, or
//! when it is pushed out; until then it counts against the same budget.
//!
//! Two things kube-apiserver does not need and a proxy does: identical checks already in
//! flight are coalesced (one API call, every waiter gets its answer), and each waiter waits only
//! as long as its admission's budget allows. The call itself runs in a task of its own, capped
//! at [`CALL_CAP`], so a waiter giving up does not cancel it for the others and its late answer
//! still fills the cache.
//!
//! RBAC: the proxy's service account needs `create` on `subjectaccessreviews` in the
//! `authorization.k8s.io` group (what `system:auth-delegator` grants); without it every check
//! is an errored decision (403).
//!
//! Nothing here logs a user or an attribute: the debug log says that a call failed and why.

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

// tokio's clock, the proxy's one (`crate::clock`): tests with paused time see paused time. The
// rounds read it themselves rather than the poll's cached reading: what is left of a deadline
// is what matters after the work of the same poll.
use tokio::time::Instant;

use k8s_openapi::api::authorization::v1::{
    FieldSelectorAttributes, LabelSelectorAttributes, NonResourceAttributes, ResourceAttributes,
    SubjectAccessReview, SubjectAccessReviewSpec, SubjectAccessReviewStatus,
};
use kube::api::PostParams;
use kube::{Api, Client};
use lru::LruCache;
use parking_lot::Mutex;
use tokio::sync::watch;

use crate::kube_client::ClientError;
use crate::matching::authz::{Attributes, CheckKey, Decision, DecisionCache};

/// Entries of the decision cache (webhook.go: `cache.NewLRUExpireCache(8192)`).
pub const CACHE_SIZE: usize = 8192;

/// Bytes the decision cache's entries may hold together, keys included (each entry counts
/// [`ENTRY_OVERHEAD`] plus its reason and error text): 4 MiB, room for [`CACHE_SIZE`] answers
/// with reasons of about 350 bytes (RBAC's are about 100). Past it the least recently used
/// entries are dropped; an answer larger than the whole budget is not cached.
pub const CACHE_BYTES: usize = 4 << 20;

/// What one cached entry costs besides its text, bytes: the key, the entry, and the LRU's node
/// links and hash-table slot (an estimate of the allocator's share included).
const ENTRY_OVERHEAD: usize = std::mem::size_of::<SpecDigest>()
    + std::mem::size_of::<Entry>()
    + 6 * std::mem::size_of::<usize>();

/// Attributes this long or longer (bytes: namespace, verb, group, version, resource,
/// subresource, name, path together) are not cached (webhook.go `maxControlledAttrCacheSize`).
pub const MAX_CACHED_ATTRIBUTES_SIZE: usize = 10000;

/// The longest one SubjectAccessReview call may take, whoever waits for it: waiters give up on
/// their own budget, the call goes on to this cap so its answer can still fill the cache.
pub const CALL_CAP: Duration = Duration::from_secs(10);

/// Most SubjectAccessReviews waiting for the API server at once; a check beyond them is an
/// errored decision at once. Requests with distinct users miss the cache, so whoever can send
/// AdmissionReviews could otherwise make the proxy send any number of reviews (use
/// `--client-ca-file` so that only kube-apiserver can).
pub const MAX_CALLS_IN_FLIGHT: usize = 64;

/// Upstream's text for a status with both `allowed` and `denied` (webhook.go `Authorize`).
const BOTH_ALLOW_AND_DENY: &str =
    "webhook subject access review returned both allow and deny response";

/// How long answers are cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheTtl {
    /// How long an allowed answer is reused
    /// (`--authorization-webhook-cache-authorized-ttl`, 5 minutes by default).
    pub authorized: Duration,
    /// How long a denied (or no-opinion) answer is reused
    /// (`--authorization-webhook-cache-unauthorized-ttl`, 30 seconds by default).
    pub unauthorized: Duration,
}

impl Default for CacheTtl {
    /// kube-apiserver's defaults: 5 minutes and 30 seconds.
    fn default() -> Self {
        CacheTtl {
            authorized: Duration::from_secs(5 * 60),
            unauthorized: Duration::from_secs(30),
        }
    }
}

impl CacheTtl {
    /// How long `decision` is reused: the authorized TTL when allowed, else the unauthorized
    /// one (webhook.go caches by `Status.Allowed`).
    fn of(&self, decision: &Decision) -> Duration {
        if decision.allowed {
            self.authorized
        } else {
            self.unauthorized
        }
    }
}

/// How one check was answered; [`Outcome::as_str`] is the `result` label of
/// `admission_proxy_authorizer_checks_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A SubjectAccessReview this check started answered allowed.
    Allowed,
    /// A SubjectAccessReview this check started answered not allowed (denied or no opinion,
    /// with or without an `evaluationError`).
    Denied,
    /// No answer: the budget ran out, the call failed (transport, non-2xx), or the answer was
    /// both allowed and denied. The decision is errored and nothing was cached.
    Error,
    /// Answered from the cache, no API call.
    Cached,
    /// Answered by an identical check's call already in flight (no call of its own).
    Coalesced,
}

impl Outcome {
    /// Every outcome, in label order.
    pub const ALL: [Outcome; 5] = [
        Outcome::Allowed,
        Outcome::Denied,
        Outcome::Error,
        Outcome::Cached,
        Outcome::Coalesced,
    ];

    /// The metric label value: `allowed`, `denied`, `error`, `cached`, `coalesced`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Allowed => "allowed",
            Outcome::Denied => "denied",
            Outcome::Error => "error",
            Outcome::Cached => "cached",
            Outcome::Coalesced => "coalesced",
        }
    }
}

/// What a SubjectAccessReview call gave: a decision, or why there is none.
type Answer = Result<Decision, CallError>;

/// Why a SubjectAccessReview gave no decision; its text is what the `authorizer` library's
/// `error()` reads for the check (never cached).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub(crate) enum CallError {
    /// The API answered with an error status: its code, reason (may be empty) and message.
    #[error(
        "SubjectAccessReview failed: HTTP {code}{}{reason}: {message}",
        if reason.is_empty() { "" } else { " " }
    )]
    Api {
        code: u16,
        reason: String,
        message: String,
    },
    /// The request failed below HTTP (connect, TLS, decoding): the client's text.
    #[error("SubjectAccessReview failed: {0}")]
    Client(String),
    /// No answer within this many milliseconds.
    #[error("SubjectAccessReview: no answer within {0} ms")]
    NoAnswer(u128),
    /// A status both allowed and denied ([`BOTH_ALLOW_AND_DENY`]).
    #[error("{}", BOTH_ALLOW_AND_DENY)]
    BothAllowAndDeny,
}

/// The SHA-256 of a check's SubjectAccessReview spec: the cache key, in place of upstream's
/// `json.Marshal(r.Spec)` (webhook.go `Authorize`), so that an entry holds 32 bytes of it
/// whatever the user's size. Equal specs, equal digests; the encoding is unambiguous (every
/// string and list is length-prefixed, resource and non-resource checks are tagged), so
/// distinct specs differ in what is hashed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct SpecDigest([u8; 32]);

impl SpecDigest {
    /// Hashes every field the spec sends: user, uid, groups in order, extra (sorted by key),
    /// verb, and the resource attributes or the path.
    fn of(key: &CheckKey) -> Self {
        let mut h = Hasher(ring::digest::Context::new(&ring::digest::SHA256));
        let user = &key.user;
        h.text(&user.username);
        h.text(&user.uid);
        h.list(&user.groups);
        h.len(user.extra.len());
        for (name, values) in &user.extra {
            h.text(name);
            h.list(values);
        }
        h.text(&key.verb);
        match &key.attributes {
            Attributes::Resource(r) => {
                h.0.update(b"R");
                for field in [
                    &r.group,
                    &r.resource,
                    &r.subresource,
                    &r.namespace,
                    &r.name,
                    &r.field_selector,
                    &r.label_selector,
                ] {
                    h.text(field);
                }
            }
            Attributes::NonResource(path) => {
                h.0.update(b"N");
                h.text(path);
            }
        }
        let mut out = [0; 32];
        out.copy_from_slice(h.0.finish().as_ref());
        SpecDigest(out)
    }
}

/// Length-prefixed fields into a SHA-256 context, for [`SpecDigest::of`].
struct Hasher(ring::digest::Context);

impl Hasher {
    fn len(&mut self, n: usize) {
        self.0.update(&(n as u64).to_le_bytes());
    }

    fn text(&mut self, s: &str) {
        self.len(s.len());
        self.0.update(s.as_bytes());
    }

    fn list(&mut self, items: &[String]) {
        self.len(items.len());
        for item in items {
            self.text(item);
        }
    }
}

/// A cached answer, when it stops being fresh, and what it counts against [`CACHE_BYTES`].
struct Entry {
    decision: Decision,
    expires: Instant,
    bytes: usize,
}

/// The cache and the calls in flight, under one lock so that a check never misses both (a
/// call's answer enters the cache and leaves the in-flight map at once).
struct State {
    cache: LruCache<SpecDigest, Entry>,
    /// What the cache's entries count together, at most [`CACHE_BYTES`].
    bytes: usize,
    /// Identical checks wait on the call's channel; `None` until it answers.
    in_flight: HashMap<SpecDigest, watch::Receiver<Option<Answer>>>,
}

impl State {
    fn new() -> Self {
        State {
            cache: LruCache::new(NonZeroUsize::new(CACHE_SIZE).expect("CACHE_SIZE is not zero")),
            bytes: 0,
            in_flight: HashMap::new(),
        }
    }

    /// The fresh cached decision for `key`; an expired entry is removed (the LRU expire
    /// cache's `Get`).
    fn fresh(&mut self, key: &SpecDigest, now: Instant) -> Option<Decision> {
        match self.cache.get(key) {
            Some(entry) if entry.expires > now => Some(entry.decision.clone()),
            Some(_) => {
                self.remove(key);
                None
            }
            None => None,
        }
    }

    fn remove(&mut self, key: &SpecDigest) {
        if let Some(entry) = self.cache.pop(key) {
            self.bytes -= entry.bytes;
        }
    }

    fn pop_lru(&mut self) {
        if let Some((_, entry)) = self.cache.pop_lru() {
            self.bytes -= entry.bytes;
        }
    }

    /// Caches `decision` for `key` until `expires` (the LRU expire cache's `Add`), within
    /// [`CACHE_SIZE`] entries and [`CACHE_BYTES`]: expired entries at the least recently used
    /// end leave first, then the least recently used until the answer fits. An answer larger
    /// than the whole budget is not cached.
    fn insert(&mut self, key: SpecDigest, decision: &Decision, expires: Instant, now: Instant) {
        let bytes =
            ENTRY_OVERHEAD + decision.reason.len() + decision.error.as_ref().map_or(0, String::len);
        self.remove(&key);
        if bytes > CACHE_BYTES {
            return;
        }
        while self
            .cache
            .peek_lru()
            .is_some_and(|(_, entry)| entry.expires <= now)
        {
            self.pop_lru();
        }
        while self.bytes + bytes > CACHE_BYTES {
            self.pop_lru();
        }
        // A clone's strings are allocated at their length: `bytes` is what they hold.
        let entry = Entry {
            decision: decision.clone(),
            expires,
            bytes,
        };
        if let Some((_, evicted)) = self.cache.push(key, entry) {
            self.bytes -= evicted.bytes;
        }
        self.bytes += bytes;
    }
}

/// The authorizer: SubjectAccessReviews with kube-apiserver's webhook cache, coalescing and a
/// per-check budget. Cheap to share (`Arc` inside); clones share the cache.
#[derive(Clone)]
pub struct SubjectAccessReviews {
    inner: Arc<Inner>,
}

struct Inner {
    api: Api<SubjectAccessReview>,
    ttl: CacheTtl,
    state: Mutex<State>,
}

impl std::fmt::Debug for SubjectAccessReviews {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubjectAccessReviews")
            .field("ttl", &self.inner.ttl)
            .finish_non_exhaustive()
    }
}

/// What the caller's check path does next.
enum Step {
    /// A fresh cached decision.
    Done(Decision),
    /// Not asked: [`MAX_CALLS_IN_FLIGHT`] calls are already waiting for the API.
    Refused,
    /// Wait for a call's answer; `joined` when another check started the call.
    Wait {
        rx: watch::Receiver<Option<Answer>>,
        joined: bool,
    },
}

impl SubjectAccessReviews {
    /// An authorizer calling the API with `client`, caching answers for `ttl`. Build the client
    /// with [`SubjectAccessReviews::client`]: kube-rs' default client re-sends failed calls
    /// with backoff, past any admission's deadline.
    pub fn new(client: Client, ttl: CacheTtl) -> Self {
        SubjectAccessReviews {
            inner: Arc::new(Inner {
                api: Api::all(client),
                ttl,
                state: Mutex::new(State::new()),
            }),
        }
    }

    /// The Kubernetes client for [`SubjectAccessReviews::new`]: the configuration
    /// `kube_client::config` finds (`kubeconfig`, else `KUBECONFIG` / `~/.kube/config`,
    /// else in-cluster), with kube-rs' retries off, because the admission's deadline bounds
    /// every call and a failed check is an errored decision, not a reason to wait.
    ///
    /// # Errors
    /// [`ClientError`] when no configuration is found or it does not make a client.
    pub async fn client(kubeconfig: Option<&Path>) -> Result<Client, ClientError> {
        let mut config = crate::kube_client::config(kubeconfig).await?;
        config.default_retry = false;
        Client::try_from(config).map_err(|e| ClientError::Client(crate::kube_client::KubeError(e)))
    }

    /// The decision for `key` within `budget`: from the cache when fresh, else from an
    /// identical check's call already in flight, else from a new SubjectAccessReview. A
    /// timeout, a failed call or an answer both allowed and denied is an errored decision
    /// (`allowed: false`, `error: Some(why)`), never cached. Never fails otherwise.
    pub async fn decide(&self, key: &CheckKey, budget: Duration) -> Decision {
        self.check(key, budget).await.0
    }

    /// [`SubjectAccessReviews::decide`], and how the check was answered. Counts the check in
    /// `admission_proxy_authorizer_checks_total{result}`.
    pub async fn check(&self, key: &CheckKey, budget: Duration) -> (Decision, Outcome) {
        let (decision, outcome) = match self.start(key) {
            Step::Done(decision) => (decision, Outcome::Cached),
            Step::Refused => (
                errored(format!(
                    "SubjectAccessReview not sent: {MAX_CALLS_IN_FLIGHT} calls already wait for the API server"
                )),
                Outcome::Error,
            ),
            Step::Wait { mut rx, joined } => {
                match tokio::time::timeout(budget, rx.wait_for(Option::is_some)).await {
                    Ok(Ok(answer)) => match answer.clone() {
                        Some(Ok(decision)) if joined => (decision, Outcome::Coalesced),
                        Some(Ok(decision)) if decision.allowed => (decision, Outcome::Allowed),
                        Some(Ok(decision)) => (decision, Outcome::Denied),
                        Some(Err(why)) => (errored(why.to_string()), Outcome::Error),
                        None => (abandoned(), Outcome::Error),
                    },
                    // The call's task ended without answering (the runtime is shutting down).
                    Ok(Err(_)) => (abandoned(), Outcome::Error),
                    Err(_) => (
                        errored(format!(
                            "SubjectAccessReview: no answer within {} ms",
                            budget.as_millis()
                        )),
                        Outcome::Error,
                    ),
                }
            }
        };
        crate::metrics::authorizer_check(outcome.as_str());
        (decision, outcome)
    }

    /// Every decision for `keys`, in order, resolved concurrently within one `budget`
    /// (identical keys share one call).
    pub async fn decide_all(&self, keys: &[CheckKey], budget: Duration) -> Vec<Decision> {
        futures::future::join_all(keys.iter().map(|key| self.decide(key, budget))).await
    }

    /// Under the lock: the cached answer, or the channel of the call in flight (joined or
    /// started now). The key's digest is taken before the lock.
    fn start(&self, key: &CheckKey) -> Step {
        let digest = SpecDigest::of(key);
        let mut state = self.inner.state.lock();
        if let Some(decision) = state.fresh(&digest, Instant::now()) {
            return Step::Done(decision);
        }
        // A call whose task ended without answering (a panic, the runtime shutting down) left
        // a closed channel: start a new call rather than join it.
        if let Some(rx) = state
            .in_flight
            .get(&digest)
            .filter(|rx| rx.has_changed().is_ok())
        {
            return Step::Wait {
                rx: rx.clone(),
                joined: true,
            };
        }
        if state.in_flight.len() >= MAX_CALLS_IN_FLIGHT {
            return Step::Refused;
        }
        let (tx, rx) = watch::channel(None);
        state.in_flight.insert(digest, rx.clone());
        drop(state);
        let inner = self.inner.clone();
        // The task holds the caller's user only while the call is under way.
        let key = key.clone();
        tokio::spawn(async move {
            let answer = inner.call(&key).await;
            match &answer {
                Ok(decision) => {
                    let ttl = inner.ttl.of(decision);
                    let cache = should_cache(&key) && !ttl.is_zero();
                    let now = Instant::now();
                    let mut state = inner.state.lock();
                    if cache {
                        state.insert(digest, decision, now + ttl, now);
                    }
                    state.in_flight.remove(&digest);
                }
                Err(why) => {
                    inner.state.lock().in_flight.remove(&digest);
                    tracing::debug!(error = %why, "SubjectAccessReview failed; not cached");
                }
            }
            let _ = tx.send(Some(answer));
        });
        Step::Wait { rx, joined: false }
    }
}

impl SubjectAccessReviews {
    /// The fresh cached decision for `key`, if any: a look at the cache (tests, diagnostics),
    /// not a check, so not counted; never calls the API.
    pub fn peek(&self, key: &CheckKey) -> Option<Decision> {
        let digest = SpecDigest::of(key);
        self.inner.state.lock().fresh(&digest, Instant::now())
    }
}

impl DecisionCache for SubjectAccessReviews {
    /// A check answered from the cache during the evaluation (counted `cached`), so that it
    /// needs no round of its own.
    fn cached(&self, key: &CheckKey) -> Option<Decision> {
        let decision = self.peek(key);
        if decision.is_some() {
            crate::metrics::authorizer_check(Outcome::Cached.as_str());
        }
        decision
    }
}

impl Inner {
    /// One SubjectAccessReview, capped at [`CALL_CAP`]: the decision it gives, or why there is
    /// none. Records `admission_proxy_subjectaccessreview_duration_seconds`.
    async fn call(&self, key: &CheckKey) -> Answer {
        let review = SubjectAccessReview {
            spec: spec(key),
            ..Default::default()
        };
        let started = Instant::now();
        let result =
            tokio::time::timeout(CALL_CAP, self.api.create(&PostParams::default(), &review)).await;
        crate::metrics::subjectaccessreview_duration(started.elapsed());
        match result {
            Ok(Ok(review)) => answer(review.status.unwrap_or_default()),
            Ok(Err(kube::Error::Api(status))) => Err(CallError::Api {
                code: status.code,
                reason: status.reason,
                message: status.message,
            }),
            Ok(Err(e)) => Err(CallError::Client(e.to_string())),
            Err(_) => Err(CallError::NoAnswer(CALL_CAP.as_millis())),
        }
    }
}

/// The decision a SubjectAccessReview status gives (`evaluationError` is what the library's
/// `error()` reads, `pkg/registry/authorization/subjectaccessreview/rest.go` sets it from the
/// authorizer's error), or upstream's error for a status both allowed and denied.
fn answer(status: SubjectAccessReviewStatus) -> Answer {
    if status.allowed && status.denied == Some(true) {
        return Err(CallError::BothAllowAndDeny);
    }
    Ok(Decision {
        allowed: status.allowed,
        reason: status.reason.unwrap_or_default(),
        error: status.evaluation_error.filter(|e| !e.is_empty()),
    })
}

/// The errored decision of a check whose call's task ended without answering (the runtime is
/// shutting down).
fn abandoned() -> Decision {
    errored("SubjectAccessReview: the call was abandoned".to_string())
}

/// An errored decision: not allowed, no reason, `error` set.
fn errored(why: String) -> Decision {
    Decision {
        allowed: false,
        reason: String::new(),
        error: Some(why),
    }
}

/// The SubjectAccessReview spec of `key`, empty fields left out as Go's `omitempty` does;
/// `version` is always `"*"`, `verb` and `resource` always present.
fn spec(key: &CheckKey) -> SubjectAccessReviewSpec {
    let user = &key.user;
    let mut spec = SubjectAccessReviewSpec {
        user: non_empty(&user.username),
        uid: non_empty(&user.uid),
        groups: (!user.groups.is_empty()).then(|| user.groups.clone()),
        extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
        ..Default::default()
    };
    match &key.attributes {
        Attributes::Resource(r) => {
            spec.resource_attributes = Some(ResourceAttributes {
                namespace: non_empty(&r.namespace),
                verb: Some(key.verb.clone()),
                group: non_empty(&r.group),
                version: Some("*".to_string()),
                resource: Some(r.resource.clone()),
                subresource: non_empty(&r.subresource),
                name: non_empty(&r.name),
                field_selector: non_empty(&r.field_selector).map(|raw| FieldSelectorAttributes {
                    raw_selector: Some(raw),
                    requirements: None,
                }),
                label_selector: non_empty(&r.label_selector).map(|raw| LabelSelectorAttributes {
                    raw_selector: Some(raw),
                    requirements: None,
                }),
            });
        }
        Attributes::NonResource(path) => {
            spec.non_resource_attributes = Some(NonResourceAttributes {
                path: Some(path.clone()),
                verb: Some(key.verb.clone()),
            });
        }
    }
    spec
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// webhook.go `shouldCache`: the attributes' combined length (namespace, verb, group, version,
/// resource, subresource, name, path) is below [`MAX_CACHED_ATTRIBUTES_SIZE`]. A resource
/// check's version is `"*"` and its path empty; a non-resource check has only verb and path.
fn should_cache(key: &CheckKey) -> bool {
    let size = key.verb.len()
        + match &key.attributes {
            Attributes::Resource(r) => {
                r.namespace.len()
                    + r.group.len()
                    + "*".len()
                    + r.resource.len()
                    + r.subresource.len()
                    + r.name.len()
            }
            Attributes::NonResource(path) => path.len(),
        };
    size < MAX_CACHED_ATTRIBUTES_SIZE
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::matching::authz::{self, User};

    /// `update` on apps deployments.
    fn resource(namespace: &str, name: &str, field: &str, label: &str) -> CheckKey {
        key(
            "update",
            Attributes::Resource(authz::ResourceAttributes {
                group: "apps".into(),
                resource: "deployments".into(),
                subresource: String::new(),
                namespace: namespace.into(),
                name: name.into(),
                field_selector: field.into(),
                label_selector: label.into(),
            }),
        )
    }

    fn key(verb: &str, attributes: Attributes) -> CheckKey {
        CheckKey {
            user: Arc::new(User::default()),
            verb: verb.into(),
            attributes,
        }
    }

    fn spec_json(user: User, key: CheckKey) -> serde_json::Value {
        serde_json::to_value(spec(&CheckKey {
            user: Arc::new(user),
            ..key
        }))
        .unwrap()
    }

    #[test]
    fn resource_spec_is_the_review_kube_apiserver_sends() {
        let user = User {
            username: "alice".into(),
            uid: "u-1".into(),
            groups: vec!["dev".into(), "system:authenticated".into()],
            extra: BTreeMap::from([("scopes".into(), vec!["a".into(), "b".into()])]),
        };
        let got = spec_json(user, resource("team-a", "web", "spec.x=1", "app=web"));
        assert_eq!(
            got,
            json!({
                "user": "alice",
                "uid": "u-1",
                "groups": ["dev", "system:authenticated"],
                "extra": {"scopes": ["a", "b"]},
                "resourceAttributes": {
                    "namespace": "team-a",
                    "verb": "update",
                    "group": "apps",
                    "version": "*",
                    "resource": "deployments",
                    "name": "web",
                    "fieldSelector": {"rawSelector": "spec.x=1"},
                    "labelSelector": {"rawSelector": "app=web"},
                },
            })
        );
    }

    #[test]
    fn empty_fields_are_left_out_as_omitempty_does() {
        let core = key(
            "list",
            Attributes::Resource(authz::ResourceAttributes {
                resource: "pods".into(),
                ..authz::ResourceAttributes::default()
            }),
        );
        assert_eq!(
            spec_json(User::default(), core),
            json!({"resourceAttributes": {"verb": "list", "version": "*", "resource": "pods"}})
        );
        let mut sub = resource("", "", "", "");
        if let Attributes::Resource(r) = &mut sub.attributes {
            r.subresource = "status".into();
        }
        assert_eq!(
            spec_json(User::default(), sub)["resourceAttributes"],
            json!({"verb": "update", "group": "apps", "version": "*", "resource": "deployments", "subresource": "status"})
        );
    }

    #[test]
    fn non_resource_spec_has_path_and_verb() {
        let user = User {
            username: "system:serviceaccount:ops:bot".into(),
            ..User::default()
        };
        let healthz = key("get", Attributes::NonResource("/healthz".into()));
        assert_eq!(
            spec_json(user, healthz),
            json!({
                "user": "system:serviceaccount:ops:bot",
                "nonResourceAttributes": {"path": "/healthz", "verb": "get"},
            })
        );
    }

    #[test]
    fn should_cache_stops_at_ten_thousand_bytes() {
        // verb "get" (3) + path: 9996 bytes make 9999, cached; one more is not.
        let path = |n: usize| key("get", Attributes::NonResource("/".repeat(n)));
        assert!(should_cache(&path(9996)));
        assert!(!should_cache(&path(9997)));
        // namespace, verb, group, "*", resource, subresource and name all count; selectors
        // do not (upstream counts only these).
        let fixed = "update".len() + "apps".len() + 1 + "deployments".len();
        let name = "n".repeat(MAX_CACHED_ATTRIBUTES_SIZE - fixed - 1);
        let long = "x".repeat(20_000);
        assert!(should_cache(&resource("", &name, &long, &long)));
        assert!(!should_cache(&resource("a", &name, "", "")));
    }

    #[test]
    fn allowed_answers_live_for_the_authorized_ttl_others_for_the_unauthorized() {
        let ttl = CacheTtl::default();
        assert_eq!(ttl.authorized, Duration::from_secs(300));
        assert_eq!(ttl.unauthorized, Duration::from_secs(30));
        let allowed = Decision {
            allowed: true,
            ..Decision::default()
        };
        assert_eq!(ttl.of(&allowed), Duration::from_secs(300));
        assert_eq!(ttl.of(&Decision::default()), Duration::from_secs(30));
    }

    #[test]
    fn a_status_becomes_a_decision() {
        let status = |allowed, denied, reason: &str, error: &str| SubjectAccessReviewStatus {
            allowed,
            denied,
            reason: non_empty(reason),
            evaluation_error: Some(error.to_string()),
        };
        assert_eq!(
            answer(status(true, None, "RBAC: allowed", "")),
            Ok(Decision {
                allowed: true,
                reason: "RBAC: allowed".into(),
                error: None
            })
        );
        assert_eq!(
            answer(status(false, Some(true), "", "webhook down")),
            Ok(Decision {
                allowed: false,
                reason: String::new(),
                error: Some("webhook down".into())
            })
        );
        assert_eq!(
            answer(status(true, Some(true), "", "")),
            Err(CallError::BothAllowAndDeny)
        );
    }

    fn user(username: &str, groups: &[&str], extra: &[(&str, &[&str])]) -> Arc<User> {
        Arc::new(User {
            username: username.into(),
            uid: String::new(),
            groups: groups.iter().map(ToString::to_string).collect(),
            extra: extra
                .iter()
                .map(|(k, v)| (k.to_string(), v.iter().map(ToString::to_string).collect()))
                .collect(),
        })
    }

    #[test]
    fn equal_specs_share_a_digest_and_distinct_ones_do_not() {
        let with = |user: Arc<User>, key: CheckKey| SpecDigest::of(&CheckKey { user, ..key });
        let healthz = key("get", Attributes::NonResource("/healthz".into()));
        let base = with(user("alice", &["a", "b"], &[]), healthz.clone());
        assert_eq!(base, with(user("alice", &["a", "b"], &[]), healthz.clone()));
        // Field boundaries and order are part of the digest.
        let distinct = [
            base,
            with(user("alice", &["b", "a"], &[]), healthz.clone()),
            with(user("alice", &["ab"], &[]), healthz.clone()),
            with(user("alice", &["a", "b", ""], &[]), healthz.clone()),
            with(user("alicea", &["b"], &[]), healthz.clone()),
            with(
                user("alice", &["a", "b"], &[("x", &["y"])]),
                healthz.clone(),
            ),
            with(user("alice", &["a", "b"], &[("xy", &[])]), healthz.clone()),
            with(
                user("alice", &["a", "b"], &[("x", &["y", ""])]),
                healthz.clone(),
            ),
            with(
                user("alice", &["a", "b"], &[]),
                key("get", Attributes::NonResource("/healthz/".into())),
            ),
            with(
                user("alice", &["a", "b"], &[]),
                key("gett", Attributes::NonResource("healthz".into())),
            ),
            with(user("alice", &["a", "b"], &[]), resource("", "", "", "")),
            with(user("alice", &["a", "b"], &[]), resource("n", "", "", "")),
            with(user("alice", &["a", "b"], &[]), resource("", "n", "", "")),
            with(user("alice", &["a", "b"], &[]), resource("", "", "n", "")),
            with(user("alice", &["a", "b"], &[]), resource("", "", "", "n")),
        ];
        for (i, a) in distinct.iter().enumerate() {
            for b in &distinct[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    fn digest(i: usize) -> SpecDigest {
        SpecDigest::of(&key("get", Attributes::NonResource(format!("/{i}"))))
    }

    fn allowed(reason_bytes: usize) -> Decision {
        Decision {
            allowed: true,
            reason: "r".repeat(reason_bytes),
            error: None,
        }
    }

    #[test]
    fn the_cache_stays_within_its_byte_budget() {
        let mut state = State::new();
        let now = Instant::now();
        let later = now + Duration::from_secs(60);
        let big = CACHE_BYTES / 4;
        for i in 0..10 {
            state.insert(digest(i), &allowed(big), later, now);
            assert!(state.bytes <= CACHE_BYTES, "{}", state.bytes);
        }
        // Three of a quarter each fit beside their overhead; the oldest went first.
        assert_eq!(state.cache.len(), 3);
        assert!(state.fresh(&digest(9), now).is_some());
        assert!(state.fresh(&digest(6), now).is_none());
        // Replacing an entry counts it once.
        state.insert(digest(9), &allowed(10), later, now);
        assert_eq!(
            state.bytes,
            2 * (ENTRY_OVERHEAD + big) + ENTRY_OVERHEAD + 10
        );
        // An answer larger than the whole budget is not cached, and evicts nothing.
        state.insert(digest(20), &allowed(CACHE_BYTES), later, now);
        assert_eq!(state.cache.len(), 3);
        assert!(state.fresh(&digest(20), now).is_none());
        // Small answers: the entry count is the bound, and the bytes follow evictions.
        let mut state = State::new();
        for i in 0..CACHE_SIZE + 10 {
            state.insert(digest(i), &allowed(0), later, now);
        }
        assert_eq!(state.cache.len(), CACHE_SIZE);
        assert_eq!(state.bytes, CACHE_SIZE * ENTRY_OVERHEAD);
    }

    #[test]
    fn expired_entries_at_the_cold_end_leave_when_an_answer_is_added() {
        let mut state = State::new();
        let now = Instant::now();
        for i in 0..100 {
            state.insert(digest(i), &allowed(1000), now + Duration::from_secs(1), now);
        }
        let fresh_for_long = now + Duration::from_secs(600);
        state.insert(digest(100), &allowed(0), fresh_for_long, now);
        assert_eq!(state.cache.len(), 101, "nothing has expired yet");
        // Past their second, the next answer takes every expired entry out.
        let after = now + Duration::from_secs(2);
        state.insert(digest(101), &allowed(0), fresh_for_long, after);
        assert_eq!(state.cache.len(), 2);
        assert_eq!(state.bytes, 2 * ENTRY_OVERHEAD);
        // A lookup of an expired entry removes it and its bytes.
        state.insert(
            digest(102),
            &allowed(5),
            after + Duration::from_secs(1),
            after,
        );
        assert!(state
            .fresh(&digest(102), after + Duration::from_secs(5))
            .is_none());
        assert_eq!(state.bytes, 2 * ENTRY_OVERHEAD);
    }

    #[test]
    fn outcomes_are_the_metric_s_label_values() {
        assert_eq!(
            Outcome::ALL.map(Outcome::as_str),
            crate::metrics::AUTHORIZER_CHECK_RESULTS
        );
    }
}
