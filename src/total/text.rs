//! Total forms of lower and upper, LIKE and ILIKE, and substr.

use super::{int, text_arg, text_bytes};
use crate::fmgr::{return_null, v1_function};
use pgrx::pg_sys;

/// Longest text (in bytes) the case and ILIKE functions convert: PostgreSQL
/// converts into buffers of 4 bytes per input byte (wide characters), and
/// a request over 1 GB fails. Longer values give NULL.
const CASE_BYTES: usize = 64 << 20;

/// Whether the call's collation lets PostgreSQL's text functions run: one
/// is known, and it is deterministic (LIKE refuses others when called).
///
/// # Safety
/// A live call, inside a transaction.
unsafe fn collation_usable(fcinfo: pg_sys::FunctionCallInfo) -> bool {
    // SAFETY: the caller's contract; a syscache lookup by OID.
    unsafe {
        let collation = (*fcinfo).fncollation;
        collation != pg_sys::InvalidOid
            && (collation == pg_sys::C_COLLATION_OID
                || collation == crate::versions::POSIX_COLLATION_OID
                || pg_sys::get_collation_isdeterministic(collation))
    }
}

macro_rules! case_function {
    ($finfo:ident, $name:ident, $builtin:ident) => {
        v1_function!($finfo, $name, |fcinfo| {
            // SAFETY: STRICT, one text argument; the built-in is called with it once it is
            // short enough and the collation known.
            unsafe {
                if text_bytes(fcinfo, 0) > CASE_BYTES || !collation_usable(fcinfo) {
                    return return_null(fcinfo);
                }
                pg_sys::$builtin(fcinfo)
            }
        });
    };
}

case_function!(pg_finfo_dp_total_lower, dp_total_lower, lower);
case_function!(pg_finfo_dp_total_upper, dp_total_upper, upper);

/// Whether a LIKE pattern is one PostgreSQL can match: it must not end
/// with an escape character (`\`) that escapes nothing. PostgreSQL finds
/// that only when matching reaches the pattern's end, which depends on the
/// text matched.
///
/// # Safety
/// Argument `i` of a live call, declared text, not NULL.
unsafe fn like_pattern_valid(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> bool {
    // SAFETY: the caller's contract; the pattern is read as bytes (in every server encoding `\`
    // is the byte 0x5C and never a trailing byte of a character).
    let bytes = unsafe { text_arg(fcinfo, i) };
    let mut escaped = false;
    for &b in bytes {
        escaped = !escaped && b == b'\\';
    }
    !escaped
}

macro_rules! like_function {
    ($finfo:ident, $name:ident, $builtin:ident, $case:expr) => {
        v1_function!($finfo, $name, |fcinfo| {
            // SAFETY: STRICT, two text arguments; the built-in is called with them once the
            // pattern is valid, the collation usable and (for ILIKE) both short enough.
            unsafe {
                if !like_pattern_valid(fcinfo, 1)
                    || !collation_usable(fcinfo)
                    || ($case
                        && (text_bytes(fcinfo, 0) > CASE_BYTES
                            || text_bytes(fcinfo, 1) > CASE_BYTES))
                {
                    return return_null(fcinfo);
                }
                pg_sys::$builtin(fcinfo)
            }
        });
    };
}

like_function!(
    pg_finfo_dp_total_textlike,
    dp_total_textlike,
    textlike,
    false
);
like_function!(
    pg_finfo_dp_total_textnlike,
    dp_total_textnlike,
    textnlike,
    false
);
like_function!(
    pg_finfo_dp_total_texticlike,
    dp_total_texticlike,
    texticlike,
    true
);
like_function!(
    pg_finfo_dp_total_texticnlike,
    dp_total_texticnlike,
    texticnlike,
    true
);

// substr(text, start, length): NULL for a negative length (PostgreSQL raises).
v1_function!(
    pg_finfo_dp_total_text_substr,
    dp_total_text_substr,
    |fcinfo| {
        // SAFETY: STRICT, declared (text, int4, int4); the built-in is called with the same arguments.
        unsafe {
            if int(fcinfo, 2) < 0 {
                return return_null(fcinfo);
            }
            pg_sys::text_substr(fcinfo)
        }
    }
);

/// The longest value of a protected column a function is given in an
/// analyst's statement (`dp_total_capped`): the work of a text function
/// grows with its input, and a statement may call it hundreds of times
/// behind a condition on one person (an attack ran lower() and LIKE 490
/// times on a person's 40 000-character text: 106 ms against 6 ms).
pub(crate) const CAPPED_BYTES: usize = 1024;

// A protected column's value as it is, or NULL when it holds more than
// `CAPPED_BYTES` bytes (read from its header, without detoasting). The gate
// passes protected text (and other variable-length) columns through it
// where a function reads them (`gate::substitute`), and the plan check
// weighs each call by the capped length.
v1_function!(pg_finfo_dp_total_capped, dp_total_capped, |fcinfo| {
    // SAFETY: STRICT; the argument's type is read once per call site from the call's expression
    // and kept in fn_extra (a bool in fn_mcxt, which lives as long as the FmgrInfo); only a
    // variable-length value's size is read (from its header); the value is returned as it came.
    unsafe {
        let flinfo = (*fcinfo).flinfo;
        if (*flinfo).fn_extra.is_null() {
            let typ = pg_sys::get_fn_expr_argtype(flinfo, 0);
            let varlena = pg_sys::MemoryContextAlloc((*flinfo).fn_mcxt, 1) as *mut bool;
            *varlena = typ != pg_sys::InvalidOid && pg_sys::get_typlen(typ) == -1;
            (*flinfo).fn_extra = varlena.cast();
        }
        if *((*flinfo).fn_extra as *const bool) && text_bytes(fcinfo, 0) > CAPPED_BYTES {
            return return_null(fcinfo);
        }
        crate::fmgr::arg_datum(fcinfo, 0)
    }
});
