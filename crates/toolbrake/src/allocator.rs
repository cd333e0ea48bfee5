//! The command's memory allocator: mimalloc for the commands that judge recorded events in
//! bulk (`replay`, `tune`), the C library's for every other (a hook above all).
//!
//! A hook is a fresh process per tool call: mimalloc's first allocations cost it about
//! 0.15 ms of start-up (BENCHMARKS.md, issue 14), which every tool call would pay. A replay
//! spends about a sixth of its time in glibc's allocator, and mimalloc takes 10 to 15% off
//! it (BENCHMARKS.md, issue 26). So the process starts on the C library's allocator and
//! [`use_mimalloc`] switches it once, before the work starts.
//!
//! Invariants: the switch happens at most once and only one way, so every block was made by
//! the C library's allocator before it or by either allocator after it; a block made before
//! it (the parsed command line, say) is told apart on its way out by
//! `mi_is_in_heap_region` (mimalloc's own test of its address ranges) and given back to
//! the allocator that made it, freed or grown there. The switch reserves mimalloc an arena
//! of address space of its own first, so that nearly every block is known as mimalloc's by
//! one comparison with that range, and only the others ask `mi_is_in_heap_region` (which
//! walks mimalloc's arenas: 2% of a replay when every free asked it).

use libmimalloc_sys::{
    mi_arena_id_t, mi_free, mi_is_in_heap_region, mi_malloc, mi_option_set, mi_option_t,
    mi_realloc, mi_reserve_os_memory_ex, mi_zalloc,
};
use mimalloc::MiMalloc;
use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The allocator of every Rust allocation in the command.
pub struct Switch;

static MIMALLOC: AtomicBool = AtomicBool::new(false);

/// The arena reserved at the switch: its start and length (0: none).
static ARENA_START: AtomicUsize = AtomicUsize::new(0);
static ARENA_LEN: AtomicUsize = AtomicUsize::new(0);

/// Address space reserved for mimalloc at the switch (committed as it is used). A replay
/// stays far below it; beyond it mimalloc takes more from the system, whose blocks are
/// then recognised by the slower test.
const ARENA_BYTES: usize = 4 << 30;

/// Makes mimalloc the allocator of every allocation from now on. Call it before starting
/// threads (they then see it; a thread that misses it only keeps allocating with the C
/// library, which is correct too).
pub fn use_mimalloc() {
    // mimalloc 2's options, by their place in its `mi_option_e` (the crate is pinned; the
    // sys crate leaves these unnamed). Committing an arena's memory as it is used and not
    // asking for transparent huge pages keeps a replay on two cores at 28 MiB instead of
    // 39 (one thread: 11 against 17), at no cost in time that a replay shows.
    const ARENA_EAGER_COMMIT: mi_option_t = 4;
    const ALLOW_THP: mi_option_t = 37;
    // SAFETY: plain setters of mimalloc's option table, safe to call at any time; then its
    // process set-up, once, before its first allocation (on the calling thread, before any
    // other uses it).
    unsafe {
        mi_option_set(ARENA_EAGER_COMMIT, 0);
        mi_option_set(ALLOW_THP, 0);
        set_up_mimalloc();
        reserve_arena();
    }
    MIMALLOC.store(true, Ordering::Relaxed);
}

// An arena's address range: in mimalloc's C library, not bound by the sys crate.
extern "C" {
    fn mi_arena_area(arena_id: mi_arena_id_t, size: *mut usize) -> *mut c_void;
}

/// Reserves mimalloc's first arena and notes its range. Without it (address space
/// refused, say) every block is told apart by the slower test, as correct.
///
/// # Safety
/// Called once, after mimalloc's set-up and before its first allocation.
unsafe fn reserve_arena() {
    let mut id: mi_arena_id_t = 0;
    let mut len = 0usize;
    // SAFETY: mimalloc's own calls, with pointers to live locals.
    let start = unsafe {
        if mi_reserve_os_memory_ex(ARENA_BYTES, false, false, false, &mut id) != 0 {
            return;
        }
        mi_arena_area(id, &mut len)
    };
    if !start.is_null() && len > 0 {
        ARENA_START.store(start as usize, Ordering::Relaxed);
        ARENA_LEN.store(len, Ordering::Relaxed);
    }
}

// mimalloc 2's own process set-up, and whether it is still to be done: what its load-time
// constructor calls, which the workspace's build leaves out (`MI_PRIM_HAS_PROCESS_ATTACH`,
// .cargo/config.toml) so that a process that never switches (a hook) does not pay for it.
extern "C" {
    fn _mi_preloading() -> bool;
    fn _mi_auto_process_init();
}

/// Sets mimalloc up unless its constructor did (a build with a CFLAGS of its own).
///
/// # Safety
/// Called once, before mimalloc's first allocation.
unsafe fn set_up_mimalloc() {
    // SAFETY: mimalloc's own entry points for its process start, as its constructor calls
    // them; `_mi_preloading` is true until that set-up ran.
    unsafe {
        if _mi_preloading() {
            _mi_auto_process_init();
        }
    }
}

fn on_mimalloc() -> bool {
    MIMALLOC.load(Ordering::Relaxed)
}

/// Whether mimalloc made this block (only asked after the switch).
///
/// # Safety
/// `ptr` is a live block of this allocator.
unsafe fn by_mimalloc(ptr: *mut u8) -> bool {
    let start = ARENA_START.load(Ordering::Relaxed);
    if (ptr as usize).wrapping_sub(start) < ARENA_LEN.load(Ordering::Relaxed) {
        return true;
    }
    // SAFETY: a lookup of the address in mimalloc's own map of its regions.
    unsafe { mi_is_in_heap_region(ptr as *const c_void) }
}

