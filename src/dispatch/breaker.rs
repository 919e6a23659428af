//! Per-backend circuit breaking (`--breaker-failures`, `--breaker-cooldown-seconds`): after N
//! consecutive calls to one backend fail to connect, handshake or answer in time, calls to it
//! are answered at once by failurePolicy for a cool-down, then one probe call is let through
//! (half-open) and its success closes the breaker. The proxy's own, opt-in behaviour
//! (kube-apiserver calls a dead backend every time, each call costing up to its timeout).
//! Depends on `metrics`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::time::Instant;

/// When breakers open and for how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BreakerSettings {
    /// Consecutive connect, TLS or timeout failures that open a backend's breaker.
    pub failures: u32,
    /// How long an open breaker answers at once before letting one probe through.
    pub cooldown: Duration,
}

/// An open breaker's refusal, as its failurePolicy message says it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("backend unavailable, failing fast: {failures} consecutive calls to {backend} failed to connect, handshake or answer in time; the next call is tried after a {cooldown_seconds} s cool-down")]
pub(crate) struct BreakerOpen {
    /// Consecutive connect, TLS or timeout failures counted.
    pub(crate) failures: u32,
    /// `host:port`.
    pub(crate) backend: String,
    pub(crate) cooldown_seconds: u64,
}

/// Whether a call may go to the backend.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Permit {
    /// Closed: call.
    Call,
    /// Half-open: this call is the one probe.
    Probe,
    /// Open: answer by failurePolicy without calling; the reason names the failures.
    Refuse(BreakerOpen),
}

/// One backend's breaker. Lock-free: a few atomics read on every call.
#[derive(Debug)]
pub(crate) struct Breaker {
    backend: String,
    settings: BreakerSettings,
    base: Instant,
    consecutive: AtomicU32,
    /// Nanoseconds after `base` until which the breaker is open; 0 = closed.
    open_until: AtomicU64,
    probing: AtomicBool,
}

impl Breaker {
    fn new(backend: String, settings: BreakerSettings) -> Self {
        Breaker {
            backend,
            settings,
            base: Instant::now(),
            consecutive: AtomicU32::new(0),
            open_until: AtomicU64::new(0),
            probing: AtomicBool::new(false),
        }
    }

    /// Nanoseconds since the breaker was made. `open_until` is `now + cooldown`, never 0
    /// (the cool-down is at least 1 s), so 0 can mean closed.
    fn now(&self) -> u64 {
        crate::clock::since(self.base)
            .as_nanos()
            .min(u128::from(u64::MAX / 2)) as u64
    }

    /// Whether the next call may go out.
    pub(crate) fn permit(&self) -> Permit {
        let until = self.open_until.load(Ordering::Acquire);
        if until == 0 {
            return Permit::Call;
        }
        if self.now() < until {
            return Permit::Refuse(self.refusal());
        }
        // Cool-down over: exactly one caller gets the probe.
        if self
            .probing
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            crate::metrics::breaker_transition(&self.backend, "half_open");
            tracing::info!(backend = %self.backend, "circuit breaker half-open: one probe call goes to the backend");
            Permit::Probe
        } else {
            Permit::Refuse(self.refusal())
        }
    }

    fn refusal(&self) -> BreakerOpen {
        BreakerOpen {
            failures: self.consecutive.load(Ordering::Relaxed),
            backend: self.backend.clone(),
            cooldown_seconds: self.settings.cooldown.as_secs(),
        }
    }

    /// What `admission_proxy_circuit_breaker_state` says of this breaker: 0 closed, 1 open,
    /// 2 half-open (its one probe call under way).
    fn state(&self) -> u8 {
        match (
            self.open_until.load(Ordering::Acquire),
            self.probing.load(Ordering::Acquire),
        ) {
            (0, _) => 0,
            (_, false) => 1,
            (_, true) => 2,
        }
    }

    /// The next call's permit as a guard ([`CallPermit`]), or the refusal's reason when the
    /// breaker is open.
    ///
    /// # Errors
    /// [`BreakerOpen`]: the failures counted, the backend and the cool-down, for failurePolicy.
    pub(crate) fn admit(self: &Arc<Self>) -> Result<CallPermit, BreakerOpen> {
        match self.permit() {
            Permit::Refuse(reason) => Err(reason),
            permit => Ok(CallPermit {
                breaker: self.clone(),
                permit,
                recorded: false,
            }),
        }
    }

    /// A permit that was not used (the call never went out): a probe goes back, so that the
    /// next call probes instead.
    fn release(&self, permit: &Permit) {
        if *permit == Permit::Probe {
            self.probing.store(false, Ordering::Release);
        }
    }

    /// The outcome of a call that was let through: `failed` for connect, TLS and timeout
    /// failures; any answer, even an error status, shows the backend is up.
    pub(crate) fn record(&self, permit: &Permit, failed: bool) {
        if !failed {
            self.consecutive.store(0, Ordering::Relaxed);
            if self.open_until.swap(0, Ordering::AcqRel) != 0 {
                crate::metrics::breaker_transition(&self.backend, "closed");
                tracing::info!(backend = %self.backend, "circuit breaker closed: the backend answered");
            }
            self.probing.store(false, Ordering::Release);
            return;
        }
        let failures = self.consecutive.fetch_add(1, Ordering::Relaxed) + 1;
        let reopen = *permit == Permit::Probe;
        if reopen
            || (failures >= self.settings.failures && self.open_until.load(Ordering::Acquire) == 0)
        {
            let until = self.now() + (self.settings.cooldown.as_nanos() as u64).max(1);
            self.open_until.store(until, Ordering::Release);
            self.probing.store(false, Ordering::Release);
            crate::metrics::breaker_transition(&self.backend, "open");
            tracing::warn!(backend = %self.backend, failures, cooldown_seconds = self.settings.cooldown.as_secs(), "circuit breaker open: calls to this backend are answered by failurePolicy without calling it");
        }
    }
}

