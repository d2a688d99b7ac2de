//! The functions the gate's bounding writes into a query over a table with
//! several rows per person (`gate::bounding`): one pass over the rows,
//! sorted by person and, within a person, by the key of each group.
//!
//! - `dp_bound_key(seed, person, keys…)`: a group's key for the choice, a
//!   keyed hash of the person and the group keys (`dpnoise_core::bounding`);
//! - window functions over `PARTITION BY person ORDER BY dp_bound_key(…)`:
//!   a person's rows of one group are adjacent (one run of equal keys), and
//!   their groups come in the order of their keys, so the first k runs are
//!   the k groups the person contributes to. On the first row of each of
//!   those runs, `dp_bound_kept` gives 1 and the others the person's
//!   combined value in the group (their sum, average, or whether they have
//!   a value); on every other row, NULL.
//!
//! Each call keeps a few words per person (the current run), and reads the
//! rows of a run once more: the memory is bounded by the window's own
//! (work_mem, then disk), whatever a person's rows.

use crate::fmgr::{f64_datum, i64_datum, return_null, v1_function};
use dpnoise_core::bounding::{choice_key, ExactSum, IntegerSum};
use pgrx::pg_sys;
use std::ffi::{c_int, c_void};

pgrx::extension_sql_file!("per_person.sql", name = "per_person_sql");

// windowapi.h, which pgrx does not bind, and fmgr.h's FunctionCall2Coll.
// An error raised below them (a cancel while the window reads its rows)
// reaches PostgreSQL's handler as raised: the functions below hold
// nothing that needs dropping.
// SAFETY: these match PostgreSQL's prototypes (windowapi.h and fmgr.h, 9.0 and later).
unsafe extern "C-unwind" {
    fn WinGetPartitionLocalMemory(winobj: *mut c_void, size: usize) -> *mut c_void;
    fn WinGetFuncArgCurrent(winobj: *mut c_void, argno: c_int, isnull: *mut bool) -> pg_sys::Datum;
    fn WinGetFuncArgInPartition(
        winobj: *mut c_void,
        argno: c_int,
        relpos: c_int,
        seektype: c_int,
        set_mark: bool,
        isnull: *mut bool,
        isout: *mut bool,
    ) -> pg_sys::Datum;
    // fmgr.h: a type's hash function cannot fail on a value of its type;
    // called unguarded (a guard costs a sigsetjmp per call, per row).
    #[link_name = "FunctionCall2Coll"]
    fn function_call_2(
        flinfo: *mut pg_sys::FmgrInfo,
        collation: pg_sys::Oid,
        a: pg_sys::Datum,
        b: pg_sys::Datum,
    ) -> pg_sys::Datum;
}

/// windowapi.h's WINDOW_SEEK_CURRENT.
const SEEK_CURRENT: c_int = 0;

/// The second half of the choice's SipHash key: the seed is the first.
const CHOICE_DOMAIN: u64 = 0x6470_6e6f_6973_6531;

/// One argument's hash function, as `dp_bound_key` keeps it between calls
/// (an array of them in the function's memory context).
#[repr(C)]
struct Hasher {
    valid: bool,
    collation: pg_sys::Oid,
    function: pg_sys::FmgrInfo,
}

