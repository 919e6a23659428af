//! Returning freed memory to the OS after the proxy's occasional large allocations (a
//! configuration load, a `/metrics` render), so that RSS follows what the proxy holds rather
//! than its peaks. The binary registers its allocator's collect function (`mi_collect`); the
//! library has no allocator of its own. Depends on nothing else in this crate.

use std::sync::OnceLock;

static RELEASE: OnceLock<fn()> = OnceLock::new();

/// Registers `release`, which returns memory freed on the calling thread to the OS. The first
/// registration wins.
pub fn set_release(release: fn()) {
    let _ = RELEASE.set(release);
}

/// Returns memory freed on this thread to the OS; does nothing when nothing was registered.
pub(crate) fn release() {
    if let Some(release) = RELEASE.get() {
        release();
    }
}
