//! Fork safety: the gate every native operation that takes a lock runs inside, and the
//! `os.register_at_fork` hooks that close it around a fork.

use pyo3::prelude::*;

/// Every native operation that takes a lock (the store's, a connection's) runs inside the
/// fork gate; `os.fork()` closes it first (`os.register_at_fork`, in the package's
/// `__init__`), waiting for the operations under way, so that no lock is held by a thread
/// the child will not have. The gate is a counter of operations under way plus a bit for a
/// fork being made: plain atomics, nothing a forked child can find half-taken.
pub(crate) mod fork_gate {
    use std::sync::atomic::{AtomicUsize, Ordering};

    const FORKING: usize = 1 << (usize::BITS - 1);
    static GATE: AtomicUsize = AtomicUsize::new(0);

    /// An operation under way (leaves the gate when dropped).
    pub struct Inside(());

    impl Drop for Inside {
        fn drop(&mut self) {
            GATE.fetch_sub(1, Ordering::Release);
        }
    }

    /// Enters the gate, waiting while a fork is being made.
    pub fn enter() -> Inside {
        let mut s = GATE.load(Ordering::Relaxed);
        loop {
            if s & FORKING != 0 {
                std::thread::yield_now();
                s = GATE.load(Ordering::Relaxed);
                continue;
            }
            match GATE.compare_exchange_weak(s, s + 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return Inside(()),
                Err(now) => s = now,
            }
        }
    }

    /// Before a fork: no new operation starts, and those under way finish.
    pub fn close() {
        GATE.fetch_or(FORKING, Ordering::AcqRel);
        let mut spins = 0u32;
        while GATE.load(Ordering::Acquire) & !FORKING != 0 {
            spins += 1;
            if spins < 100 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
    }

    /// After a fork, in the parent: operations go on.
    pub fn open() {
        GATE.fetch_and(!FORKING, Ordering::AcqRel);
    }

    /// After a fork, in the child: its only thread is the one that forked.
    pub fn reset() {
        GATE.store(0, Ordering::Release);
    }
}

/// `os.register_at_fork(before=...)`: waits for the native operations under way (with the
/// GIL released: they finish without it).
#[pyfunction]
pub(crate) fn _fork_before(py: Python<'_>) {
    py.detach(fork_gate::close);
}

/// `os.register_at_fork(after_in_parent=...)`.
#[pyfunction]
pub(crate) fn _fork_after_parent() {
    fork_gate::open();
}

/// `os.register_at_fork(after_in_child=...)`.
#[pyfunction]
pub(crate) fn _fork_after_child() {
    fork_gate::reset();
}