// dp_bound_key(seed int8, VARIADIC "any") → int8: SipHash of each
// argument's 64-bit hash (its type's extended hash, under its collation:
// values equal under the group's equality hash alike; NULL has its own word).
v1_function!(pg_finfo_dp_bound_key, dp_bound_key, |fcinfo| {
    let flinfo = (*fcinfo).flinfo;
    let nargs = (*fcinfo).nargs as usize;
    if (*flinfo).fn_extra.is_null() {
        (*flinfo).fn_extra = hashers(flinfo, nargs).cast();
    }
    let hashers = std::slice::from_raw_parts_mut((*flinfo).fn_extra as *mut Hasher, nargs);
    let seed = crate::fmgr::arg_i64(fcinfo, 0).unwrap_or(0) as u64;
    let mut words = [0u64; 16];
    let mut spill = Vec::new();
    for (i, hasher) in hashers.iter_mut().enumerate().skip(1) {
        let word = if hasher.valid && !crate::fmgr::arg_is_null(fcinfo, i) {
            let arg = crate::fmgr::arg_datum(fcinfo, i);
            function_call_2(
                &mut hasher.function,
                hasher.collation,
                arg,
                pg_sys::Datum::from(0usize),
            )
            .value() as u64
        } else {
            0x9e37_79b9_7f4a_7c15 ^ i as u64
        };
        if i <= words.len() {
            words[i - 1] = word;
        } else {
            spill.push(word);
        }
    }
    let key = [seed, CHOICE_DOMAIN];
    let hash = if nargs - 1 <= words.len() {
        choice_key(key, &words[..nargs - 1])
    } else {
        let mut all = words.to_vec();
        all.extend(spill);
        choice_key(key, &all)
    };
    i64_datum(hash as i64)
});

/// Each argument's extended hash function and collation, palloc'd in the
/// function's memory context; an argument whose type has none is hashed
/// as NULL (the gate refuses such a key before writing the call).
///
/// # Safety
/// `flinfo` is the live FmgrInfo of a dp_bound_key call with `nargs` arguments.
unsafe fn hashers(flinfo: *mut pg_sys::FmgrInfo, nargs: usize) -> *mut Hasher {
    // SAFETY: the caller's contract; the call expression's arguments are live
    // nodes; the array is zeroed (not valid) before each entry is filled.
    unsafe {
        let expr = (*flinfo).fn_expr;
        let args = if !expr.is_null() && (*expr).type_ == pg_sys::NodeTag::T_FuncExpr {
            crate::pg_list::list_nodes((*(expr as *mut pg_sys::FuncExpr)).args)
        } else {
            Vec::new()
        };
        let hashers = pg_sys::MemoryContextAllocZero(
            (*flinfo).fn_mcxt,
            nargs * std::mem::size_of::<Hasher>(),
        ) as *mut Hasher;
        for i in 1..nargs {
            let type_ = pg_sys::get_fn_expr_argtype(flinfo, i as c_int);
            let cache =
                pg_sys::lookup_type_cache(type_, pg_sys::TYPECACHE_HASH_EXTENDED_PROC as c_int);
            let proc_ = if cache.is_null() {
                pg_sys::InvalidOid
            } else {
                (*cache).hash_extended_proc
            };
            if proc_ == pg_sys::InvalidOid {
                continue;
            }
            let hasher = &mut *hashers.add(i);
            hasher.collation = args
                .get(i)
                .map_or(pg_sys::InvalidOid, |a| pg_sys::exprCollation(*a));
            pg_sys::fmgr_info_cxt(proc_, &mut hasher.function, (*flinfo).fn_mcxt);
            hasher.valid = true;
        }
        hashers
    }
}

/// A person's current run, in the window's memory for the person.
#[repr(C)]
struct Run {
    started: bool,
    key: i64,
    /// The run's place among the person's runs, from 1.
    index: i64,
}

/// Moves to the current row: whether it starts a run among the person's
/// first k (its group is one the person contributes to). A run is a stretch
/// of rows with equal keys in the window's order: the gate's window orders
/// a person's rows by key, so each group is one run.
///
/// # Safety
/// `fcinfo` is a live call of a window function whose arguments 0 and 1
/// are the choice key (int8, not NULL) and k (int4).
unsafe fn kept_run_start(fcinfo: pg_sys::FunctionCallInfo) -> bool {
    // SAFETY: the caller's contract; the partition's memory is zeroed at its start.
    unsafe {
        let winobj = (*fcinfo).context.cast::<c_void>();
        let run = WinGetPartitionLocalMemory(winobj, std::mem::size_of::<Run>()) as *mut Run;
        let mut null = false;
        let key = WinGetFuncArgCurrent(winobj, 0, &mut null).value() as i64;
        let k = WinGetFuncArgCurrent(winobj, 1, &mut null).value() as i32 as i64;
        if (*run).started && key == (*run).key {
            return false;
        }
        (*run).started = true;
        (*run).key = key;
        (*run).index += 1;
        (*run).index <= k
    }
}

