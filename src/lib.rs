//! admission-proxy: a sidecar in front of legacy Kubernetes admission webhooks.
//!
//! Module dependencies point one way, down this list (each uses only modules above it):
//!
//! - leaves: `deep_json` (JSON as deep as kube-apiserver reads it), `field_error`
//!   (apimachinery's field errors), `files` (bounded reads of regular files, the nesting
//!   check), `names` (Kubernetes name formats), `memory`, `tls`, `decision`, `log_value`
//!   (request-supplied values in log lines and error bodies), `clock` (the proxy's one time
//!   source), `kube_client` (the Kubernetes API client and its configuration); `redact` uses
//!   `deep_json`; `metrics` uses `decision` and `memory`; `served` (what kube-apiserver serves)
//!   and `kube_version` (what the cluster runs, its `/version`) use `kube_client`;
//! - `api` (webhook configuration types) → `backend` (clientConfig) → `resources` (the
//!   equivalence table, declared custom resources); `review` (AdmissionReview envelopes);
//! - `conversion` (objects between versions) and `matching` (`ShouldCallHook`'s selection and
//!   matchConditions), side by side: neither uses the other;
//! - `policy` (ValidatingAdmissionPolicy evaluation) uses `matching`, `conversion`, `resources`,
//!   `review`, `field_error`;
//! - `config` (files → compiled snapshot), `telemetry`, `namespace_watch`, `capture`;
//!   `authorizer` (matchConditions' `authorizer` through SubjectAccessReviews) uses `matching`,
//!   `metrics` and `kube_client`;
//! - `dispatch` (one webhook's admission in phases, `dispatch/pipeline.rs`) → `exclusions`
//!   (proxy-wide exemptions, before any webhook) → `admission` (one admission from the routed
//!   request to the answer, its background lane) → `server` (HTTP only) → `reload`;
//! - `tools`: the offline commands' library (`registration` → `explain` → `findings`, and
//!   `candidate_report`), which only the binary uses;
//! - `serve` (the `serve` command as one call) uses them all; only the binary uses it.
//!
//! The binary's tools (`demo`, `bench`, the example backend, the demo PKI) are not part of this
//! library: they live with the binary in `src/bin/admission-proxy/`.
//!
//! Errors are typed (`thiserror`), one enum per concern. A message says only its own layer and
//! keeps what caused it as its `source()` (`serve::ServeError`: `load the serving certificate`),
//! or it quotes its cause's words and has no `source()`: where the whole text is upstream's
//! (`compilation failed: …`, `json: cannot unmarshal …`), and at a dependency's error, whose
//! message may already hold its own causes (`kube_client::KubeError` joins kube-rs' once). The
//! binary prints the chain joined by `: `, so nothing is said twice.

#![warn(missing_docs)]
// `unsafe` only where allowed with its reason (two libc calls); each block says why it is sound.
#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod admission;
pub mod api;
pub mod authorizer;
pub mod backend;
pub mod capture;
pub mod clock;
pub mod config;
pub mod conversion;
pub mod decision;
pub mod deep_json;
pub mod dispatch;
pub mod exclusions;
pub mod field_error;
pub mod files;
pub mod kube_client;
pub mod kube_version;
pub mod log_value;
pub mod matching;
pub mod memory;
pub mod metrics;
pub(crate) mod names;
pub mod namespace_watch;
pub mod policy;
pub mod redact;
pub mod reload;
pub mod resources;
pub mod review;
pub mod serve;
pub mod served;
pub mod server;
pub mod telemetry;
pub mod tls;
pub mod tools;

// The unit tests' certificates come from the binary's PKI (it is not library API); it names
// this crate `admission_proxy` as the binary does.
#[cfg(test)]
extern crate self as admission_proxy;
#[cfg(test)]
#[allow(dead_code)] // the unit tests use part of it
#[path = "bin/admission-proxy/pki.rs"]
mod pki;
