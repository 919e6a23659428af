//! The integration tests, as one test binary (one link of the crate instead of one per file).
//! Each module was a file of its own under `tests/`; a test is named by its module, e.g.
//! `cargo test --test it one_call::` runs one module and `cargo test --test it
//! hot_reload::reloads_under_load` one test. `common` is the shared harness; `tools` compiles in
//! the binary's tools (demo, bench, the example backend, the PKI).

mod common;

mod tools;

mod authorizer;
mod authorizer_sar;
mod backends;
mod bench;
mod candidates;
mod chain_observability;
mod chains;
mod check;
mod conformance;
mod deep_objects;
mod demo;
mod end_to_end;
mod equivalent;
mod exclusions;
mod explain;
mod hot_reload;
mod limits;
mod metrics;
mod modes;
mod namespace_watch;
mod one_call;
mod properties;
mod registration;
mod serving;
