//! admission-proxy: a sidecar in front of legacy Kubernetes admission webhooks.
//!
//! Module dependencies point one way: `api` → `backend`; `api`, `backend`, `review` → `conversion` → `matching` → `config` → `explain`,
//! `dispatch` → `server` → `reload`; `config`, `served` → `registration` → `explain`;
//! `served` → `config` (removed-version warnings); `matching` →
//! `namespace_watch` → `server`; `redact` → `capture`, `explain`, `server`; `capture` → `server`. `memory` and `redact` are leaves, `metrics` depends only
//! on it, `tls` is a leaf. `serve` (the `serve` command as one call) uses them all; only the
//! binary uses it.
//!
//! The binary's tools (`demo`, `bench`, the example backend, the demo PKI) are not part of this
//! library: they live with the binary in `src/bin/admission-proxy/`.

pub mod api;
pub mod backend;
pub mod capture;
pub mod config;
pub mod conversion;
pub mod decision;
pub mod dispatch;
pub mod explain;
pub mod matching;
pub mod memory;
pub mod metrics;
pub mod namespace_watch;
pub mod redact;
pub mod registration;
pub mod reload;
pub mod resources;
pub mod review;
pub mod serve;
pub mod served;
pub mod server;
pub mod telemetry;
pub mod tls;

// The unit tests' certificates come from the binary's PKI (it is not library API); it names
// this crate `admission_proxy` as the binary does.
#[cfg(test)]
extern crate self as admission_proxy;
#[cfg(test)]
#[allow(dead_code)] // the unit tests use part of it
#[path = "bin/admission-proxy/pki.rs"]
mod pki;
