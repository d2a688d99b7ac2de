//! One value per equality class: whether a type's equal values are the
//! same bytes (`form`), and the normalising functions for the types whose
//! are not but that dpnoise can map onto one member of each class.
//!
//! The test is the type's own declaration, not a list: PostgreSQL records
//! whether equality under a type's default btree operator class implies
//! equal bytes as the class's `equalimage` support function (B-tree
//! deduplication relies on it: `btequalimage` for integers, dates,
//! timestamps; `btvarstrequalimage`, true under a deterministic collation,
//! for text). A type without one (arrays, records, jsonb, timetz, a type of
//! an extension) is refused as a group key unless normalised here.

use crate::fmgr::{arg_datum, f64_datum, v1_function};
use pgrx::pg_sys;

/// How a group key of some type is shown as a function of its equality class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// Equal values are the same bytes: shown as they are.
    Image,
    /// Shown through dpnoise's function of this name (in canonical.sql).
    Normalised(&'static str),
    /// Equal values can differ in bytes and dpnoise has no normal form.
    Refused,
}

/// The form of a value of `type_` compared under `collation`.
///
/// # Safety
/// Inside a transaction (syscache lookups; the type's equalimage function is called).
pub unsafe fn form(type_: pg_sys::Oid, collation: pg_sys::Oid) -> Form {
    use pg_sys::*;
    // SAFETY: the caller's contract.
    unsafe {
        let normalised = match type_ {
            FLOAT8OID => Some("dp_total_canonical_float8"),
            FLOAT4OID => Some("dp_total_canonical_float4"),
            NUMERICOID => Some("dp_total_canonical_numeric"),
            INTERVALOID => Some("dp_total_canonical_interval"),
            // Equal when they differ only in trailing blanks, though its
            // operator class declares btvarstrequalimage.
            BPCHAROID => deterministic(collation).then_some("dp_total_canonical_bpchar"),
            _ => None,
        };
        if let Some(name) = normalised {
            return Form::Normalised(name);
        }
        // A domain over a normalised type would lose its type (and its
        // constraints could refuse the normal form): only over an image type.
        let base = getBaseType(type_);
        if base != type_ && matches!(form(base, collation), Form::Normalised(_)) {
            return Form::Refused;
        }
        if equal_image(base, collation) {
            Form::Image
        } else {
            Form::Refused
        }
    }
}

/// Whether `collation` compares strings by their bytes when they are equal
/// (none, or a deterministic one).
///
/// # Safety
/// Inside a transaction.
unsafe fn deterministic(collation: pg_sys::Oid) -> bool {
    // SAFETY: a syscache lookup by OID (the caller's contract).
    collation == pg_sys::InvalidOid || unsafe { pg_sys::get_collation_isdeterministic(collation) }
}

/// Whether equal values of `type_` under `collation` are the same bytes,
/// as its default btree operator class declares (its equalimage support
/// function, called with the collation; absent means no).
///
/// # Safety
/// Inside a transaction.
pub unsafe fn equal_image(type_: pg_sys::Oid, collation: pg_sys::Oid) -> bool {
    // SAFETY: the caller's contract; catalog lookups by OID; the support function takes the
    // operator class's input type as an OID datum and returns a bool.
    unsafe {
        let opclass = pg_sys::GetDefaultOpClass(type_, pg_sys::BTREE_AM_OID);
        if opclass == pg_sys::InvalidOid {
            return false;
        }
        let family = pg_sys::get_opclass_family(opclass);
        let input = pg_sys::get_opclass_input_type(opclass);
        let proc_ = pg_sys::get_opfamily_proc(family, input, input, BTEQUALIMAGE_PROC);
        if proc_ == pg_sys::InvalidOid {
            return false;
        }
        // A collatable type compared under no collation cannot say (btvarstrequalimage raises).
        if pg_sys::type_is_collatable(type_) && collation == pg_sys::InvalidOid {
            return false;
        }
        pg_sys::OidFunctionCall1Coll(proc_, collation, pg_sys::Datum::from(input)).value() != 0
    }
}

