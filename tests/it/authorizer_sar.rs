//! `authorizer::SubjectAccessReviews` against a stand-in API server (`common::sar_api`): the
//! exact review sent, allowed and denied answers, the cache (a repeat makes no call; answers
//! expire after their TTL), coalescing (20 identical checks in flight, one call), distinct keys
//! making distinct calls, 403 and 500 as errored decisions never cached, a slow API: an
//! errored decision after the budget whose late answer still fills the cache, and what the
//! cache holds: no reference to the caller's `userInfo`, and no more than its byte budget.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use admission_proxy::authorizer::{CacheTtl, Outcome, SubjectAccessReviews, CACHE_BYTES};
use admission_proxy::matching::authz::{Attributes, CheckKey, ResourceAttributes, User};
use serde_json::json;

use crate::common::sar_api::{SarApi, SarStatus, SAR_PATH};
use crate::common::Workspace;

/// Budget of one check when the test does not measure it.
const BUDGET: Duration = Duration::from_secs(5);

/// Every test ends within this.
const TEST_LIMIT: Duration = Duration::from_secs(30);

/// The stand-in, and an authorizer with `ttl` using it through a kubeconfig.
async fn setup(name: &str, ttl: CacheTtl) -> (SarApi, SubjectAccessReviews, Workspace) {
    let api = SarApi::start();
    let ws = Workspace::new(&format!("sar-{name}"));
    let kubeconfig = ws.dir.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig);
    let client = SubjectAccessReviews::client(Some(&kubeconfig))
        .await
        .unwrap();
    (api, SubjectAccessReviews::new(client, ttl), ws)
}

fn user(name: &str) -> Arc<User> {
    Arc::new(User {
        username: name.into(),
        uid: format!("uid-{name}"),
        groups: vec!["system:authenticated".into()],
        extra: BTreeMap::new(),
    })
}

/// `name` may `verb` deployments named `web` in team-a?
fn deployments(name: &str, verb: &str) -> CheckKey {
    CheckKey {
        user: user(name),
        verb: verb.into(),
        attributes: Attributes::Resource(ResourceAttributes {
            group: "apps".into(),
            resource: "deployments".into(),
            namespace: "team-a".into(),
            name: "web".into(),
            ..ResourceAttributes::default()
        }),
    }
}

async fn bounded<F: std::future::Future>(test: F) -> F::Output {
    tokio::time::timeout(TEST_LIMIT, test)
        .await
        .expect("test exceeded its time limit")
}

#[tokio::test]
async fn allowed_and_denied_answers_from_the_exact_review() {
    bounded(async {
        let (api, sar, _ws) = setup("answers", CacheTtl::default()).await;
        api.allow(
            "alice",
            "update",
            "deployments",
            "RBAC: allowed by RoleBinding \"ops\"",
        );
        api.deny("bob", "update", "deployments", "breakglass: no ticket");
        api.allow("carol", "get", "/healthz", "");
        api.answer(
            "dave",
            "update",
            "deployments",
            SarStatus {
                evaluation_error: "webhook authorizer unavailable".into(),
                ..SarStatus::no_opinion()
            },
        );

        let (alice, outcome) = sar.check(&deployments("alice", "update"), BUDGET).await;
        assert!(alice.allowed);
        assert_eq!(alice.reason, "RBAC: allowed by RoleBinding \"ops\"");
        assert_eq!(alice.error, None);
        assert_eq!(outcome, Outcome::Allowed);
        assert_eq!(
            api.bodies()[0],
            json!({
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "metadata": {},
                "spec": {
                    "user": "alice",
                    "uid": "uid-alice",
                    "groups": ["system:authenticated"],
                    "resourceAttributes": {
                        "namespace": "team-a",
                        "verb": "update",
                        "group": "apps",
                        "version": "*",
                        "resource": "deployments",
                        "name": "web",
                    },
                },
            })
        );
        assert!(api.requests()[0].starts_with(&format!("POST {SAR_PATH}")));

        let (bob, outcome) = sar.check(&deployments("bob", "update"), BUDGET).await;
        assert!(!bob.allowed);
        assert_eq!(bob.reason, "breakglass: no ticket");
        assert_eq!(bob.error, None);
        assert_eq!(outcome, Outcome::Denied);

        let carol = CheckKey {
            user: Arc::new(User {
                username: "carol".into(),
                ..User::default()
            }),
            verb: "get".into(),
            attributes: Attributes::NonResource("/healthz".into()),
        };
        let decision = sar.decide(&carol, BUDGET).await;
        assert!(decision.allowed);
        assert_eq!(
            api.bodies()[2]["spec"],
            json!({"user": "carol", "nonResourceAttributes": {"path": "/healthz", "verb": "get"}})
        );

        // An evaluationError is the decision's error (the library's errored()); an answer all
        // the same, cached like any denial.
        let (dave, outcome) = sar.check(&deployments("dave", "update"), BUDGET).await;
        assert!(!dave.allowed);
        assert_eq!(
            dave.error.as_deref(),
            Some("webhook authorizer unavailable")
        );
        assert_eq!(outcome, Outcome::Denied);
        assert_eq!(
            sar.check(&deployments("dave", "update"), BUDGET).await.1,
            Outcome::Cached
        );
        assert_eq!(api.calls(), 4);
    })
    .await;
}

