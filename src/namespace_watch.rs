//! Namespaces from the cluster itself (`serve --watch-namespaces`): a kube-rs watch of
//! Namespaces (list, then watch; re-list after 410 Gone and dropped
//! connections with kube-runtime's backoff) published as [`Namespaces`] snapshots, and
//! kube-apiserver's lister-miss fallback, a live GET of a namespace not yet in the cache
//! (`Provider.GetNamespace` in
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/namespace/matcher.go`).
//! Depends on `matching` and `metrics`.
//!
//! Whole Namespaces are watched, as kube-apiserver's informer holds them: a policy's
//! `namespaceObject` reads `spec`, `status` and annotations, which a metadata-only watch
//! (`PartialObjectMetadata`) does not carry. Only what admission reads is kept (labels and
//! `CreateNamespaceObject`'s fields: `managedFields` are dropped). The watch needs `get`,
//! `list` and `watch` on `namespaces` (deploy/base/rbac.yaml).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwapOption;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};

use crate::matching::Namespaces;

/// What a live lookup of one namespace found.
#[derive(Debug)]
pub(crate) enum Lookup {
    /// The namespace exists: its labels (the automatic name label added).
    Found(Namespaces),
    /// The API server says it does not exist (404).
    NotFound,
    /// The lookup failed or timed out: why.
    Failed(String),
}

/// A running namespace watch. Dropping it stops the watch.
pub(crate) struct NamespaceWatch {
    api: Api<Namespace>,
    synced: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for NamespaceWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl NamespaceWatch {
    /// Starts watching Namespaces with `client`; every change is published to `target`.
    /// Labels already published stay until a new list replaces them (a failed re-list never
    /// empties the cache).
    pub(crate) fn start(client: Client, target: Arc<ArcSwapOption<Namespaces>>) -> Self {
        let api: Api<Namespace> = Api::all(client);
        let synced = Arc::new(AtomicBool::new(false));
        crate::metrics::namespace_watch(false, None);
        let task = tokio::spawn(run(api.clone(), target, synced.clone()));
        NamespaceWatch { api, synced, task }
    }

    /// Whether the first list has completed (the cache holds every namespace).
    pub(crate) fn synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// kube-apiserver's lister-miss fallback: a live GET of namespace `name`, bounded by
    /// `timeout`.
    pub(crate) async fn lookup(&self, name: &str, timeout: Duration) -> Lookup {
        let result = tokio::time::timeout(timeout, self.api.get_opt(name)).await;
        let lookup = match result {
            Ok(Ok(Some(namespace))) => {
                let mut one = Namespaces::default();
                match one.insert(&as_json(&namespace)) {
                    Ok(()) => Lookup::Found(one),
                    Err(e) => Lookup::Failed(format!("GET namespace from the Kubernetes API: {e}")),
                }
            }
            Ok(Ok(None)) => Lookup::NotFound,
            Ok(Err(e)) => Lookup::Failed(format!("GET namespace from the Kubernetes API: {e}")),
            Err(_) => Lookup::Failed(format!(
                "GET namespace from the Kubernetes API: no answer within {} ms",
                timeout.as_millis()
            )),
        };
        crate::metrics::namespace_lookup(match &lookup {
            Lookup::Found(_) => "found",
            Lookup::NotFound => "not_found",
            Lookup::Failed(_) => "error",
        });
        lookup
    }
}

/// `namespace` as the API served it, with only what admission reads kept.
fn as_json(namespace: &Namespace) -> serde_json::Value {
    // Serializing a typed object only fails for maps with non-string keys, which it has not.
    let mut value = serde_json::to_value(namespace).unwrap_or_default();
    if let Some(metadata) = value.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        metadata.remove("managedFields");
    }
    value
}

fn name_of(namespace: &Namespace) -> String {
    namespace.metadata.name.clone().unwrap_or_default()
}

/// The watch loop: a local map of names to labels, published whole after each batch of
/// events (events already waiting are applied first, so a burst is one snapshot).
async fn run(api: Api<Namespace>, target: Arc<ArcSwapOption<Namespaces>>, synced: Arc<AtomicBool>) {
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut current: HashMap<String, serde_json::Value> = HashMap::new();
    // Objects of a list in progress: replace `current` only when the list is complete.
    let mut listing: Option<HashMap<String, serde_json::Value>> = None;
    while let Some(first) = stream.next().await {
        let mut changed = false;
        let mut next = Some(first);
        while let Some(item) = next {
            match item {
                Ok(Event::Init) => listing = Some(HashMap::new()),
                Ok(Event::InitApply(namespace)) => {
                    listing
                        .get_or_insert_with(HashMap::new)
                        .insert(name_of(&namespace), as_json(&namespace));
                }
                Ok(Event::InitDone) => {
                    current = listing.take().unwrap_or_default();
                    changed = true;
                    if !synced.swap(true, Ordering::AcqRel) {
                        tracing::info!(namespaces = current.len(), "namespace watch synced");
                    }
                }
                Ok(Event::Apply(namespace)) => {
                    current.insert(name_of(&namespace), as_json(&namespace));
                    changed = true;
                }
                Ok(Event::Delete(namespace)) => {
                    current.remove(&name_of(&namespace));
                    changed = true;
                }
                Err(e) => {
                    // kube-runtime backs off and re-lists (410 Gone included); what is cached
                    // keeps serving meanwhile.
                    tracing::warn!(error = %e, "namespace watch error; retrying with backoff, cached labels keep serving");
                    crate::metrics::namespace_watch_error();
                }
            }
            next = stream.next().now_or_never().flatten();
        }
        if changed {
            let mut snapshot = Namespaces::default();
            for namespace in current.values() {
                // A typed Namespace's labels are strings: this cannot fail.
                let _ = snapshot.insert(namespace);
            }
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            crate::metrics::namespace_watch(
                synced.load(Ordering::Acquire),
                Some((now, snapshot.len())),
            );
            target.store(Some(Arc::new(snapshot)));
        }
    }
}
