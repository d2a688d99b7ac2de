//! Thin helpers for V1 C-convention functions: the calling convention
//! PostgreSQL's own `count` and `sum` use, without per-call wrappers.

use crate::errors;
use pgrx::pg_sys;
use pgrx::prelude::*;

/// Declares a V1 function `$name` (and its `pg_finfo_` record) whose body
/// gets the raw `FunctionCallInfo`. The body may rely on what its SQL
/// declaration promises: the number and types of the arguments, and for a
/// transition, final, combine or (de)serialize function, that it is called
/// by an aggregate whose state is the one this module made.
macro_rules! v1_function {
    ($finfo:ident, $name:ident, |$fcinfo:ident| $body:block) => {
        #[unsafe(no_mangle)]
        #[doc(hidden)]
        pub extern "C" fn $finfo() -> &'static pgrx::pg_sys::Pg_finfo_record {
            const V1: pgrx::pg_sys::Pg_finfo_record = pgrx::pg_sys::Pg_finfo_record { api_version: 1 };
            &V1
        }

        /// # Safety
        /// Called by PostgreSQL's function manager for the SQL function
        /// declared with this symbol.
        #[pgrx::pg_guard]
        #[unsafe(no_mangle)]
        pub unsafe extern "C-unwind" fn $name(fcinfo: pgrx::pg_sys::FunctionCallInfo) -> pgrx::pg_sys::Datum {
            // The body's contract is the function's SQL declaration (see
            // above): every raw read of `fcinfo` in it relies on that one
            // promise, stated here once rather than at each read.
            #[inline(always)]
            #[allow(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
            unsafe fn body($fcinfo: pgrx::pg_sys::FunctionCallInfo) -> pgrx::pg_sys::Datum $body
            // SAFETY: PostgreSQL calls this with a live FunctionCallInfo of the
            // function declared in SQL under this symbol, with its arguments.
            unsafe { body(fcinfo) }
        }
    };
}
pub(crate) use v1_function;

