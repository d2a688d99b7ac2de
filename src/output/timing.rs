//! The run time of an analyst's statement, held as a release.
//!
//! A statement that makes a fresh release reads protected rows, and how
//! long it takes follows them: a condition on one person that lets their
//! row meet a public side's rows, a long value hashed, a page read. The
//! gate's plan check bounds what one protected row can make the statement
//! do (`gate::check_plan`: the rows and pages it meets, weighed by the
//! expression steps run for each); that work times
//! `dpnoise.timing_row_microseconds` is the statement's bound B, in
//! microseconds.
//!
//! The answer is then held: the rows are kept in a tuplestore while the
//! plan runs, and sent only after a delay of A + N microseconds, where N is
//! the truncated Laplacian on the integers −A … A for a shift of B at
//! (`dpnoise.timing_epsilon`, `dpnoise.timing_delta`) (dpnoise-core's
//! `TruncatedLaplace`, drawn from the backend's ChaCha20). If one person
//! changes the run time T by at most B, the time the answer arrives,
//! T + A + N, is (ε, δ)-DP; the statement pays that (ε, δ) with its
//! releases (`charge::prepay`). Whatever happens after the run is
//! post-processing of that time: a cancel or `statement_timeout` that fires
//! during the run or during the delay ends the statement the same way at
//! the same moment, so it tells only whether T + A + N had passed.
//!
//! A repeat answered from the store reads no protected row and is not
//! held. What this does not cover (docs/analysts.md, "Run time"): a person
//! with many rows in a table of several rows per person adds B per row;
//! planning reads the protected tables' statistics; another session sees
//! this one's load on the machine; and a cursor fetched in parts holds
//! only its first part.

use dpnoise_core::approximate::TruncatedLaplace;
use dpnoise_core::noise::LatticeNoise;
use dpnoise_core::params::Delta;
use dpnoise_core::rational::Epsilon;
use pgrx::pg_sys;
use std::cell::RefCell;
use std::time::{Duration, Instant};

/// A started execution whose answer is held, and its bound in microseconds.
struct Held {
    query: *mut pg_sys::QueryDesc,
    bound: u128,
}

thread_local! {
    static HELD: RefCell<Vec<Held>> = const { RefCell::new(Vec::new()) };
}

// SAFETY: the prototype of SetTuplestoreDestReceiverParams in
// executor/tstoreReceiver.h, the same in PostgreSQL 14 to 18; pgrx does not bind it.
unsafe extern "C-unwind" {
    fn SetTuplestoreDestReceiverParams(
        receiver: *mut pg_sys::DestReceiver,
        store: *mut pg_sys::Tuplestorestate,
        context: pg_sys::MemoryContext,
        detoast: bool,
        target: pg_sys::TupleDesc,
        map_failure: *const std::ffi::c_char,
    );
}

/// Holds the answer of the execution `query`, which paid for fresh
/// releases, when the run time is a release (`gucs::timing`); `work` is
/// what one protected row can make it do (`gate::check_plan`).
pub fn hold(query: *mut pg_sys::QueryDesc, work: f64) {
    let Some((_, _, row)) = crate::gucs::timing() else {
        return;
    };
    if work <= 0.0 {
        return;
    }
    let bound = (work * row).ceil().clamp(1.0, 1e12) as u128;
    HELD.with(|h| {
        let mut h = h.borrow_mut();
        // A QueryDesc at the address of one that ended unseen (its portal dropped) replaces it.
        h.retain(|x| x.query != query);
        h.push(Held { query, bound });
    });
}

/// The execution ended (or its transaction aborted: `aborted`).
pub fn ended(query: *mut pg_sys::QueryDesc) {
    HELD.with(|h| h.borrow_mut().retain(|x| x.query != query));
}

/// A transaction aborted: every execution in it ended (a subtransaction's
/// abort leaves the cursors opened before it, and their holds).
pub fn aborted() {
    HELD.with(|h| h.borrow_mut().clear());
}

/// The delay in microseconds for a statement of bound `bound`: A + N.
fn delay(bound: u128) -> u64 {
    let Some((epsilon, delta, _)) = crate::gucs::timing() else {
        return 0;
    };
    let noise = Epsilon::new(epsilon)
        .and_then(|e| Delta::new(delta).and_then(|d| TruncatedLaplace::new(e, bound, d)))
        .unwrap_or_else(|e| {
            crate::errors::raise_sqlstate(
                "22023",
                format!("dpnoise: the run time's delay cannot be calibrated: {e}"),
                None,
            )
        });
    let limit = noise.limit() as i128;
    let n = crate::rng::with_rng(|rng| noise.sample(rng));
    (limit + n).clamp(0, i128::from(u32::MAX) * 1000) as u64
}

