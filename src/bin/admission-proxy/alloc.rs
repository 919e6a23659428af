//! The binary's global allocator, mimalloc, and the call that returns freed memory to the OS:
//! the binary's only `unsafe` code (calls into mimalloc's C API, each with its `SAFETY:`).

#![allow(unsafe_code)]

/// mimalloc instead of glibc malloc: the request path allocates and frees many short-lived
/// buffers; glibc's chunk consolidation was ~13% of the proxy's CPU under load
/// (benches/README.md, "What the profiles found").
#[global_allocator]
static GLOBAL: Mimalloc = Mimalloc;

/// mimalloc with the alignment `mi_malloc` always gives taken as given. `mimalloc::MiMalloc`
/// calls `mi_malloc_aligned` for every allocation: its alignment checks cost about 24
/// instructions more than `mi_malloc`'s fast path, and when a page's free list is empty it
/// over-allocates, on the 50 allocations of a forwarded admission (benches/README.md, "The
/// allocator's aligned calls"). The rule is the standard library's `System` allocator's
/// (`library/std/src/sys/alloc/unix.rs`): an alignment of at most [`MI_MAX_ALIGN_SIZE`] and at
/// most the size goes to the plain call; anything else to the aligned one.
struct Mimalloc;

/// What `mi_malloc` aligns every block of at least this size to (mimalloc's
/// `MI_MAX_ALIGN_SIZE`, `sizeof(max_align_t)` on 64-bit targets, as malloc must).
const MI_MAX_ALIGN_SIZE: usize = 16;

impl Mimalloc {
    /// Whether `mi_malloc(size)` is aligned enough for `align`.
    fn plain(align: usize, size: usize) -> bool {
        align <= MI_MAX_ALIGN_SIZE && align <= size
    }
}

// SAFETY: every call is mimalloc's own, with its contract: blocks come from mi_malloc,
// mi_zalloc, mi_realloc or their aligned forms, and any of them is freed by mi_free.
unsafe impl std::alloc::GlobalAlloc for Mimalloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        use libmimalloc_sys::{mi_malloc, mi_malloc_aligned};
        // SAFETY: as the trait requires, `layout` has a non-zero size.
        let block: *mut u8 = unsafe {
            if Self::plain(layout.align(), layout.size()) {
                mi_malloc(layout.size()).cast()
            } else {
                mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        };
        // The guarantee this relies on, checked on every allocation of the test builds (the
        // integration tests run this binary).
        debug_assert!(block.is_null() || block.addr().is_multiple_of(layout.align()));
        block
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        use libmimalloc_sys::{mi_zalloc, mi_zalloc_aligned};
        // SAFETY: as `alloc`.
        unsafe {
            if Self::plain(layout.align(), layout.size()) {
                mi_zalloc(layout.size()).cast()
            } else {
                mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: std::alloc::Layout) {
        // SAFETY: `ptr` came from this allocator (the trait's contract).
        unsafe { libmimalloc_sys::mi_free(ptr.cast()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        use libmimalloc_sys::{mi_realloc, mi_realloc_aligned};
        // SAFETY: `ptr` came from this allocator with `layout`; `new_size` is non-zero.
        unsafe {
            if Self::plain(layout.align(), new_size) {
                mi_realloc(ptr.cast(), new_size).cast()
            } else {
                mi_realloc_aligned(ptr.cast(), new_size, layout.align()).cast()
            }
        }
    }
}

/// Returns memory freed on this thread (a configuration load's peak: YAML, JSON values, the
/// old snapshot) to the OS instead of keeping it in mimalloc's pages.
pub(crate) fn release_freed_memory() {
    // SAFETY: mi_collect only walks the calling thread's heap; no pointer is passed.
    unsafe { libmimalloc_sys::mi_collect(true) }
}
