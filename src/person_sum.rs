//! The per-person combine of the gate's grouped bounding plan
//! (`gate::bounding`, levels without GROUP BY keys): each person's rows
//! aggregated by the person, `GROUP BY` the privacy unit, where the
//! windowed plan sorts them by person and choice key. A person's exact sum
//! (`dp_person_sum`) and average (`dp_person_avg`) of float8 values: the
//! core's `ExactSum`, so the result is the same in any order of the rows.
//! No combine function: a partial aggregate by person in each parallel
//! worker reduces nothing (a person's rows are spread over the workers)
//! and spills its states; the planner sorts the rows by person instead
//! (the planner hook turns hashing off for such a statement), which a
//! parallel plan does under a Gather Merge.

use crate::fmgr::{arg_datum, arg_f64, arg_is_null, f64_datum, return_null, v1_function};
use dpnoise_core::bounding::{ExactSum, ShortSum};
use pgrx::pg_sys;

pgrx::extension_sql_file!("person_sum.sql", name = "person_sum_sql");
const _: () = assert!(crate::fmgr::every_sspace_is(
    include_str!("person_sum.sql"),
    std::mem::size_of::<PersonSum>()
));

/// A person's non-NULL values so far: how many, and their exact sum, in
/// 128 bits while it fits, else in an `ExactSum` in the aggregate's context.
#[repr(C)]
#[derive(Clone, Copy)]
struct PersonSum {
    count: u64,
    short: ShortSum,
    long: *mut ExactSum,
}

impl PersonSum {
    /// The exact sum of the values so far, rounded once.
    fn value(&self) -> f64 {
        if self.long.is_null() {
            self.short.value()
        } else {
            // SAFETY: `long` was allocated (and filled) by `step` in this group's context.
            unsafe { (*self.long).value() }
        }
    }
}

const NAME: &str = "a dpnoise per-person sum";

/// The state argument `i`: NULL or ours.
///
/// # Safety
/// `fcinfo` is a live call of one of this module's support functions.
unsafe fn state(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> *mut PersonSum {
    // SAFETY: the caller's contract.
    unsafe {
        if arg_is_null(fcinfo, i) {
            std::ptr::null_mut()
        } else {
            arg_datum(fcinfo, i).cast_mut_ptr()
        }
    }
}

/// A new, empty state in the aggregate's context.
///
/// # Safety
/// `fcinfo` is a live aggregate support call.
unsafe fn empty(fcinfo: pg_sys::FunctionCallInfo) -> *mut PersonSum {
    let init = PersonSum {
        count: 0,
        short: ShortSum::default(),
        long: std::ptr::null_mut(),
    };
    // SAFETY: the caller's contract; PersonSum is plain data.
    unsafe { crate::fmgr::new_state(fcinfo, NAME, init) }
}

// dp_person_sum_step(internal, float8) → internal. Called for every row,
// so unguarded (a guard costs a sigsetjmp per call): the common step (the
// state exists, the value fits the short sum) only reads and adds, and
// cannot fail; the rest goes through `step_slowly`, guarded. An error
// there longjmps through this frame, which holds nothing to drop.
#[unsafe(no_mangle)]
#[doc(hidden)]
pub extern "C" fn pg_finfo_dp_person_sum_step() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// # Safety
/// Called by PostgreSQL's function manager for dp_person_sum_step(internal, float8).
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn dp_person_sum_step(
    fcinfo: pg_sys::FunctionCallInfo,
) -> pg_sys::Datum {
    // SAFETY: the caller's contract: two arguments, the first NULL or our state.
    unsafe {
        let s = state(fcinfo, 0);
        if s.is_null() || !(*s).long.is_null() {
            return step_slowly(fcinfo);
        }
        if let Some(x) = arg_f64(fcinfo, 1) {
            let before = (*s).short;
            if !(*s).short.add(x) {
                (*s).short = before;
                return step_slowly(fcinfo);
            }
            (*s).count += 1;
        }
        pg_sys::Datum::from(s)
    }
}

/// The step where it allocates: a new state, or the move to the long sum.
///
/// # Safety
/// As `dp_person_sum_step`.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn step_slowly(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the caller's contract; the state and the long sum live in the aggregate's context.
    unsafe {
        let mut s = state(fcinfo, 0);
        if s.is_null() {
            s = empty(fcinfo);
        }
        if let Some(x) = arg_f64(fcinfo, 1) {
            (*s).count += 1;
            if !(*s).long.is_null() {
                (*(*s).long).add(x);
            } else if !(*s).short.add(x) {
                let context = crate::fmgr::aggregate_context(fcinfo, NAME);
                let long = pg_sys::MemoryContextAlloc(context, std::mem::size_of::<ExactSum>())
                    as *mut ExactSum;
                long.write((*s).short.into_exact());
                (*long).add(x);
                (*s).long = long;
            }
        }
        pg_sys::Datum::from(s)
    }
}

// dp_person_sum_final(internal) → float8: the exact sum rounded once (NULL without values).
v1_function!(
    pg_finfo_dp_person_sum_final,
    dp_person_sum_final,
    |fcinfo| {
        let s = state(fcinfo, 0);
        if s.is_null() || (*s).count == 0 {
            return return_null(fcinfo);
        }
        f64_datum((*s).value())
    }
);

// dp_person_avg_final(internal) → float8: the exact sum rounded, over the count.
v1_function!(
    pg_finfo_dp_person_avg_final,
    dp_person_avg_final,
    |fcinfo| {
        let s = state(fcinfo, 0);
        if s.is_null() || (*s).count == 0 {
            return return_null(fcinfo);
        }
        f64_datum((*s).value() / (*s).count as f64)
    }
);
