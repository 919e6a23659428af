//! admission-proxy: a sidecar in front of legacy Kubernetes admission webhooks.
//!
//! Module dependencies point one way: `api` → `backend`; `api`, `backend`, `review` → `conversion` → `matching` → `config` → `explain`,
//! `dispatch` → `server` → `reload`, `demo`; `config`, `served` → `registration` → `explain`;
//! `served` → `config` (removed-version warnings); `matching` →
//! `namespace_watch` → `server`; `redact` → `capture`, `explain`, `server`; `capture` → `server`. `field_error`, `memory` and `redact` are leaves, `metrics` depends only
//! on it, `tls` is a leaf; `example_backend` uses only `server`.

pub mod api;
pub mod backend;
pub mod bench;
pub mod capture;
pub mod config;
pub mod conversion;
pub mod decision;
pub mod demo;
pub mod dispatch;
pub mod example_backend;
pub mod explain;
pub mod field_error;
pub mod matching;
pub mod memory;
pub mod metrics;
pub mod namespace_watch;
pub mod redact;
pub mod registration;
pub mod reload;
pub mod review;
pub mod served;
pub mod server;
pub mod telemetry;
pub mod tls;