/// The member of a float's class shown: 0 for ±0, one NaN for every NaN.
fn float8_class(x: f64) -> f64 {
    if x == 0.0 {
        0.0
    } else if x.is_nan() {
        f64::NAN
    } else {
        x
    }
}

fn float4_class(x: f32) -> f32 {
    if x == 0.0 {
        0.0
    } else if x.is_nan() {
        f32::NAN
    } else {
        x
    }
}

/// The btree support function number of equalimage (access/nbtree.h).
const BTEQUALIMAGE_PROC: i16 = 4;

const USECS_PER_DAY: i128 = 86_400_000_000;

/// The member of an interval's class shown: PostgreSQL compares intervals
/// by their span with a month of 30 days and a day of 24 hours; the span is
/// written back as whole months, then days, then time, all of one sign, so
/// every interval of that span gives the same three fields. None when the
/// months do not fit (the class then shows as NULL, still one value).
/// The infinities of PostgreSQL 17 and later (every field at its end) are
/// the only members of their classes and stay as they are.
fn interval_class(months: i32, days: i32, time: i64) -> Option<(i32, i32, i64)> {
    let infinite = (months, days, time) == (i32::MAX, i32::MAX, i64::MAX)
        || (months, days, time) == (i32::MIN, i32::MIN, i64::MIN);
    if infinite {
        return Some((months, days, time));
    }
    let span = i128::from(months) * 30 * USECS_PER_DAY
        + i128::from(days) * USECS_PER_DAY
        + i128::from(time);
    let month_span = 30 * USECS_PER_DAY;
    let m = i32::try_from(span / month_span).ok()?;
    let rest = span % month_span;
    let d = (rest / USECS_PER_DAY) as i32;
    let t = (rest % USECS_PER_DAY) as i64;
    Some((m, d, t))
}

/// The normal form of a non-null `value` of `type_` (the value itself for a
/// type without one); None where the normal form is NULL.
///
/// # Safety
/// `value` is a live non-null datum of `type_`; the result lives in the current memory context.
pub unsafe fn normal_datum(type_: pg_sys::Oid, value: pg_sys::Datum) -> Option<pg_sys::Datum> {
    use pg_sys::*;
    // SAFETY: the caller's contract; by-reference values are read within their type's length.
    unsafe {
        Some(match type_ {
            FLOAT8OID => f64_datum(float8_class(f64::from_bits(value.value() as u64))),
            FLOAT4OID => {
                Datum::from(float4_class(f32::from_bits(value.value() as u32)).to_bits() as usize)
            }
            NUMERICOID => trim_scale(value),
            INTERVALOID => interval_datum(value.cast_mut_ptr())?,
            BPCHAROID => trim_blanks(value),
            _ => value,
        })
    }
}

/// # Safety
/// `value` is a live non-null numeric datum.
unsafe fn trim_scale(value: pg_sys::Datum) -> pg_sys::Datum {
    // SAFETY: the caller's contract; trim_scale takes a numeric and cannot fail.
    unsafe {
        pg_sys::OidFunctionCall1Coll(
            pg_sys::Oid::from(pg_sys::F_TRIM_SCALE),
            pg_sys::InvalidOid,
            value,
        )
    }
}

/// # Safety
/// `given` points to a live Interval; the result is palloc'd in the current memory context.
unsafe fn interval_datum(given: *mut pg_sys::Interval) -> Option<pg_sys::Datum> {
    // SAFETY: the caller's contract.
    unsafe {
        let (month, day, time) = interval_class((*given).month, (*given).day, (*given).time)?;
        let result =
            pg_sys::palloc(std::mem::size_of::<pg_sys::Interval>()) as *mut pg_sys::Interval;
        (*result).month = month;
        (*result).day = day;
        (*result).time = time;
        Some(pg_sys::Datum::from(result))
    }
}