/// Calls `each` with argument 2 of every row of the current run (from the
/// current row on, while the choice key stays the same). The current row
/// is read in place; only the rows after it are fetched.
///
/// # Safety
/// As `kept_run_start`, which has just returned true for this row.
unsafe fn run_values(fcinfo: pg_sys::FunctionCallInfo, mut each: impl FnMut(pg_sys::Datum, bool)) {
    // SAFETY: the caller's contract; relative positions from 1 stay inside the partition or are flagged out.
    unsafe {
        let winobj = (*fcinfo).context.cast::<c_void>();
        let mut null = false;
        let key = WinGetFuncArgCurrent(winobj, 0, &mut null).value() as i64;
        let value = WinGetFuncArgCurrent(winobj, 2, &mut null);
        each(value, null);
        let mut offset: c_int = 1;
        loop {
            let mut out = false;
            let row_key = WinGetFuncArgInPartition(
                winobj,
                0,
                offset,
                SEEK_CURRENT,
                false,
                &mut null,
                &mut out,
            );
            if out || row_key.value() as i64 != key {
                return;
            }
            let value = WinGetFuncArgInPartition(
                winobj,
                2,
                offset,
                SEEK_CURRENT,
                false,
                &mut null,
                &mut out,
            );
            each(value, null);
            offset += 1;
            if offset % 4096 == 0 {
                pgrx::check_for_interrupts!();
            }
        }
    }
}

// dp_bound_kept(key int8, k int4) → int8: 1 on the first row of each of the person's first k groups.
v1_function!(pg_finfo_dp_bound_kept, dp_bound_kept, |fcinfo| {
    if kept_run_start(fcinfo) {
        i64_datum(1)
    } else {
        return_null(fcinfo)
    }
});

// dp_bound_present(key int8, k int4, value "any") → int8: 1 if the person has a non-NULL value in the group.
v1_function!(pg_finfo_dp_bound_present, dp_bound_present, |fcinfo| {
    if !kept_run_start(fcinfo) {
        return return_null(fcinfo);
    }
    let mut present = false;
    run_values(fcinfo, |_, null| present |= !null);
    if present {
        i64_datum(1)
    } else {
        return_null(fcinfo)
    }
});

// dp_bound_sum(key int8, k int4, value float8) → float8: the person's exact sum in the group.
v1_function!(
    pg_finfo_dp_bound_sum_float8,
    dp_bound_sum_float8,
    |fcinfo| {
        match float_run(fcinfo) {
            Some((sum, _)) => f64_datum(sum),
            None => return_null(fcinfo),
        }
    }
);

// dp_bound_avg(key int8, k int4, value float8) → float8: the person's average in the group.
v1_function!(
    pg_finfo_dp_bound_avg_float8,
    dp_bound_avg_float8,
    |fcinfo| {
        match float_run(fcinfo) {
            Some((sum, count)) => f64_datum(sum / count as f64),
            None => return_null(fcinfo),
        }
    }
);

// dp_bound_sum(key int8, k int4, value int8) → int8: the person's sum in the group, saturated.
v1_function!(pg_finfo_dp_bound_sum_int8, dp_bound_sum_int8, |fcinfo| {
    if !kept_run_start(fcinfo) {
        return return_null(fcinfo);
    }
    let (mut sum, mut count) = (IntegerSum::default(), 0u64);
    run_values(fcinfo, |value, null| {
        if !null {
            sum.add(value.value() as i64);
            count += 1;
        }
    });
    if count > 0 {
        i64_datum(sum.value())
    } else {
        return_null(fcinfo)
    }
});

