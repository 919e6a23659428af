//! The library of the offline commands, which only the binary uses: nothing on the request path
//! depends on them. `registration` (the configurations that register the proxy in place of the
//! legacy webhooks) → `explain` (why a webhook is or is not called for a request, as `serve`
//! would decide it) → `findings` (what a configuration risks: control-plane requests under a
//! Fail webhook, catch-all rules, timeouts), and `candidate_report` (the `candidates` report from
//! metrics, a Prometheus server and captures). Depends on `config`, `dispatch`, `exclusions` and
//! the modules below them.

pub mod candidate_report;
pub mod explain;
pub mod findings;
pub mod registration;