#[tokio::test]
async fn a_second_identical_check_is_answered_from_the_cache() {
    bounded(async {
        let (api, sar, _ws) = setup("cache", CacheTtl::default()).await;
        api.allow("alice", "update", "deployments", "ok");
        let key = deployments("alice", "update");
        assert_eq!(sar.peek(&key), None, "nothing cached before the first call");
        let first = sar.decide(&key, BUDGET).await;
        assert_eq!(api.calls(), 1);
        let (second, outcome) = sar.check(&key, BUDGET).await;
        assert_eq!(outcome, Outcome::Cached);
        assert_eq!(second, first);
        assert_eq!(sar.peek(&key), Some(first), "peek() reads the cache");
        assert_eq!(api.calls(), 1, "no second call");
    })
    .await;
}

#[tokio::test]
async fn twenty_concurrent_identical_checks_make_one_call() {
    bounded(async {
        let (api, sar, _ws) = setup("coalesce", CacheTtl::default()).await;
        api.allow("alice", "update", "deployments", "ok");
        // The answer waits so that all twenty are in flight together.
        api.delay(Duration::from_millis(300));
        let key = deployments("alice", "update");
        let checks = (0..20).map(|_| sar.check(&key, BUDGET));
        let answers = futures::future::join_all(checks).await;
        assert_eq!(api.calls(), 1);
        assert!(answers.iter().all(|(d, _)| d.allowed && d.reason == "ok"));
        let count = |o: Outcome| answers.iter().filter(|(_, x)| *x == o).count();
        assert_eq!(count(Outcome::Allowed), 1, "{answers:?}");
        assert_eq!(count(Outcome::Coalesced), 19, "{answers:?}");
    })
    .await;
}

#[tokio::test]
async fn distinct_users_and_verbs_make_distinct_calls() {
    bounded(async {
        let (api, sar, _ws) = setup("distinct", CacheTtl::default()).await;
        api.allow("alice", "update", "deployments", "ok");
        let keys = [
            deployments("alice", "update"),
            deployments("bob", "update"),
            deployments("alice", "delete"),
            deployments("alice", "update"),
        ];
        let decisions = sar.decide_all(&keys, BUDGET).await;
        let allowed: Vec<bool> = decisions.iter().map(|d| d.allowed).collect();
        assert_eq!(allowed, [true, false, false, true]);
        assert_eq!(api.calls(), 3, "the repeated key shares its call");
        let mut users: Vec<String> = api
            .bodies()
            .iter()
            .map(|b| {
                format!(
                    "{} {}",
                    b["spec"]["user"], b["spec"]["resourceAttributes"]["verb"]
                )
            })
            .collect();
        users.sort();
        assert_eq!(
            users,
            [
                "\"alice\" \"delete\"",
                "\"alice\" \"update\"",
                "\"bob\" \"update\""
            ]
        );
    })
    .await;
}

#[tokio::test]
async fn forbidden_and_server_errors_are_errored_decisions_never_cached() {
    bounded(async {
        let (api, sar, _ws) = setup("errors", CacheTtl::default()).await;
        api.allow("alice", "update", "deployments", "ok");
        let key = deployments("alice", "update");

        api.fail_with(Some(403));
        let (decision, outcome) = sar.check(&key, BUDGET).await;
        assert_eq!(outcome, Outcome::Error);
        assert!(!decision.allowed);
        assert_eq!(decision.reason, "");
        let error = decision.error.unwrap();
        assert!(
            error.starts_with("SubjectAccessReview failed: HTTP 403 Forbidden: ")
                && error.contains("cannot create resource \"subjectaccessreviews\""),
            "{error}"
        );
        assert_eq!(sar.peek(&key), None);

        api.fail_with(Some(500));
        let (decision, outcome) = sar.check(&key, BUDGET).await;
        assert_eq!(outcome, Outcome::Error);
        assert_eq!(
            decision.error.as_deref(),
            Some(
                "SubjectAccessReview failed: HTTP 500 InternalError: Internal error occurred: \
                 authorizer unavailable"
            )
        );
        assert_eq!(api.calls(), 2, "the 403 was not cached");

        // Both allowed and denied: upstream's error, not cached either.
        api.fail_with(None);
        api.rule(|_| SarStatus {
            allowed: true,
            denied: true,
            ..SarStatus::default()
        });
        let (decision, outcome) = sar.check(&key, BUDGET).await;
        assert_eq!(outcome, Outcome::Error);
        assert_eq!(
            decision.error.as_deref(),
            Some("webhook subject access review returned both allow and deny response")
        );
        assert!(!decision.allowed);

        api.rule(|_| SarStatus::allow("ok now"));
        let (decision, outcome) = sar.check(&key, BUDGET).await;
        assert_eq!(outcome, Outcome::Allowed);
        assert_eq!(decision.reason, "ok now");
        assert_eq!(api.calls(), 4, "no error was cached");
    })
    .await;
}

