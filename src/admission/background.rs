//! The background lane: work done after an admission's answer (Shadow calls), never before
//! it and never delaying it. One bounded lane for the whole process: at most
//! [`BACKGROUND_LIMIT`] pieces of work run or wait at once; past that, new work is shed by the
//! caller, which counts what it shed.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Pieces of background work running or waiting at once; more are shed.
pub(crate) const BACKGROUND_LIMIT: usize = 256;

/// The lane's places.
pub(crate) struct Background {
    places: Arc<Semaphore>,
}

/// A place on the lane, taken before the work is built (so that shed work costs nothing):
/// [`Slot::run`] starts the work on a task of its own, holding the place until it ends.
pub(crate) struct Slot(OwnedSemaphorePermit);

impl Background {
    /// An empty lane of [`BACKGROUND_LIMIT`] places.
    pub(crate) fn new() -> Self {
        Background {
            places: Arc::new(Semaphore::new(BACKGROUND_LIMIT)),
        }
    }

    /// A free place, or `None` when the lane is full (the work is to be shed).
    pub(crate) fn slot(&self) -> Option<Slot> {
        self.places.clone().try_acquire_owned().ok().map(Slot)
    }

    /// Resolves once every piece of work started so far has ended (all places free).
    #[cfg(test)]
    pub(crate) async fn finished(&self) {
        let all = u32::try_from(BACKGROUND_LIMIT).unwrap_or(u32::MAX);
        drop(self.places.acquire_many(all).await);
    }
}

impl Slot {
    /// Runs `work` on a task of its own; the place is freed when it ends.
    pub(crate) fn run(self, work: impl Future<Output = ()> + Send + 'static) {
        tokio::spawn(async move {
            let _place = self.0;
            // Spawned from a worker, the task takes that worker's LIFO slot and would run
            // before the admissions already waiting there: it goes to the back first.
            tokio::task::yield_now().await;
            work.await;
        });
    }
}