/// Waits `micros` microseconds, answering a cancel or a timeout as the
/// run would (CHECK_FOR_INTERRUPTS at least every millisecond).
fn wait(micros: u64) {
    let end = Instant::now() + Duration::from_micros(micros);
    loop {
        pgrx::check_for_interrupts!();
        let now = Instant::now();
        if now >= end {
            return;
        }
        let left = (end - now).as_micros().min(1000) as std::ffi::c_long;
        // SAFETY: a plain sleep; a signal ends it early, and the loop checks interrupts again.
        unsafe { pg_sys::pg_usleep(left) };
    }
}

/// Runs the execution `query` (`run`: ExecutorRun's work with its
/// arguments), holding its answer if it is held: its rows go to a
/// tuplestore, and reach the statement's receiver after the delay. A run
/// that fetches part of the rows (`count` > 0) is delayed once, its rows
/// sent as they come.
///
/// # Safety
/// `query` is the live QueryDesc being run, on the backend's only thread; `run` runs it.
pub unsafe fn run(query: *mut pg_sys::QueryDesc, count: u64, run: impl FnOnce()) {
    let Some(bound) = HELD.with(|h| {
        let mut h = h.borrow_mut();
        let at = h.iter().position(|x| x.query == query)?;
        Some(h.remove(at).bound)
    }) else {
        run();
        return;
    };
    // SAFETY: the caller's contract; the plan is the execution's.
    let sends = unsafe {
        (*query).operation == pg_sys::CmdType::CMD_SELECT || (*(*query).plannedstmt).hasReturning
    };
    // SAFETY: the caller's contract. Errors raised in begin, the run or finish longjmp through
    // this frame, which owns nothing to drop (the closure is consumed, the rest are pointers).
    unsafe {
        if count != 0 || !sends {
            run();
            finish(
                query,
                bound,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            );
            return;
        }
        let real = (*query).dest;
        let (store, buffer) = (
            pg_sys::tuplestore_begin_heap(false, false, pg_sys::work_mem),
            begin(),
        );
        SetTuplestoreDestReceiverParams(
            buffer,
            store,
            pg_sys::CurrentMemoryContext,
            false,
            std::ptr::null_mut(),
            std::ptr::null(),
        );
        (*query).dest = buffer;
        run();
        (*query).dest = real;
        finish(query, bound, store, buffer, real);
    }
}

/// A tuplestore receiver.
///
/// # Safety
/// Inside a transaction.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn begin() -> *mut pg_sys::DestReceiver {
    // SAFETY: the caller's contract.
    unsafe { pg_sys::CreateDestReceiver(pg_sys::CommandDest::DestTuplestore) }
}

/// Waits the delay, then sends what `store` kept to `real` (nothing when
/// `store` is null: the rows went out as they came). Under pg_guard, so
/// that a cancel or timeout during the wait, or an error while sending,
/// reaches PostgreSQL as the error it is.
///
/// # Safety
/// `query` is the live QueryDesc just run; `store` and `buffer` null or
/// what `run` made for it; `real` its receiver.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn finish(
    query: *mut pg_sys::QueryDesc,
    bound: u128,
    store: *mut pg_sys::Tuplestorestate,
    buffer: *mut pg_sys::DestReceiver,
    real: *mut pg_sys::DestReceiver,
) {
    wait(delay(bound));
    if store.is_null() {
        return;
    }
    // SAFETY: the caller's contract; the slot is made for the query's result descriptor.
    unsafe {
        let desc = (*query).tupDesc;
        if let Some(startup) = (*real).rStartup {
            startup(real, (*query).operation as i32, desc);
        }
        let slot = pg_sys::MakeSingleTupleTableSlot(desc, &raw const pg_sys::TTSOpsMinimalTuple);
        if let Some(receive) = (*real).receiveSlot {
            while pg_sys::tuplestore_gettupleslot(store, true, false, slot) {
                if !receive(slot, real) {
                    break;
                }
            }
        }
        if let Some(shutdown) = (*real).rShutdown {
            shutdown(real);
        }
        pg_sys::ExecDropSingleTupleTableSlot(slot);
        pg_sys::tuplestore_end(store);
        if let Some(destroy) = (*buffer).rDestroy {
            destroy(buffer);
        }
    }
}