#[tokio::test]
async fn a_slow_api_is_an_errored_decision_after_the_budget_and_its_late_answer_is_cached() {
    bounded(async {
        let (api, sar, _ws) = setup("slow", CacheTtl::default()).await;
        api.allow("alice", "update", "deployments", "late but fine");
        api.delay(Duration::from_millis(800));
        let key = deployments("alice", "update");
        let budget = Duration::from_millis(200);
        let started = Instant::now();
        let (decision, outcome) = sar.check(&key, budget).await;
        let took = started.elapsed();
        assert_eq!(outcome, Outcome::Error);
        assert_eq!(
            decision.error.as_deref(),
            Some("SubjectAccessReview: no answer within 200 ms")
        );
        assert!(
            took >= budget && took < Duration::from_millis(600),
            "answered after {took:?}"
        );
        // The call goes on without its waiter: its answer lands in the cache.
        let deadline = Instant::now() + Duration::from_secs(5);
        while sar.peek(&key).is_none() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (decision, outcome) = sar.check(&key, budget).await;
        assert_eq!(outcome, Outcome::Cached);
        assert_eq!(decision.reason, "late but fine");
        assert_eq!(api.calls(), 1);
    })
    .await;
}

/// Waits until `key`'s cached answer has expired (bounded: 100 x 10 ms).
async fn expired(sar: &SubjectAccessReviews, key: &CheckKey) {
    for _ in 0..100 {
        if sar.peek(key).is_none() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the cached answer never expired");
}

#[tokio::test]
async fn answers_expire_after_their_ttl() {
    bounded(async {
        let ttl = CacheTtl {
            authorized: Duration::from_millis(600),
            unauthorized: Duration::from_millis(100),
        };
        let (api, sar, _ws) = setup("ttl", ttl).await;
        api.allow("alice", "update", "deployments", "ok");
        let allowed = deployments("alice", "update");
        let denied = deployments("bob", "update");
        assert!(sar.decide(&allowed, BUDGET).await.allowed);
        assert!(!sar.decide(&denied, BUDGET).await.allowed);
        assert_eq!(api.calls(), 2);

        // The denial expires first (a wait on its expiry, bounded): the allowed answer is
        // still fresh then.
        expired(&sar, &denied).await;
        assert_eq!(sar.check(&allowed, BUDGET).await.1, Outcome::Cached);
        assert_eq!(sar.check(&denied, BUDGET).await.1, Outcome::Denied);
        assert_eq!(api.calls(), 3);

        // Then the allowed answer expires too.
        expired(&sar, &allowed).await;
        assert_eq!(sar.peek(&allowed), None);
        assert_eq!(sar.check(&allowed, BUDGET).await.1, Outcome::Allowed);
        assert_eq!(api.calls(), 4);
    })
    .await;
}

/// The cache is keyed by a digest of the review's spec: a cached answer holds no reference to
/// the caller's `userInfo` (a 20,000-group user is about 1 MB a request, and the cache used to
/// keep every one of them for the whole TTL).
#[tokio::test]
async fn a_cached_answer_keeps_no_reference_to_the_caller_s_user() {
    bounded(async {
        let (api, sar, _ws) = setup("no-user-kept", CacheTtl::default()).await;
        api.allow("alice", "update", "deployments", "ok");
        let key = deployments("alice", "update");
        let user = key.user.clone();
        let decision = sar.decide(&key, BUDGET).await;
        assert!(decision.allowed);
        drop(key);
        // The call's task ends just after it answers: wait for it, bounded.
        let deadline = Instant::now() + Duration::from_secs(2);
        while Arc::strong_count(&user) > 1 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(
            Arc::strong_count(&user),
            1,
            "the cache holds a reference to the user"
        );
        assert_eq!(
            sar.peek(&deployments("alice", "update")),
            Some(decision),
            "the answer is cached all the same"
        );
        assert_eq!(api.calls(), 1);
    })
    .await;
}

/// Answers whose reasons add up to more than the cache's byte budget push the least recently
/// used out, long before the 8,192 entries kube-apiserver's cache counts.
#[tokio::test]
async fn the_cache_holds_at_most_its_byte_budget() {
    bounded(async {
        let (api, sar, _ws) = setup("bytes", CacheTtl::default()).await;
        // 16 answers of an eighth of the budget each: twice the budget.
        let reason = "r".repeat(CACHE_BYTES / 8);
        api.rule(move |_| SarStatus::allow(&reason));
        let keys: Vec<CheckKey> = (0..16)
            .map(|i| deployments(&format!("user-{i}"), "update"))
            .collect();
        for key in &keys {
            assert!(sar.decide(key, BUDGET).await.allowed);
        }
        assert_eq!(api.calls(), 16);
        let cached: Vec<bool> = keys.iter().map(|k| sar.peek(k).is_some()).collect();
        let kept = cached.iter().filter(|c| **c).count();
        assert!(
            (1..8).contains(&kept),
            "fewer than 8 answers of an eighth of the budget are kept: {cached:?}"
        );
        assert!(
            cached[16 - kept..].iter().all(|c| *c),
            "the most recent answers are the ones kept: {cached:?}"
        );
    })
    .await;
}
