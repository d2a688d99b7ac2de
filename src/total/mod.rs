//! Total forms of PostgreSQL's built-in functions: the same function, with
//! NULL (or IEEE's ±Infinity, or 0 on underflow) where PostgreSQL raises an
//! error. They are what the analyst gate writes into an analyst's
//! statement instead of the built-ins (`gate::substitute`): an error that
//! one protected value could trigger would tell the analyst that value.
//!
//! Every function here returns for every input (it is declared LEAKPROOF
//! in total.sql): integer and float operations compute in registers,
//! without allocating; the others check what would make the built-in fail
//! (a zero divisor, a unit it does not know, a date at the end of the
//! calendar, a string too long to convert) and only then call it with the
//! same arguments. The list and what each returns instead of an error is
//! in docs/analysts.md.
//!
//! By kind: `numbers` (int4, int8, float4, float8 and numeric: arithmetic,
//! casts, rounding, width_bucket), `text` (case, LIKE and ILIKE, substr),
//! `dates` (date_trunc, date_part and extract, casts, make_date,
//! to_char) and `formats` (to_char of numbers).

use crate::fmgr::arg_datum;
use pgrx::pg_sys;

mod dates;
pub use dates::{date_time_comparison, load_zone, restrict_zones};
mod formats;
mod intervals;
mod numbers;
mod text;

pub(crate) use text::CAPPED_BYTES;

pgrx::extension_sql_file!("total.sql", name = "total_sql");

#[inline]
pub(super) fn i32_datum(x: i32) -> pg_sys::Datum {
    pg_sys::Datum::from(x as i64 as usize)
}

#[inline]
pub(super) fn f32_datum(x: f32) -> pg_sys::Datum {
    pg_sys::Datum::from(x.to_bits() as usize)
}

/// # Safety
/// Argument `i` of a live call, declared int2, int4 or int8, not NULL.
#[inline]
pub(super) unsafe fn int(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> i64 {
    // SAFETY: the caller's contract; the datum holds the integer sign-extended (int2, int4) or whole (int8).
    unsafe { arg_datum(fcinfo, i).value() as i64 }
}

/// # Safety
/// Argument `i` of a live call, declared float8, not NULL.
#[inline]
pub(super) unsafe fn float8(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> f64 {
    // SAFETY: the caller's contract.
    f64::from_bits(unsafe { arg_datum(fcinfo, i) }.value() as u64)
}

/// # Safety
/// Argument `i` of a live call, declared float4, not NULL.
#[inline]
pub(super) unsafe fn float4(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> f32 {
    // SAFETY: the caller's contract.
    f32::from_bits(unsafe { arg_datum(fcinfo, i) }.value() as u32)
}

/// The length in bytes of a text argument, read from its (possibly
/// toasted) header without detoasting it.
///
/// # Safety
/// Argument `i` of a live call, declared text, not NULL.
pub(super) unsafe fn text_bytes(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> usize {
    // SAFETY: the caller's contract; the raw size counts the 4-byte header.
    unsafe { pg_sys::toast_raw_datum_size(arg_datum(fcinfo, i)).saturating_sub(pg_sys::VARHDRSZ) }
}

/// The bytes of a text argument, detoasted.
///
/// # Safety
/// Argument `i` of a live call, declared text, not NULL; the bytes live as
/// long as the call.
pub(super) unsafe fn text_arg<'a>(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> &'a [u8] {
    // SAFETY: the caller's contract; a detoasted varlena holds its length in its header.
    unsafe {
        let text = pg_sys::pg_detoast_datum_packed(arg_datum(fcinfo, i).cast_mut_ptr());
        std::slice::from_raw_parts(
            pgrx::vardata_any(text.cast()).cast::<u8>(),
            pgrx::varsize_any_exhdr(text.cast()),
        )
    }
}
