//! Errors as users see them: each kind has one fixed SQLSTATE (README).

use pgrx::prelude::*;

/// Raises a core error with its documented SQLSTATE.
pub fn raise(err: dpnoise_core::Error) -> ! {
    let code = match err {
        dpnoise_core::Error::InvalidParameter { .. } => {
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE
        }
        dpnoise_core::Error::OutOfRange(_) => PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
        dpnoise_core::Error::NoiseTooLarge(_) => {
            ereport!(
                ERROR,
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                err.to_string(),
                "The noise's scale, max(|lower|, |upper|)/epsilon, must be below 2^62: narrow the bounds, raise epsilon, or sum float8 values."
            );
        }
    };
    ereport!(ERROR, code, err.to_string());
}

/// An argument that must be given was NULL (SQLSTATE 22023).
pub fn null_parameter(name: &str) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("{name} must not be NULL")
    );
}

/// A privacy parameter that varies from row to row (SQLSTATE 22023).
pub fn varying_parameter(function: &str) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("the privacy parameters of {function} must be the same for every row"),
        "Pass constants or query parameters ($n), combined by immutable functions: not columns, subqueries, or stable or volatile functions, which could depend on the data."
    );
}

/// Unwraps a core result or raises it.
pub trait OrRaise<T> {
    fn or_raise(self) -> T;
}

impl<T> OrRaise<T> for Result<T, dpnoise_core::Error> {
    #[inline]
    fn or_raise(self) -> T {
        match self {
            Ok(v) => v,
            Err(e) => raise(e),
        }
    }
}

/// The exact 128-bit sum overflowed (SQLSTATE 22003).
pub fn sum_overflow() -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
        "dp_sum_laplace: the exact sum overflows its 128-bit accumulator"
    );
}

/// A NaN where a value is summed (SQLSTATE 22023).
pub fn nan_value(function: &str) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("{function}: value must not be NaN")
    );
}

/// SQLSTATE of a refused release: the role's budget (or the global cap)
/// does not cover it, or the role has none.
pub const BUDGET_EXHAUSTED: &str = "ZB001";
/// SQLSTATE of a release that could not be charged (dpnoise not preloaded,
/// no ledger worker, the worker failed): nothing was released.
pub const LEDGER_UNAVAILABLE: &str = "ZB002";

mod raw {
    use std::ffi::{c_char, c_int};
    // PostgreSQL's error API, called directly: pgrx's error codes are a
    // closed enum, so a SQLSTATE of our own class cannot pass through it.
    // SAFETY: these match the prototypes in PostgreSQL's utils/elog.h (13 and
    // later): bool errstart(int, const char *), int errcode(int), int
    // errmsg_internal(const char *, ...), int errhint(const char *, ...), and
    // void errfinish(const char *, int, const char *).
    unsafe extern "C" {
        pub fn errstart(elevel: c_int, domain: *const c_char) -> bool;
        pub fn errcode(sqlerrcode: c_int) -> c_int;
        pub fn errmsg_internal(fmt: *const c_char, ...) -> c_int;
        pub fn errhint(fmt: *const c_char, ...) -> c_int;
        pub fn errfinish(filename: *const c_char, lineno: c_int, funcname: *const c_char);
    }
}

/// Raises ERROR with a SQLSTATE outside pgrx's list (ours: class ZB).
///
/// The strings are copied to palloc'd memory and dropped before the
/// longjmp, which leaves for PostgreSQL's handler without unwinding: the
/// callers on the way hold no locks or guards, at worst a few bytes of
/// Rust heap leak per error.
#[inline(never)]
pub fn raise_sqlstate(code: &str, message: String, hint: Option<String>) -> ! {
    let b = code.as_bytes();
    assert_eq!(b.len(), 5);
    let six = |c: u8| (c.wrapping_sub(b'0') & 0x3f) as i32;
    let sqlerrcode =
        six(b[0]) | six(b[1]) << 6 | six(b[2]) << 12 | six(b[3]) << 18 | six(b[4]) << 24;
    let to_palloc = |s: String| {
        let c = std::ffi::CString::new(s.replace('\0', " ")).expect("no NULs");
        // SAFETY: `c` is a NUL-terminated CString alive across the call; pstrdup copies it into the
        // current memory context, so the result does not depend on `c`, dropped after it.
        unsafe { pgrx::pg_sys::pstrdup(c.as_ptr()) }
    };
    let message = to_palloc(message);
    let hint = hint.map(to_palloc);
    // SAFETY: the errstart, errcode, errmsg_internal, errhint, errfinish sequence that ereport
    // expands to, on this process's only thread. The message and hint are live palloc'd
    // NUL-terminated strings, passed as "%s" arguments so a '%' in them is not a format directive.
    // errfinish at ERROR does not return: it longjmps to PostgreSQL's innermost error handler,
    // skipping this frame and its callers' frames without running destructors; this frame owns nothing
    // that needs one by then (the Strings and CStrings were consumed above), and the callers'
    // side is the condition stated in this function's documentation.
    unsafe {
        if raw::errstart(pgrx::PgLogLevel::ERROR as i32, std::ptr::null()) {
            raw::errcode(sqlerrcode);
            raw::errmsg_internal(c"%s".as_ptr(), message);
            if let Some(h) = hint {
                raw::errhint(c"%s".as_ptr(), h);
            }
            raw::errfinish(c"dpnoise".as_ptr(), 0, c"raise_sqlstate".as_ptr());
        }
    }
    unreachable!("ereport(ERROR) returned");
}