/// The alignment every mimalloc block has whatever its size (a pointer's: its smallest size
/// classes are whole words, a 24-byte block only 8-aligned). Up to it, the plain calls serve;
/// the `MiMalloc` type calls the aligned ones for every layout, a longer path through
/// mimalloc's alignment checks (3% of a replay's samples).
const PLAIN_ALIGN: usize = std::mem::size_of::<usize>();

unsafe impl GlobalAlloc for Switch {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !on_mimalloc() {
            System.alloc(layout)
        } else if layout.align() <= PLAIN_ALIGN {
            // SAFETY: any block of mimalloc's is aligned to `PLAIN_ALIGN`.
            unsafe { mi_malloc(layout.size()) as *mut u8 }
        } else {
            MiMalloc.alloc(layout)
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !on_mimalloc() {
            System.alloc_zeroed(layout)
        } else if layout.align() <= PLAIN_ALIGN {
            // SAFETY: as in `alloc`.
            unsafe { mi_zalloc(layout.size()) as *mut u8 }
        } else {
            MiMalloc.alloc_zeroed(layout)
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if on_mimalloc() && by_mimalloc(ptr) {
            // SAFETY: a block of mimalloc's, however aligned (what `MiMalloc` calls too).
            unsafe { mi_free(ptr as *mut c_void) }
        } else {
            System.dealloc(ptr, layout)
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !on_mimalloc() {
            return System.realloc(ptr, layout, new_size);
        }
        if by_mimalloc(ptr) {
            if layout.align() <= PLAIN_ALIGN {
                // SAFETY: as in `alloc`; the block is mimalloc's.
                return unsafe { mi_realloc(ptr as *mut c_void, new_size) as *mut u8 };
            }
            return MiMalloc.realloc(ptr, layout, new_size);
        }
        // Made before the switch: grown there, where it can be given back.
        System.realloc(ptr, layout, new_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks made before the switch are grown and freed by the C library's allocator after
    /// it, and new ones come from mimalloc (a block given to the wrong allocator would make
    /// glibc abort the test process, or mimalloc report it).
    #[test]
    fn blocks_made_before_the_switch_go_back_where_they_came_from() {
        let mut before: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 16 + i * 40]).collect();
        let grown_before = vec![7u8; 100];
        use_mimalloc();
        let after: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 16 + i * 40]).collect();
        // SAFETY: live blocks of this allocator.
        unsafe {
            assert!(!by_mimalloc(before[0].as_mut_ptr()));
            assert!(by_mimalloc(after[1].as_ptr() as *mut u8));
        }
        let mut grown_before = grown_before;
        grown_before.extend_from_slice(&[8u8; 10_000]);
        assert_eq!(grown_before.len(), 10_100);
        assert_eq!((grown_before[99], grown_before[100]), (7, 8));
        for (i, v) in before.iter_mut().enumerate() {
            v.truncate(2);
            v.shrink_to_fit();
            v.extend_from_slice(&[1; 3000]);
            assert_eq!(v[0], i as u8);
        }
        drop(before);
        drop(after);
        drop(grown_before);
        // Once switched, it stays switched, and new blocks come from the arena reserved then
        // (the quick test), which the region test agrees is mimalloc's.
        assert!(on_mimalloc());
        let start = ARENA_START.load(Ordering::Relaxed);
        let len = ARENA_LEN.load(Ordering::Relaxed);
        assert!(len >= ARENA_BYTES / 2, "no arena reserved: {len}");
        let fresh = vec![1u8; 4096];
        let at = fresh.as_ptr() as usize;
        assert!(
            at.wrapping_sub(start) < len,
            "a new block outside the arena"
        );
        // SAFETY: a live block of this allocator.
        assert!(unsafe { mi_is_in_heap_region(fresh.as_ptr() as *const c_void) });
        blocks_are_aligned_as_asked_after_the_switch();
    }

    /// After the switch every block is aligned as its layout asks: the plain calls serve
    /// alignments up to a word's, the aligned ones the rest (a 24-byte block of mimalloc's
    /// plain call is only 8-aligned), through allocation, zeroed allocation and growth.
    /// (Called by the test above: the switch is once per process, and that test must see
    /// the process before it.)
    fn blocks_are_aligned_as_asked_after_the_switch() {
        assert!(on_mimalloc());
        for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
            for size in [1, 3, 8, 24, 40, 56, 100, 1000, 70_000] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: a non-zero size; every block is freed with its layout.
                unsafe {
                    for zeroed in [false, true] {
                        let p = if zeroed {
                            Switch.alloc_zeroed(layout)
                        } else {
                            Switch.alloc(layout)
                        };
                        assert!(!p.is_null());
                        assert_eq!(p as usize % align, 0, "{size} bytes aligned to {align}");
                        if zeroed {
                            assert!(std::slice::from_raw_parts(p, size).iter().all(|b| *b == 0));
                        }
                        *p = 7;
                        let q = Switch.realloc(p, layout, size * 3 + 8);
                        assert_eq!(
                            q as usize % align,
                            0,
                            "{size} bytes grown, aligned to {align}"
                        );
                        assert_eq!(*q, 7);
                        let grown = Layout::from_size_align(size * 3 + 8, align).unwrap();
                        Switch.dealloc(q, grown);
                    }
                }
            }
        }
    }
}
