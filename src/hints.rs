//! Hints for calls of dpnoise's functions that PostgreSQL cannot resolve:
//! `dp_sum(amount, 1.0)` (a missing bound) fails in the parser with
//! "function dp_sum(double precision, numeric) does not exist" (42883) and
//! PostgreSQL's hint about casts, which does not say what dp_sum takes. An
//! `emit_log_hook` gives such an error, when it names one of the functions
//! below and has no hint of dpnoise's, the function's forms and an example.
//! It only rewrites the hint of an error already raised: the SQLSTATE, the
//! message and whether anything ran or was charged are PostgreSQL's.

use pgrx::pg_sys;

/// Each function's forms and an example, as the README's reference gives them.
const SIGNATURES: [(&str, &str); 12] = [
    (
        "dp_count",
        "dp_count(epsilon), dp_count(value, epsilon), dp_count(epsilon, mechanism) or dp_count(epsilon, delta, mechanism); for example dp_count(1.0)",
    ),
    (
        "dp_sum",
        "dp_sum(value, epsilon, lower, upper [, delta [, mechanism [, loss]]]); for example dp_sum(amount, 1.0, 0, 100)",
    ),
    (
        "dp_avg",
        "dp_avg(value, epsilon, lower, upper); for example dp_avg(amount, 1.0, 0, 100)",
    ),
    (
        "dp_sum_laplace",
        "dp_sum_laplace(value, epsilon, lower, upper); for example dp_sum_laplace(amount, 1.0, 0, 100)",
    ),
    (
        "dp_sum_staircase",
        "dp_sum_staircase(value, epsilon, sensitivity [, loss]); for example dp_sum_staircase(amount, 1.0, 100)",
    ),
    (
        "dp_var",
        "dp_var(value, epsilon, lower, upper); for example dp_var(amount, 1.0, 0, 100)",
    ),
    (
        "dp_stddev",
        "dp_stddev(value, epsilon, lower, upper); for example dp_stddev(amount, 1.0, 0, 100)",
    ),
    (
        "dp_quantile",
        "dp_quantile(value, epsilon, lower, upper, p); for example dp_quantile(amount, 1.0, 0, 100, 0.9)",
    ),
    (
        "dp_median",
        "dp_median(value, epsilon, lower, upper); for example dp_median(amount, 1.0, 0, 100)",
    ),
    (
        "dp_min",
        "dp_min(value, epsilon, lower, upper) (a private low percentile); for example dp_min(amount, 1.0, 0, 100)",
    ),
    (
        "dp_max",
        "dp_max(value, epsilon, lower, upper) (a private high percentile); for example dp_max(amount, 1.0, 0, 100)",
    ),
    (
        "dp_query_accuracy",
        "dp_query_accuracy(aggregate, epsilon, tables [, lower, upper, grouped, confidence, delta, mechanism]); for example dp_query_accuracy('sum', 1.0, '{visits}', 0, 100)",
    ),
];

/// The hint for an unresolved call whose message is `message`, if it
/// names one of dpnoise's functions.
fn hint_for(message: &str) -> Option<String> {
    let rest = message.strip_prefix("function ")?;
    let name = rest
        .split('(')
        .next()?
        .rsplit('.')
        .next()?
        .trim_matches('"');
    SIGNATURES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, forms)| format!("{name} takes {forms}."))
}

static mut PREV_EMIT_LOG: pg_sys::emit_log_hook_type = None;

/// Installs the hook, chaining whatever was there.
pub fn init() {
    // SAFETY: runs once, from _PG_init, on the process's only thread; the previous hook is kept
    // by value and called first by ours, whose signature is the hook type's.
    unsafe {
        PREV_EMIT_LOG = pg_sys::emit_log_hook;
        pg_sys::emit_log_hook = Some(emit_log);
    }
}

/// # Safety
/// Called by PostgreSQL as emit_log_hook, in ErrorContext, with `edata` the
/// live error being reported (which the hook may change before it is sent).
unsafe extern "C-unwind" fn emit_log(edata: *mut pg_sys::ErrorData) {
    // SAFETY: the caller's contract; PREV_EMIT_LOG is written once, in init. The message is a
    // NUL-terminated string or null; pstrdup copies the hint into the current (error) context.
    // Nothing here raises, and the one call that could panic is caught.
    unsafe {
        if let Some(prev) = PREV_EMIT_LOG {
            prev(edata);
        }
        if edata.is_null()
            || (*edata).elevel < pgrx::PgLogLevel::ERROR as i32
            || (*edata).sqlerrcode != pgrx::PgSqlErrorCode::ERRCODE_UNDEFINED_FUNCTION as i32
            || (*edata).message.is_null()
        {
            return;
        }
        let Ok(message) = std::ffi::CStr::from_ptr((*edata).message).to_str() else {
            return;
        };
        // A panic must not unwind into error reporting: no hint then.
        let Ok(Some(hint)) = std::panic::catch_unwind(|| hint_for(message)) else {
            return;
        };
        let Ok(hint) = std::ffi::CString::new(hint) else {
            return;
        };
        (*edata).hint = pg_sys::pstrdup(hint.as_ptr());
    }
}

#[cfg(test)]
mod tests {
    use super::hint_for;

    #[test]
    fn names_dpnoise_functions_only() {
        let hint = hint_for("function dp_sum(double precision, numeric) does not exist").unwrap();
        assert!(hint.starts_with("dp_sum takes dp_sum(value, epsilon, lower, upper"));
        assert!(hint_for("function public.dp_count(unknown, unknown) does not exist").is_some());
        assert!(hint_for("function lower(integer) does not exist").is_none());
        assert!(hint_for("function dp_summary(integer) does not exist").is_none());
    }
}