/// # Safety
/// `value` is a live non-null bpchar datum; the result is palloc'd in the current memory context.
unsafe fn trim_blanks(value: pg_sys::Datum) -> pg_sys::Datum {
    // SAFETY: the caller's contract; a detoasted varlena is read within its length; the result
    // is a new varlena of the same representation.
    unsafe {
        let v = pg_sys::pg_detoast_datum_packed(value.cast_mut_ptr());
        let bytes = std::slice::from_raw_parts(
            pgrx::varlena::vardata_any(v) as *const u8,
            pgrx::varlena::varsize_any_exhdr(v),
        );
        let end = bytes.iter().rposition(|&b| b != b' ').map_or(0, |p| p + 1);
        if end == bytes.len() {
            return pg_sys::Datum::from(v);
        }
        pg_sys::Datum::from(pg_sys::cstring_to_text_with_len(
            bytes.as_ptr().cast(),
            end as i32,
        ))
    }
}

v1_function!(
    pg_finfo_dp_total_canonical_float8,
    dp_total_canonical_float8,
    |fcinfo| {
        // SAFETY: STRICT, one float8 argument (by value).
        f64_datum(float8_class(f64::from_bits(
            unsafe { arg_datum(fcinfo, 0) }.value() as u64,
        )))
    }
);

v1_function!(
    pg_finfo_dp_total_canonical_float4,
    dp_total_canonical_float4,
    |fcinfo| {
        // SAFETY: STRICT, one float4 argument (by value, in the datum's low 32 bits).
        let x = f32::from_bits(unsafe { arg_datum(fcinfo, 0) }.value() as u32);
        pg_sys::Datum::from(float4_class(x).to_bits() as usize)
    }
);

// numeric: the value without trailing fractional zeros (trim_scale), which
// equal numerics share; NaN and the infinities are one value each.
v1_function!(
    pg_finfo_dp_total_canonical_numeric,
    dp_total_canonical_numeric,
    |fcinfo| {
        // SAFETY: STRICT, one numeric argument.
        unsafe { trim_scale(arg_datum(fcinfo, 0)) }
    }
);

v1_function!(
    pg_finfo_dp_total_canonical_interval,
    dp_total_canonical_interval,
    |fcinfo| {
        // SAFETY: STRICT, one interval argument, a pointer to an Interval.
        unsafe {
            match interval_datum(arg_datum(fcinfo, 0).cast_mut_ptr()) {
                Some(d) => d,
                None => crate::fmgr::return_null(fcinfo),
            }
        }
    }
);

// char(n): the value without trailing blanks, which its equality ignores.
v1_function!(
    pg_finfo_dp_total_canonical_bpchar,
    dp_total_canonical_bpchar,
    |fcinfo| {
        // SAFETY: STRICT, one bpchar argument.
        unsafe { trim_blanks(arg_datum(fcinfo, 0)) }
    }
);

#[cfg(test)]
mod tests {
    use super::{float8_class, interval_class, USECS_PER_DAY};

    #[test]
    fn equal_intervals_share_one_form() {
        let day = USECS_PER_DAY as i64;
        // '1 day' = '24:00:00'; '1 mon' = '30 days'; '1 mon -1 day' = '29 days'.
        assert_eq!(interval_class(0, 1, 0), interval_class(0, 0, day));
        assert_eq!(interval_class(1, 0, 0), interval_class(0, 30, 0));
        assert_eq!(interval_class(1, -1, 0), interval_class(0, 29, 0));
        assert_eq!(interval_class(0, -1, day + 5), interval_class(0, 0, 5));
        assert_eq!(interval_class(-1, 0, 0), Some((-1, 0, 0)));
        assert_eq!(interval_class(0, -31, -day / 2), Some((-1, -1, -day / 2)));
        assert_eq!(
            interval_class(i32::MAX, i32::MAX, i64::MAX),
            Some((i32::MAX, i32::MAX, i64::MAX))
        );
        assert_eq!(interval_class(i32::MAX, 30, 0), None);
    }

    #[test]
    fn signed_zeros_and_nans_share_one_form() {
        assert_eq!(float8_class(-0.0).to_bits(), float8_class(0.0).to_bits());
        assert_eq!(
            float8_class(-f64::NAN).to_bits(),
            float8_class(f64::NAN).to_bits()
        );
        assert_eq!(float8_class(-2.5), -2.5);
    }
}
