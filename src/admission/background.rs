//! The background lane: work done after an admission's answer (Shadow calls), never before
//! it and never delaying it. One bounded lane for the whole process: at most
//! [`BACKGROUND_LIMIT`] pieces of work run or wait at once, holding at most
//! [`BACKGROUND_BYTES`] of the requests they work on; past either, new work is shed by the
//! caller, which counts what it shed. (What the lane's calls read back is bounded apart:
//! `dispatch::ANSWER_BYTES`.)
//!
//! The lane is a runtime of its own on one thread the kernel schedules only when the cores are
//! otherwise idle (`SCHED_IDLE`, else the lowest `nice`). Why: on a node whose cores are busy,
//! work after the answer (a candidate's call, a policy's evaluation) would otherwise take turns
//! with the admissions still waiting for theirs and add to their latency; at idle priority it
//! uses what the admissions leave, and when that is not enough the lane fills and sheds.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};

/// Pieces of background work running or waiting at once; more are shed.
pub(crate) const BACKGROUND_LIMIT: usize = 256;

/// Bytes the work running or waiting on the lane may hold at once (32 MiB), counted as twice
/// each request's body: the request kept for the work (shared with nothing once the answer
/// is written) and what the work builds from it (the body sent to a Shadow webhook or a
/// candidate, a policy's bindings). Without it, 300 reviews of 2 MiB queued behind a
/// candidate that hangs held 1.6 GB for its 30 s timeout; with it, such work is shed past
/// the budget.
pub(crate) const BACKGROUND_BYTES: usize = 32 << 20;

/// The lane's places and its runtime.
pub(crate) struct Background {
    places: Arc<Semaphore>,
    /// [`BACKGROUND_BYTES`], in permits of 1 KiB.
    bytes: Arc<Semaphore>,
    /// The lane's runtime, driven by its own thread until `_stop` is dropped.
    runtime: tokio::runtime::Handle,
    /// Dropped with the lane: the thread returns and drops the runtime with any work left.
    _stop: oneshot::Sender<()>,
}

/// The lane thread's name, as `top -H` and `/proc/PID/task/*/comm` show it (at most 15 bytes).
const THREAD_NAME: &str = "admission-bg";

/// A place on the lane and the bytes it holds, taken before the work is built (so that shed
/// work costs nothing): [`Slot::run`] starts the work on a task of its own, holding both
/// until it ends.
pub(crate) struct Slot {
    _place: OwnedSemaphorePermit,
    _bytes: OwnedSemaphorePermit,
}

impl Background {
    /// An empty lane of [`BACKGROUND_LIMIT`] places, its thread started at idle priority.
    ///
    /// # Errors
    /// The thread or its runtime could not be created (the process is out of threads or
    /// memory).
    pub(crate) fn new() -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name(THREAD_NAME.into())
            // Background work parses answers and objects as deep as the request path does.
            .stack_size(crate::deep_json::THREAD_STACK_BYTES)
            .spawn(move || {
                lower_priority();
                crate::dispatch::client::mark_background_lane();
                let _ = runtime.block_on(stopped);
            })?;
        Ok(Background {
            places: Arc::new(Semaphore::new(BACKGROUND_LIMIT)),
            bytes: Arc::new(Semaphore::new(BACKGROUND_BYTES >> 10)),
            runtime: handle,
            _stop: stop,
        })
    }

    /// A free place for work on a request of `body_len` bytes, or `None` when the lane is
    /// full, by places or by [`BACKGROUND_BYTES`] (the work is to be shed).
    pub(crate) fn slot(&self, body_len: usize) -> Option<Slot> {
        let kib = u32::try_from(body_len.saturating_mul(2).div_ceil(1024))
            .unwrap_or(u32::MAX)
            .max(1);
        let place = self.places.clone().try_acquire_owned().ok()?;
        let bytes = self.bytes.clone().try_acquire_many_owned(kib).ok()?;
        Some(Slot {
            _place: place,
            _bytes: bytes,
        })
    }

    /// Resolves once every piece of work started so far has ended (all places free).
    #[cfg(test)]
    pub(crate) async fn finished(&self) {
        let all = u32::try_from(BACKGROUND_LIMIT).unwrap_or(u32::MAX);
        drop(self.places.acquire_many(all).await);
    }

    /// `f`'s result, run on the lane's thread (what its thread-locals hold).
    #[cfg(test)]
    pub(crate) async fn on_lane<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> T {
        self.runtime.spawn(async move { f() }).await.expect("runs")
    }
}

impl Slot {
    /// Runs `work` on a task of its own on `lane`'s runtime; the place is freed when it ends.
    pub(crate) fn run(self, lane: &Background, work: impl Future<Output = ()> + Send + 'static) {
        lane.runtime.spawn(async move {
            let _slot = self;
            work.await;
        });
    }
}

/// Puts the calling thread at `SCHED_IDLE` (`sched(7)`: run only when no other thread wants the
/// core; allowed without privileges), or at `nice` 19 where that is refused.
#[allow(
    unsafe_code,
    reason = "libc's scheduler calls have no safe wrapper in the dependencies"
)]
fn lower_priority() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `sched_setscheduler` with pid 0 changes only the calling thread and reads `param`
    // during the call.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } == 0 {
        return;
    }
    let error = std::io::Error::last_os_error();
    // SAFETY: `gettid` has no preconditions; `setpriority` on a thread id changes only it.
    let niced = unsafe {
        let tid = libc::gettid() as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 19)
    };
    tracing::warn!(%error, niced = niced == 0, "the background lane could not be set to SCHED_IDLE; it runs at nice 19 if `niced`");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lane's work runs on its own thread at `SCHED_IDLE`, never on the caller's runtime.
    #[allow(
        unsafe_code,
        reason = "reads the thread's scheduling policy through libc"
    )]
    #[tokio::test]
    async fn work_runs_on_the_lanes_own_thread_at_idle_priority() {
        let lane = Background::new().unwrap();
        let (policy, name) = lane
            .on_lane(|| {
                // SAFETY: no preconditions; pid 0 is the calling thread.
                let policy = unsafe { libc::sched_getscheduler(0) };
                (policy, std::thread::current().name().map(str::to_string))
            })
            .await;
        assert_eq!(policy, libc::SCHED_IDLE);
        assert_eq!(name.as_deref(), Some(THREAD_NAME));
        let (done, ran) = oneshot::channel();
        lane.slot(1).unwrap().run(&lane, async move {
            let _ = done.send(std::thread::current().name().map(str::to_string));
        });
        assert_eq!(ran.await.unwrap().as_deref(), Some(THREAD_NAME));
        lane.finished().await;
    }

    /// Work is shed by bytes as well as by places: reviews of 2 MiB take 4 MiB of the
    /// budget each, so the ninth waits for none of the 256 places and is refused; a small one
    /// still fits while any bytes are left, and the bytes come back when the work ends.
    #[tokio::test]
    async fn work_is_shed_past_the_byte_budget() {
        let lane = Background::new().unwrap();
        let big = 2 << 20;
        let (release, released) = tokio::sync::watch::channel(false);
        let mut fits = 0;
        while let Some(slot) = lane.slot(big) {
            let mut released = released.clone();
            slot.run(&lane, async move {
                let _ = released.wait_for(|r| *r).await;
            });
            fits += 1;
            assert!(fits <= BACKGROUND_LIMIT, "bounded");
        }
        assert_eq!(fits, BACKGROUND_BYTES / (2 * big));
        assert!(lane.slot(big).is_none());
        let _ = release.send(true);
        lane.finished().await;
        assert!(lane.slot(big).is_some(), "the bytes are given back");
    }
}