/// The exact sum and count of the run's non-NULL float8 values, on the
/// first row of a kept run that has any. A run of one value (a person with
/// one row in the group) is that value, without the accumulator.
///
/// # Safety
/// As `kept_run_start`, argument 2 being float8.
unsafe fn float_run(fcinfo: pg_sys::FunctionCallInfo) -> Option<(f64, u64)> {
    // SAFETY: the caller's contract.
    unsafe {
        if !kept_run_start(fcinfo) {
            return None;
        }
        let (mut first, mut sum, mut count) = (0.0, None::<ExactSum>, 0u64);
        run_values(fcinfo, |value, null| {
            if null {
                return;
            }
            let x = f64::from_bits(value.value() as u64);
            count += 1;
            match (&mut sum, count) {
                (_, 1) => first = x,
                (None, _) => {
                    let mut exact = ExactSum::default();
                    exact.add(first);
                    exact.add(x);
                    sum = Some(exact);
                }
                (Some(exact), _) => exact.add(x),
            }
        });
        (count > 0).then(|| (sum.map_or(first, |s| s.value()), count))
    }
}

/// Runs longer than this are not held in memory: their order statistic is
/// found by bisection, one more read of the run per step (at most 64).
const HELD: usize = 8192;

/// The order key of a float8: integers in the order of `f64::total_cmp`.
fn order_key(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

/// The value with order key `key` (`order_key`'s inverse).
fn from_order_key(key: u64) -> f64 {
    f64::from_bits(if key >> 63 == 1 {
        key & !(1 << 63)
    } else {
        !key
    })
}

/// On the first row of a kept run with non-NULL float8 values: the value
/// of rank `rank(n)` (from 0) among the run's n values in ascending
/// order. The same value whatever order the run's rows come in.
///
/// # Safety
/// As `kept_run_start`, argument 2 being float8.
unsafe fn run_ranked(fcinfo: pg_sys::FunctionCallInfo, rank: impl Fn(u64) -> u64) -> Option<f64> {
    // SAFETY: the caller's contract.
    unsafe {
        if !kept_run_start(fcinfo) {
            return None;
        }
        let (mut held, mut n) = (Vec::new(), 0u64);
        run_values(fcinfo, |value, null| {
            if !null {
                n += 1;
                if held.len() < HELD {
                    held.push(order_key(f64::from_bits(value.value() as u64)));
                }
            }
        });
        if n == 0 {
            return None;
        }
        let j = rank(n).min(n - 1);
        if n as usize == held.len() {
            return Some(from_order_key(*held.select_nth_unstable(j as usize).1));
        }
        // The least key with more than j values at or below it.
        let (mut low, mut high) = (0u64, u64::MAX);
        while low < high {
            let middle = low + (high - low) / 2;
            let mut at_most = 0u64;
            run_values(fcinfo, |value, null| {
                if !null && order_key(f64::from_bits(value.value() as u64)) <= middle {
                    at_most += 1;
                }
            });
            if at_most > j {
                high = middle;
            } else {
                low = middle + 1;
            }
        }
        Some(from_order_key(low))
    }
}

// dp_bound_quantile(key int8, k int4, value float8, p float8) → float8: the
// person's own p-quantile in the group (the nearest rank), so that a
// quantile over persons reads one value per person.
v1_function!(pg_finfo_dp_bound_quantile, dp_bound_quantile, |fcinfo| {
    let mut null = false;
    let winobj = (*fcinfo).context.cast::<c_void>();
    let p = f64::from_bits(WinGetFuncArgCurrent(winobj, 3, &mut null).value() as u64);
    // nearest_rank clamps p to [0, 1] and reads NaN as ½; NULL likewise.
    let p = if null { f64::NAN } else { p };
    match run_ranked(fcinfo, |n| dpnoise_core::bounding::nearest_rank(p, n)) {
        Some(x) => f64_datum(x),
        None => return_null(fcinfo),
    }
});

// dp_bound_row(key int8, k int4, value float8) → float8: one of the person's
// values in the group, at a rank drawn from the group's choice key (each
// of the person's rows equally likely; the same one every run).
v1_function!(pg_finfo_dp_bound_row, dp_bound_row, |fcinfo| {
    let mut null = false;
    let winobj = (*fcinfo).context.cast::<c_void>();
    let key = WinGetFuncArgCurrent(winobj, 0, &mut null).value() as u64;
    match run_ranked(fcinfo, |n| dpnoise_core::bounding::drawn_rank(key, n)) {
        Some(x) => f64_datum(x),
        None => return_null(fcinfo),
    }
});
