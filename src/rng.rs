//! The backend's one source of randomness: ChaCha20 seeded from the OS.
//!
//! Created lazily and re-created whenever the process id changes, because
//! PostgreSQL forks backends and parallel workers: a generator inherited
//! across a fork would hand every child the same noise.

use crate::gucs;
use dpnoise_core::BitPool;
use pgrx::pg_sys;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;
use std::cell::UnsafeCell;

pub type BackendRng = BitPool<ChaCha20Rng>;

struct Generator {
    pid: i32,
    seed_generation: u64,
    pool: BackendRng,
}

/// The generator, in a plain static: a backend runs queries on one thread,
/// and a thread-local costs a lookup through the dynamic linker per row
/// (this library is loaded with dlopen).
struct Slot(UnsafeCell<Option<Generator>>);

// SAFETY: only the backend's one thread touches it (pgrx refuses calls from any other).
unsafe impl Sync for Slot {}

static GENERATOR: Slot = Slot(UnsafeCell::new(None));

/// Runs `f` with this backend's generator.
#[inline]
pub fn with_rng<T>(f: impl FnOnce(&mut BackendRng) -> T) -> T {
    // SAFETY: a by-value read of MyProcPid, which PostgreSQL sets when a process starts (after the
    // fork) and never changes; this backend has one thread.
    let pid = unsafe { pg_sys::MyProcPid };
    let generation = gucs::seed_generation();
    // SAFETY: the backend's one thread, and `f` (a sampler) never calls with_rng, so this is the
    // only reference to the slot while it lives; an error unwinding out of `f` leaves the
    // generator whole (a draw in progress only advanced it).
    let slot = unsafe { &mut *GENERATOR.0.get() };
    let stale = match slot.as_ref() {
        Some(g) => g.pid != pid || g.seed_generation != generation,
        None => true,
    };
    if stale {
        *slot = Some(new_generator(pid));
    }
    f(&mut slot.as_mut().expect("just created").pool)
}

fn new_generator(pid: i32) -> Generator {
    let (seed, seed_generation) = gucs::seed();
    let rng = match seed {
        Some(s) => {
            // Parallel workers can finalize groups too (partitionwise plans):
            // give each its own stream, so a fixed seed never repeats noise.
            let mut rng = ChaCha20Rng::seed_from_u64(s);
            // SAFETY: a by-value read of ParallelWorkerNumber, -1 unless ParallelWorkerMain set it
            // when this process started as a parallel worker; this backend has one thread.
            rng.set_stream((unsafe { pg_sys::ParallelWorkerNumber } + 1) as u64);
            rng
        }
        None => ChaCha20Rng::try_from_os_rng().unwrap_or_else(|e| {
            pgrx::error!("dpnoise: the operating system's random source failed: {e}")
        }),
    };
    Generator {
        pid,
        seed_generation,
        pool: BitPool::new(rng),
    }
}
