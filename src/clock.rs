//! The time, read once per wake-up of a connection's task.
//!
//! A forwarded admission used to read the monotonic clock about 28 times: the connection's
//! phase deadlines, the receipt time, the call's budget, its start, tokio's `timeout`, its
//! end, the pool's idle times, the circuit breaker and the latency records, most of them
//! within microseconds of each other. nginx reads the time once per turn of its event loop and
//! every timer and log line of that turn uses the cached value (`ngx_time_update`, called from
//! `ngx_process_events_and_timers` in `src/event/ngx_event.c`, cached in `ngx_current_msec`).
//! This module does the same per poll of a connection's task: [`Cached`] reads the clock when
//! the task is woken (a request's bytes arrived, the backend answered) and [`now`] returns that
//! reading for the rest of the poll. Outside a [`Cached`] poll (the background lane, a
//! configuration reload, the CLI) [`now`] reads the clock.
//!
//! What the cached value means: the time at which the task was woken, at most the length of
//! one poll earlier than the true time (the parse, matching and the write of one request:
//! microseconds; milliseconds when matchConditions run costly CEL). A deadline derived from it
//! is that much earlier, never later, so failurePolicy still answers before kube-apiserver's
//! deadline; a latency measured between two wake-ups (received, backend answered) is the time
//! between them. What must spend what is left of a deadline after work in the same poll reads
//! the clock itself (the `authorizer` rounds do).
//!
//! It is tokio's clock ([`tokio::time::Instant`]), so tests with paused time see paused time.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::time::Instant;

thread_local! {
    /// The reading of the [`Cached`] poll running on this thread, if any.
    static NOW: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// The time: the reading taken when the current [`Cached`] task was woken, or the clock's
/// own reading outside one.
///
/// ```
/// let before = tokio::time::Instant::now();
/// assert!(admission_proxy::clock::now() >= before);
/// ```
pub fn now() -> Instant {
    NOW.with(Cell::get).unwrap_or_else(Instant::now)
}

/// The time since `earlier` by [`now`]; zero if `earlier` is later (a reading taken on
/// another thread, a little after this task's).
pub fn since(earlier: Instant) -> std::time::Duration {
    now().saturating_duration_since(earlier)
}

pin_project_lite::pin_project! {
    /// A future whose every poll reads the clock once, for [`now`] to return during it.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// use admission_proxy::clock::{now, Cached};
    ///
    /// let (first, second) = Cached::new(async { (now(), now()) }).await;
    /// assert_eq!(first, second);
    /// # });
    /// ```
    pub struct Cached<F> {
        #[pin]
        inner: F,
    }
}

impl<F> Cached<F> {
    /// `inner`, with the clock read once per poll.
    pub fn new(inner: F) -> Self {
        Cached { inner }
    }
}

impl<F: Future> Future for Cached<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // Restored after the poll, also when it unwinds: a nested poll (a future polled inside
        // another's) must leave the outer reading in place, and nothing outside a poll may see
        // a stale reading.
        struct Restore(Option<Instant>);
        impl Drop for Restore {
            fn drop(&mut self) {
                NOW.with(|now| now.set(self.0));
            }
        }
        let _restore = Restore(NOW.with(|now| now.replace(Some(Instant::now()))));
        self.project().inner.poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Within one poll the reading stands still; the next poll reads the clock again; outside
    /// a poll there is no reading left behind.
    #[tokio::test(start_paused = true)]
    async fn one_reading_per_poll() {
        let (first, second, after_wake) = Cached::new(async {
            let first = now();
            let second = now();
            tokio::time::sleep(Duration::from_secs(3)).await;
            (first, second, now())
        })
        .await;
        assert_eq!(first, second);
        assert_eq!(after_wake - first, Duration::from_secs(3));
        assert!(NOW.with(Cell::get).is_none());
    }

    /// A poll that panics leaves no reading behind for the thread's next task.
    #[test]
    fn a_panicking_poll_leaves_no_reading() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            runtime.block_on(Cached::new(async { panic!("in the poll") }));
        }));
        assert!(panicked.is_err());
        assert!(NOW.with(Cell::get).is_none());
    }
}