/// Every backend's breaker, found by the backend's pool key; created on first call. A
/// copy-on-write map: lookups take no lock.
#[derive(Debug)]
pub(crate) struct Breakers {
    settings: BreakerSettings,
    map: ArcSwap<HashMap<u64, Arc<Breaker>>>,
}

impl Breakers {
    /// Breakers with `settings`.
    pub(crate) fn new(settings: BreakerSettings) -> Self {
        Breakers {
            settings,
            map: ArcSwap::from_pointee(HashMap::new()),
        }
    }

    /// The breaker of backend `key`; `backend` names it in logs and metrics (called once, when
    /// the breaker is made: no string per call).
    pub(crate) fn get(&self, key: u64, backend: impl FnOnce() -> String) -> Arc<Breaker> {
        super::cow_entry(&self.map, key, || Breaker::new(backend(), self.settings))
    }

    /// The backend (`host:port`) and state ([`Breaker::state`]) of each breaker whose backend
    /// `served` keeps (by pool key): what a scrape shows. A breaker whose backend no webhook
    /// calls any more is left out, so that its state leaves `/metrics` with its webhook.
    pub(crate) fn states(&self, served: impl Fn(u64) -> bool) -> Vec<(String, u8)> {
        self.map
            .load()
            .iter()
            .filter(|(key, _)| served(**key))
            .map(|(_, breaker)| (breaker.backend.clone(), breaker.state()))
            .collect()
    }
}

/// A call let through by a backend's breaker. Its outcome is recorded with
/// [`CallPermit::record`]; dropped unrecorded (the call never went out: no call slot, or the
/// admission was abandoned at shutdown), a probe goes back, so that the next call probes
/// instead. A probe lost that way used to leave the breaker refusing every call for good.
#[derive(Debug)]
pub(crate) struct CallPermit {
    breaker: Arc<Breaker>,
    permit: Permit,
    recorded: bool,
}

impl CallPermit {
    /// The call's outcome: `failed` for connect, TLS and timeout failures.
    pub(crate) fn record(mut self, failed: bool) {
        self.breaker.record(&self.permit, failed);
        self.recorded = true;
    }

    /// Whether this call is the half-open breaker's one probe.
    #[cfg(test)]
    fn is_probe(&self) -> bool {
        self.permit == Permit::Probe
    }
}

impl Drop for CallPermit {
    fn drop(&mut self) {
        if !self.recorded {
            self.breaker.release(&self.permit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker() -> Breaker {
        Breaker::new(
            "127.0.0.1:9".into(),
            BreakerSettings {
                failures: 3,
                cooldown: Duration::from_secs(10),
            },
        )
    }

    /// Paused time: open after 3 failures, refused for the 10 s cool-down, one probe, closed by
    /// its success.
    #[tokio::test(start_paused = true)]
    async fn opens_after_n_failures_half_opens_after_the_cooldown_and_closes_on_success() {
        let b = breaker();
        for _ in 0..2 {
            assert_eq!(b.permit(), Permit::Call);
            b.record(&Permit::Call, true);
        }
        assert_eq!(b.permit(), Permit::Call, "2 failures: still closed");
        b.record(&Permit::Call, true);
        assert!(
            matches!(b.permit(), Permit::Refuse(r) if r.failures == 3 && r.to_string().contains("3 consecutive calls"))
        );
        tokio::time::advance(Duration::from_millis(9_999)).await;
        assert!(matches!(b.permit(), Permit::Refuse(_)));
        tokio::time::advance(Duration::from_millis(1)).await;
        let probe = b.permit();
        assert_eq!(probe, Permit::Probe);
        assert!(
            matches!(b.permit(), Permit::Refuse(_)),
            "one probe at a time"
        );
        b.record(&probe, false);
        assert_eq!(b.permit(), Permit::Call);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_probe_reopens_for_another_cooldown() {
        let b = breaker();
        for _ in 0..3 {
            b.record(&Permit::Call, true);
        }
        tokio::time::advance(Duration::from_secs(10)).await;
        let probe = b.permit();
        assert_eq!(probe, Permit::Probe);
        b.record(&probe, true);
        assert!(matches!(b.permit(), Permit::Refuse(_)));
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(b.permit(), Permit::Probe);
    }

    /// A probe whose call never went out (dropped: no call slot, or the admission abandoned)
    /// goes back: the next call probes, instead of the breaker refusing for good.
    #[tokio::test(start_paused = true)]
    async fn an_abandoned_probe_goes_back() {
        let b = Arc::new(breaker());
        for _ in 0..3 {
            b.record(&Permit::Call, true);
        }
        tokio::time::advance(Duration::from_secs(10)).await;
        let probe = b.admit().expect("the cool-down is over");
        assert!(probe.is_probe());
        assert!(b.admit().is_err(), "one probe at a time");
        drop(probe);
        let again = b.admit().expect("the abandoned probe went back");
        assert!(again.is_probe());
        again.record(false);
        assert!(
            b.admit().is_ok_and(|p| !p.is_probe()),
            "closed by the probe's success"
        );
    }

    #[test]
    fn an_answer_resets_the_count() {
        let b = breaker();
        b.record(&Permit::Call, true);
        b.record(&Permit::Call, true);
        b.record(&Permit::Call, false);
        b.record(&Permit::Call, true);
        b.record(&Permit::Call, true);
        assert_eq!(b.permit(), Permit::Call);
    }
}