/// Whether argument `i` is NULL.
///
/// # Safety
/// `fcinfo` is a live call with more than `i` arguments.
#[inline]
pub unsafe fn arg_is_null(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> bool {
    // SAFETY: the caller's contract: args holds nargs > i entries.
    unsafe { (*(*fcinfo).args.as_ptr().add(i)).isnull }
}

/// Argument `i`'s datum (meaningless when it is NULL).
///
/// # Safety
/// As `arg_is_null`.
#[inline]
pub unsafe fn arg_datum(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> pg_sys::Datum {
    // SAFETY: the caller's contract: args holds nargs > i entries.
    unsafe { (*(*fcinfo).args.as_ptr().add(i)).value }
}

/// A float8 argument, which may be NULL.
///
/// # Safety
/// As `arg_is_null`, and argument `i` is declared float8 (passed by value).
#[inline]
pub unsafe fn arg_f64(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> Option<f64> {
    // SAFETY: the caller's contract.
    unsafe {
        (!arg_is_null(fcinfo, i)).then(|| f64::from_bits(arg_datum(fcinfo, i).value() as u64))
    }
}

/// An int8 argument, which may be NULL.
///
/// # Safety
/// As `arg_is_null`, and argument `i` is declared int8 (passed by value).
#[inline]
pub unsafe fn arg_i64(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> Option<i64> {
    // SAFETY: the caller's contract.
    unsafe { (!arg_is_null(fcinfo, i)).then(|| arg_datum(fcinfo, i).value() as i64) }
}

/// A float8 argument that must not be NULL.
///
/// # Safety
/// As `arg_f64`.
#[inline]
pub unsafe fn required_f64(fcinfo: pg_sys::FunctionCallInfo, i: usize, name: &str) -> f64 {
    // SAFETY: the caller's contract.
    unsafe { arg_f64(fcinfo, i) }.unwrap_or_else(|| errors::null_parameter(name))
}

#[inline]
pub fn f64_datum(x: f64) -> pg_sys::Datum {
    pg_sys::Datum::from(x.to_bits() as usize)
}

#[inline]
pub fn i64_datum(x: i64) -> pg_sys::Datum {
    pg_sys::Datum::from(x as usize)
}

/// Returns SQL NULL from a V1 function.
///
/// # Safety
/// `fcinfo` is a live call.
#[inline]
pub unsafe fn return_null(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the caller's contract; isnull is the call's result flag.
    unsafe { (*fcinfo).isnull = true };
    pg_sys::Datum::from(0usize)
}

/// The aggregate's memory context; an error if not called as an aggregate.
///
/// # Safety
/// `fcinfo` is a live call.
pub unsafe fn aggregate_context(
    fcinfo: pg_sys::FunctionCallInfo,
    function: &str,
) -> pg_sys::MemoryContext {
    let mut context: pg_sys::MemoryContext = std::ptr::null_mut();
    // SAFETY: the caller's contract; AggCheckCallContext only reads fcinfo->context.
    if unsafe { pg_sys::AggCheckCallContext(fcinfo, &mut context) } == 0 {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            format!("{function} can only be called as part of an aggregate")
        );
    }
    context
}

/// Refuses to release from a window frame: overlapping frames are not
/// disjoint sets of individuals, so each frame would spend ε again.
///
/// # Safety
/// `fcinfo` is a live call.
pub unsafe fn refuse_window(fcinfo: pg_sys::FunctionCallInfo, aggregate: &str) {
    // SAFETY: the caller's contract; AggCheckCallContext only reads fcinfo->context.
    let kind = unsafe { pg_sys::AggCheckCallContext(fcinfo, std::ptr::null_mut()) };
    if kind as u32 == pg_sys::AGG_CONTEXT_WINDOW {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            format!("{aggregate} cannot be used as a window function"),
            "Overlapping window frames would release the same individuals many times."
        );
    }
}

/// A fixed-size, plain-data transition state in the aggregate's context,
/// which lives as long as the group's aggregation.
///
/// # Safety
/// `fcinfo` is a live aggregate support call; `T` is plain data (no
/// pointers, no drop), as every state here is.
pub unsafe fn new_state<T: Copy>(
    fcinfo: pg_sys::FunctionCallInfo,
    function: &str,
    init: T,
) -> *mut T {
    // SAFETY: the caller's contract; MemoryContextAlloc returns size_of::<T>() bytes
    // aligned to MAXALIGN (8), enough for every state (none holds a field above 8).
    unsafe {
        let context = aggregate_context(fcinfo, function);
        let p = pg_sys::MemoryContextAlloc(context, std::mem::size_of::<T>()) as *mut T;
        p.write(init);
        p
    }
}

/// A plain-data state as bytea, for partial aggregation (its bytes as they are:
/// the workers run the same build on the same machine).
///
/// # Safety
/// `fcinfo` is a serialize call whose argument 0 (declared STRICT) is a `T` made by `new_state`.
pub unsafe fn serialize_state<T: Copy>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the caller's contract; the varlena is palloc'd with room for the header and the state.
    unsafe {
        let state = arg_datum(fcinfo, 0).cast_mut_ptr::<T>();
        let bytes = std::mem::size_of::<T>();
        let total = pg_sys::VARHDRSZ + bytes;
        let out = pg_sys::palloc(total) as *mut pg_sys::varlena;
        pgrx::set_varsize_4b(out, total as i32);
        std::ptr::copy_nonoverlapping(state as *const u8, pgrx::vardata_4b(out) as *mut u8, bytes);
        pg_sys::Datum::from(out)
    }
}

/// The inverse of `serialize_state`, into the aggregate's context.
///
/// # Safety
/// `fcinfo` is a deserialize call whose argument 0 (declared STRICT) is a bytea.
pub unsafe fn deserialize_state<T: Copy>(
    fcinfo: pg_sys::FunctionCallInfo,
    function: &str,
) -> pg_sys::Datum {
    // SAFETY: the caller's contract; the length is checked before the copy, and any
    // bit pattern is a valid T (the states are integers and floats only).
    unsafe {
        let raw = pg_sys::pg_detoast_datum_packed(arg_datum(fcinfo, 0).cast_mut_ptr());
        let bytes = std::mem::size_of::<T>();
        if pgrx::varsize_any_exhdr(raw) != bytes {
            pgrx::error!("{function}: malformed partial state");
        }
        let mut state = std::mem::MaybeUninit::<T>::uninit();
        std::ptr::copy_nonoverlapping(
            pgrx::vardata_any(raw) as *const u8,
            state.as_mut_ptr() as *mut u8,
            bytes,
        );
        pg_sys::Datum::from(new_state(fcinfo, function, state.assume_init()))
    }
}

/// Combines two plain-data partial states: NULL on either side takes the
/// other (copied into the aggregate's context), else `merge` folds b into a.
///
/// # Safety
/// `fcinfo` is a combine call whose arguments are NULL or `T`s made by `new_state`.
pub unsafe fn combine_states<T: Copy>(
    fcinfo: pg_sys::FunctionCallInfo,
    function: &str,
    merge: impl FnOnce(&mut T, &T),
) -> pg_sys::Datum {
    // SAFETY: the caller's contract; a and b are distinct states (PostgreSQL never
    // combines a state with itself), so the &mut and the & do not alias.
    unsafe {
        let state = |i| {
            if arg_is_null(fcinfo, i) {
                std::ptr::null_mut()
            } else {
                arg_datum(fcinfo, i).cast_mut_ptr::<T>()
            }
        };
        let (a, b) = (state(0), state(1));
        if b.is_null() {
            return if a.is_null() {
                return_null(fcinfo)
            } else {
                pg_sys::Datum::from(a)
            };
        }
        if a.is_null() {
            return pg_sys::Datum::from(new_state(fcinfo, function, *b));
        }
        merge(&mut *a, &*b);
        pg_sys::Datum::from(a)
    }
}

/// Whether every `SSPACE = n` in `sql` says `size`: each aggregate's
/// declared state size must be its state's real size (the planner sizes
/// hash aggregation by it). Used in `const` assertions, so a state that
/// grows or shrinks without its SQL fails the build.
pub const fn every_sspace_is(sql: &str, size: usize) -> bool {
    let bytes = sql.as_bytes();
    let key = b"SSPACE = ";
    let mut i = 0;
    let mut found = false;
    while i + key.len() <= bytes.len() {
        let mut j = 0;
        while j < key.len() && bytes[i + j] == key[j] {
            j += 1;
        }
        if j == key.len() {
            let mut at = i + key.len();
            let mut n = 0usize;
            while at < bytes.len() && bytes[at].is_ascii_digit() {
                n = n * 10 + (bytes[at] - b'0') as usize;
                at += 1;
            }
            if n != size {
                return false;
            }
            found = true;
        }
        i += 1;
    }
    found
}
