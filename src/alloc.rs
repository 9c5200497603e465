//! The process's allocator: the system's, reporting every allocation, release and resize to
//! `kwin_engine::template::budget`, which bounds the memory one template render may hold.

use kwin_engine::template::budget::{count, grown, resized};
use std::alloc::{GlobalAlloc, Layout, System};

/// The system allocator, counting for template renders.
pub struct Counting;

#[global_allocator]
static ALLOCATOR: Counting = Counting;

// SAFETY: every method forwards to `System` with the caller's own layout and pointer.
// `count` reads and writes only this thread's const-initialised cells (it allocates nothing
// itself), and a refused allocation returns null, as `GlobalAlloc` allows.
unsafe impl GlobalAlloc for Counting {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !count(grown(layout.size())) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires.
        unsafe { System.alloc(layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !count(grown(layout.size())) {
            return std::ptr::null_mut();
        }
        // SAFETY: as `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-grown(layout.size()));
        // SAFETY: `ptr` was allocated by `System` with `layout` (every allocation here is).
        unsafe { System.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !count(resized(layout.size(), new_size)) {
            return std::ptr::null_mut();
        }
        // SAFETY: as `dealloc`, with the caller's new size.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
