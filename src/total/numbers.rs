//! Total forms of integer, float and numeric arithmetic, casts, rounding
//! and width_bucket.

use super::{f32_datum, float4, float8, i32_datum, int};
use crate::fmgr::{arg_datum, f64_datum, i64_datum, return_null, v1_function};
use pgrx::pg_sys;

/// int4 and int8 arithmetic: NULL where PostgreSQL reports "integer out of
/// range" or "division by zero". The operands are read as int8 (int4
/// values sign-extended) and the result checked against the result type.
macro_rules! integer_operator {
    ($finfo:ident, $name:ident, $bits:ty, $op:ident) => {
        v1_function!($finfo, $name, |fcinfo| {
            // SAFETY: STRICT, declared with two integer arguments whose types fit in $bits.
            let (a, b) = unsafe { (int(fcinfo, 0) as $bits, int(fcinfo, 1) as $bits) };
            match a.$op(b) {
                Some(r) => pg_sys::Datum::from(r as i64 as usize),
                // SAFETY: a live call.
                None => unsafe { return_null(fcinfo) },
            }
        });
    };
}

integer_operator!(pg_finfo_dp_total_int4pl, dp_total_int4pl, i32, checked_add);
integer_operator!(pg_finfo_dp_total_int4mi, dp_total_int4mi, i32, checked_sub);
integer_operator!(
    pg_finfo_dp_total_int4mul,
    dp_total_int4mul,
    i32,
    checked_mul
);
integer_operator!(
    pg_finfo_dp_total_int4div,
    dp_total_int4div,
    i32,
    checked_div
);
// PostgreSQL gives 0 for INT_MIN % -1; checked_rem gives None there.
integer_operator!(pg_finfo_dp_total_int4mod, dp_total_int4mod, i32, total_rem);
integer_operator!(pg_finfo_dp_total_int8pl, dp_total_int8pl, i64, checked_add);
integer_operator!(pg_finfo_dp_total_int8mi, dp_total_int8mi, i64, checked_sub);
integer_operator!(
    pg_finfo_dp_total_int8mul,
    dp_total_int8mul,
    i64,
    checked_mul
);
integer_operator!(
    pg_finfo_dp_total_int8div,
    dp_total_int8div,
    i64,
    checked_div
);
integer_operator!(pg_finfo_dp_total_int8mod, dp_total_int8mod, i64, total_rem);
// int8 with int4 on either side (int48pl, int84pl, ...): the int4 operand
// is read sign-extended, so the int8 functions serve them.

/// The remainder PostgreSQL computes: none for a zero divisor, 0 for any
/// divisor -1 (INT_MIN % -1 would trap in hardware).
trait TotalRem: Sized {
    fn total_rem(self, other: Self) -> Option<Self>;
}
impl TotalRem for i32 {
    fn total_rem(self, other: i32) -> Option<i32> {
        if other == -1 {
            Some(0)
        } else {
            self.checked_rem(other)
        }
    }
}
impl TotalRem for i64 {
    fn total_rem(self, other: i64) -> Option<i64> {
        if other == -1 {
            Some(0)
        } else {
            self.checked_rem(other)
        }
    }
}

macro_rules! integer_unary {
    ($finfo:ident, $name:ident, $bits:ty, $op:ident) => {
        v1_function!($finfo, $name, |fcinfo| {
            // SAFETY: STRICT, declared with one integer argument that fits in $bits.
            let a = unsafe { int(fcinfo, 0) } as $bits;
            match a.$op() {
                Some(r) => pg_sys::Datum::from(r as i64 as usize),
                // SAFETY: a live call.
                None => unsafe { return_null(fcinfo) },
            }
        });
    };
}

integer_unary!(pg_finfo_dp_total_int4um, dp_total_int4um, i32, checked_neg);
integer_unary!(
    pg_finfo_dp_total_int4abs,
    dp_total_int4abs,
    i32,
    checked_abs
);
integer_unary!(pg_finfo_dp_total_int8um, dp_total_int8um, i64, checked_neg);
integer_unary!(
    pg_finfo_dp_total_int8abs,
    dp_total_int8abs,
    i64,
    checked_abs
);

// int8 to int4: NULL out of range.
v1_function!(pg_finfo_dp_total_int4_int8, dp_total_int4_int8, |fcinfo| {
    // SAFETY: STRICT, one int8 argument.
    match i32::try_from(unsafe { int(fcinfo, 0) }) {
        Ok(r) => i32_datum(r),
        // SAFETY: a live call.
        Err(_) => unsafe { return_null(fcinfo) },
    }
});

/// float to integer as PostgreSQL casts (rounded to nearest, ties to even:
/// rint), NULL for NaN and out of range.
fn float_to_int(x: f64, min: f64, max_exclusive: f64) -> Option<i64> {
    let r = x.round_ties_even();
    (r >= min && r < max_exclusive).then_some(r as i64)
}

const I32_RANGE: (f64, f64) = (-2147483648.0, 2147483648.0);
const I64_RANGE: (f64, f64) = (-9223372036854775808.0, 9223372036854775808.0);

macro_rules! float_to_integer {
    ($finfo:ident, $name:ident, $read:ident, $range:expr) => {
        v1_function!($finfo, $name, |fcinfo| {
            // SAFETY: STRICT, one float argument of the type $read reads.
            let x = f64::from(unsafe { $read(fcinfo, 0) });
            match float_to_int(x, $range.0, $range.1) {
                Some(r) => i64_datum(r),
                // SAFETY: a live call.
                None => unsafe { return_null(fcinfo) },
            }
        });
    };
}

float_to_integer!(
    pg_finfo_dp_total_int4_float8,
    dp_total_int4_float8,
    float8,
    I32_RANGE
);
float_to_integer!(
    pg_finfo_dp_total_int8_float8,
    dp_total_int8_float8,
    float8,
    I64_RANGE
);
float_to_integer!(
    pg_finfo_dp_total_int4_float4,
    dp_total_int4_float4,
    float4,
    I32_RANGE
);
float_to_integer!(
    pg_finfo_dp_total_int8_float4,
    dp_total_int8_float4,
    float4,
    I64_RANGE
);

// float8 to float4: ±Infinity on overflow, 0 on underflow (IEEE), where
// PostgreSQL raises.
v1_function!(
    pg_finfo_dp_total_float4_float8,
    dp_total_float4_float8,
    |fcinfo| {
        // SAFETY: STRICT, one float8 argument.
        f32_datum(unsafe { float8(fcinfo, 0) } as f32)
    }
);

/// float arithmetic as IEEE 754 gives it (±Infinity on overflow, 0 on
/// underflow, where PostgreSQL raises), NULL for a zero divisor (NaN / 0
/// is NaN, as in PostgreSQL).
macro_rules! float_operator {
    ($finfo:ident, $name:ident, $read:ident, $datum:ident, |$a:ident, $b:ident| $body:expr) => {
        v1_function!($finfo, $name, |fcinfo| {
            // SAFETY: STRICT, two float arguments of the type $read reads.
            let ($a, $b) = unsafe { ($read(fcinfo, 0), $read(fcinfo, 1)) };
            match $body {
                Some(r) => $datum(r),
                // SAFETY: a live call.
                None => unsafe { return_null(fcinfo) },
            }
        });
    };
}

float_operator!(
    pg_finfo_dp_total_float8pl,
    dp_total_float8pl,
    float8,
    f64_datum,
    |a, b| Some(a + b)
);
float_operator!(
    pg_finfo_dp_total_float8mi,
    dp_total_float8mi,
    float8,
    f64_datum,
    |a, b| Some(a - b)
);
float_operator!(
    pg_finfo_dp_total_float8mul,
    dp_total_float8mul,
    float8,
    f64_datum,
    |a, b| Some(a * b)
);
float_operator!(
    pg_finfo_dp_total_float8div,
    dp_total_float8div,
    float8,
    f64_datum,
    |a, b| (b != 0.0 || a.is_nan()).then(|| a / b)
);
float_operator!(
    pg_finfo_dp_total_float4pl,
    dp_total_float4pl,
    float4,
    f32_datum,
    |a, b| Some(a + b)
);
float_operator!(
    pg_finfo_dp_total_float4mi,
    dp_total_float4mi,
    float4,
    f32_datum,
    |a, b| Some(a - b)
);
float_operator!(
    pg_finfo_dp_total_float4mul,
    dp_total_float4mul,
    float4,
    f32_datum,
    |a, b| Some(a * b)
);
float_operator!(
    pg_finfo_dp_total_float4div,
    dp_total_float4div,
    float4,
    f32_datum,
    |a, b| (b != 0.0 || a.is_nan()).then(|| a / b)
);

/// # Safety
/// Argument `i` of a live call, declared numeric, not NULL.
unsafe fn numeric(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> pg_sys::Numeric {
    // SAFETY: the caller's contract; a numeric datum is a varlena, detoasted here.
    unsafe { pg_sys::pg_detoast_datum(arg_datum(fcinfo, i).cast_mut_ptr()).cast() }
}

/// The most bytes of digits a numeric operand of the total forms may have:
/// 16 base-10000 digits, 64 decimal digits. numeric arithmetic costs the
/// product of its operands' lengths, so a longer operand (built from a
/// protected value by division or a shifted sum) could make one step take
/// milliseconds: an attack multiplied 70 000-digit values behind a
/// condition on one person's value (0.2 s against 6 s). A longer operand
/// gives NULL, like an overflow.
const NUMERIC_DIGIT_BYTES: usize = 32;

/// The most base-10000 digits a numeric operand may span from its first
/// digit to its last decimal place (about 64 decimal digits). Its stored
/// digits alone do not bound the work: 1e131000 stores one digit, but
/// 1e131000 + 1e-16000 stores 36 750 (a second independent attack made
/// one person's row cost 9x its neighbour's with such sums cast to
/// float8, and overflowed a per-person sum with 9e131071).
const NUMERIC_SPAN_WORDS: i64 = 17;

/// A finite numeric's header: whether it is negative, its weight (the
/// power of 10000 of its first digit) and its display scale. None for NaN
/// and the infinities.
///
/// # Safety
/// `n` is a live detoasted numeric.
unsafe fn header(n: pg_sys::Numeric) -> Option<(bool, i64, i64)> {
    // SAFETY: the caller's contract: after the 4-byte varlena header, n_header (u16), then
    // for the long form n_weight (i16).
    unsafe {
        let header = *(n.cast::<u8>().add(4).cast::<u16>());
        match header & 0xC000 {
            0xC000 => None,
            // Short form: sign 0x2000, display scale 0x1F80, weight sign 0x0040, weight 0x003F.
            0x8000 => {
                let magnitude = i64::from(header & 0x3F);
                let weight = if header & 0x40 != 0 {
                    magnitude - 64
                } else {
                    magnitude
                };
                Some((
                    header & 0x2000 != 0,
                    weight,
                    i64::from((header & 0x1F80) >> 7),
                ))
            }
            // Long form: sign 0xC000 (0x4000 negative), display scale 0x3FFF, then the weight.
            sign => Some((
                sign == 0x4000,
                i64::from(*(n.cast::<u8>().add(6).cast::<i16>())),
                i64::from(header & 0x3FFF),
            )),
        }
    }
}

/// Whether `n` has more digits, or spans more, than the total forms
/// compute with (NaN and the infinities do not).
///
/// # Safety
/// `n` is a live detoasted numeric.
unsafe fn too_long(n: pg_sys::Numeric) -> bool {
    // SAFETY: the caller's contract; a varlena's size is in its header. A numeric's header
    // is at most 4 bytes beyond the varlena's own.
    unsafe {
        pgrx::varlena::varsize_any_exhdr(n.cast()) > NUMERIC_DIGIT_BYTES + 4
            || header(n).is_some_and(|(_, weight, dscale)| {
                (weight + 1).max(0) + (dscale + 3) / 4 > NUMERIC_SPAN_WORDS
            })
    }
}

// The value, or NULL where the total forms would not compute with it
// (`too_long`): per-person sums, averages, minima and maxima of numeric
// read their argument through it, so that they cannot overflow the
// numeric format nor compare or add digits without bound.
v1_function!(
    pg_finfo_dp_total_numeric_capped,
    dp_total_numeric_capped,
    |fcinfo| {
        // SAFETY: STRICT, one numeric argument, returned as it came.
        unsafe {
            if too_long(numeric(fcinfo, 0)) {
                return return_null(fcinfo);
            }
            arg_datum(fcinfo, 0)
        }
    }
);

/// numeric arithmetic: NULL where PostgreSQL reports "division by zero" or
/// "value overflows numeric format" (its own `_opt_error` forms), and for
/// an operand too long to compute with in bounded time (`too_long`).
macro_rules! numeric_operator {
    ($finfo:ident, $name:ident, $op:ident) => {
        v1_function!($finfo, $name, |fcinfo| {
            // SAFETY: STRICT, two numeric arguments; the _opt_error form reports instead of raising.
            unsafe {
                let (a, b) = (numeric(fcinfo, 0), numeric(fcinfo, 1));
                if too_long(a) || too_long(b) {
                    return return_null(fcinfo);
                }
                let mut failed = false;
                let r = pg_sys::$op(a, b, &mut failed);
                if failed || r.is_null() {
                    return_null(fcinfo)
                } else {
                    pg_sys::Datum::from(r)
                }
            }
        });
    };
}

numeric_operator!(
    pg_finfo_dp_total_numeric_add,
    dp_total_numeric_add,
    numeric_add_opt_error
);
numeric_operator!(
    pg_finfo_dp_total_numeric_sub,
    dp_total_numeric_sub,
    numeric_sub_opt_error
);
numeric_operator!(
    pg_finfo_dp_total_numeric_mul,
    dp_total_numeric_mul,
    numeric_mul_opt_error
);
numeric_operator!(
    pg_finfo_dp_total_numeric_div,
    dp_total_numeric_div,
    numeric_div_opt_error
);
numeric_operator!(
    pg_finfo_dp_total_numeric_mod,
    dp_total_numeric_mod,
    numeric_mod_opt_error
);

/// Calls a built-in that cannot fail on these (non-NULL) arguments and
/// returns a value.
///
/// # Safety
/// `args` are what `f` is declared to take.
unsafe fn call(
    f: unsafe fn(pg_sys::FunctionCallInfo) -> pg_sys::Datum,
    args: &[pg_sys::Datum],
) -> pg_sys::Datum {
    let args: Vec<Option<pg_sys::Datum>> = args.iter().map(|a| Some(*a)).collect();
    // SAFETY: the caller's contract.
    unsafe { pgrx::direct_function_call_as_datum(f, &args) }.unwrap_or(pg_sys::Datum::from(0usize))
}

/// Whether a numeric is NaN or ±Infinity.
///
/// # Safety
/// `n` is a live detoasted numeric.
unsafe fn special(n: pg_sys::Numeric) -> bool {
    // SAFETY: the caller's contract.
    unsafe { pg_sys::numeric_is_nan(n) || pg_sys::numeric_is_inf(n) }
}

/// Whether rounding `n` to an integer (or any scale) cannot overflow the
/// numeric format: its weight (base-10000 digits before the point, less
/// one) is below the format's largest, so one more digit still fits.
/// Reads the header as numeric.c lays it out: a short header (first
/// 16 bits 10xxxxxx xxxxxxxx) holds a weight of at most 63.
///
/// # Safety
/// `n` is a live detoasted numeric, not NaN or infinite.
unsafe fn roundable(n: pg_sys::Numeric) -> bool {
    // SAFETY: the caller's contract: after the 4-byte varlena header, n_header (u16),
    // then for the long form n_weight (i16).
    unsafe {
        let header = *(n.cast::<u8>().add(4).cast::<u16>());
        if header & 0xC000 == 0x8000 {
            return true;
        }
        let weight = *(n.cast::<u8>().add(6).cast::<i16>());
        weight < i16::MAX - 1
    }
}

// numeric to int4: NULL for NaN, ±Infinity and out of range.
v1_function!(
    pg_finfo_dp_total_int4_numeric,
    dp_total_int4_numeric,
    |fcinfo| {
        // SAFETY: STRICT, one numeric argument; the _opt_error form reports instead of raising.
        unsafe {
            let n = numeric(fcinfo, 0);
            if too_long(n) {
                return return_null(fcinfo);
            }
            let mut failed = false;
            let r = pg_sys::numeric_int4_opt_error(n, &mut failed);
            if failed {
                return_null(fcinfo)
            } else {
                i32_datum(r)
            }
        }
    }
);

// numeric to int8: NULL for NaN, ±Infinity and out of range. Rounded
// first (as PostgreSQL's cast rounds), then compared with the range.
v1_function!(
    pg_finfo_dp_total_int8_numeric,
    dp_total_int8_numeric,
    |fcinfo| {
        // SAFETY: STRICT, one numeric argument; PostgreSQL's functions are called on it only once
        // it is finite and, rounded, inside int8's range, where they cannot fail.
        unsafe {
            let n = numeric(fcinfo, 0);
            if special(n) || !roundable(n) || too_long(n) {
                return return_null(fcinfo);
            }
            let rounded = call(
                pg_sys::numeric_round,
                &[pg_sys::Datum::from(n), i32_datum(0)],
            );
            let approx =
                f64::from_bits(call(pg_sys::numeric_float8_no_overflow, &[rounded]).value() as u64);
            // Exact integers of int8 print as at most 19 digits; near the ends the float is
            // inexact, so the exact comparison decides there.
            if approx.abs() >= 9.3e18 {
                return return_null(fcinfo);
            }
            if approx.abs() >= 9.2e18 {
                let cmp = |bound: i64| {
                    let b = call(pg_sys::int8_numeric, &[i64_datum(bound)]);
                    call(pg_sys::numeric_cmp, &[rounded, b]).value() as i32
                };
                if cmp(i64::MIN) < 0 || cmp(i64::MAX) > 0 {
                    return return_null(fcinfo);
                }
            }
            call(pg_sys::numeric_int8, &[rounded])
        }
    }
);

/// The most decimal places a numeric cast to float8 is converted with.
const FLOAT8_SCALE: i64 = 400;

// numeric to float8: ±Infinity beyond float8's range (PostgreSQL raises);
// NaN and the infinities carry over. PostgreSQL converts through text,
// every digit of the span, so the span is bounded first: from 10^312 on
// the answer is ±Infinity without converting, and a value with more than
// `FLOAT8_SCALE` decimal places (or too many digits) gives NULL. Below
// both, at most about 700 digits are converted (3e307 and 1e-300 as
// written bounds keep their value).
v1_function!(
    pg_finfo_dp_total_float8_numeric,
    dp_total_float8_numeric,
    |fcinfo| {
        // SAFETY: STRICT, one numeric argument; numeric_float8_no_overflow does not raise.
        unsafe {
            let n = numeric(fcinfo, 0);
            match header(n) {
                Some((negative, weight, _)) if weight >= 78 => {
                    return f64_datum(if negative {
                        f64::NEG_INFINITY
                    } else {
                        f64::INFINITY
                    });
                }
                Some((_, _, dscale))
                    if dscale > FLOAT8_SCALE
                        || pgrx::varlena::varsize_any_exhdr(n.cast()) > 4 + 2 * 200 =>
                {
                    return return_null(fcinfo);
                }
                _ => {}
            }
            pg_sys::numeric_float8_no_overflow(fcinfo)
        }
    }
);

/// round, floor, ceil of numeric: NULL for a value at the very top of the
/// numeric format, where rounding up would overflow it.
macro_rules! numeric_rounding {
    ($finfo:ident, $name:ident, $builtin:ident) => {
        v1_function!($finfo, $name, |fcinfo| {
            // SAFETY: STRICT, a numeric first argument (and an int4 scale for round(numeric, int));
            // the built-in is called with the same arguments once it cannot overflow.
            unsafe {
                let n = numeric(fcinfo, 0);
                if !special(n) && !roundable(n)
                    || too_long(n)
                    || (*fcinfo).nargs > 1 && arg_datum(fcinfo, 1).value() as i32 > 64
                {
                    return return_null(fcinfo);
                }
                pg_sys::$builtin(fcinfo)
            }
        });
    };
}

numeric_rounding!(
    pg_finfo_dp_total_numeric_round,
    dp_total_numeric_round,
    numeric_round
);
numeric_rounding!(
    pg_finfo_dp_total_numeric_floor,
    dp_total_numeric_floor,
    numeric_floor
);
numeric_rounding!(
    pg_finfo_dp_total_numeric_ceil,
    dp_total_numeric_ceil,
    numeric_ceil
);

// round(numeric) is round(numeric, 0).
v1_function!(
    pg_finfo_dp_total_numeric_round0,
    dp_total_numeric_round0,
    |fcinfo| {
        // SAFETY: STRICT, one numeric argument.
        unsafe {
            let n = numeric(fcinfo, 0);
            if !special(n) && !roundable(n) {
                return return_null(fcinfo);
            }
            call(
                pg_sys::numeric_round,
                &[pg_sys::Datum::from(n), i32_datum(0)],
            )
        }
    }
);

// width_bucket(float8, float8, float8, int4): NULL where PostgreSQL raises
// (a count below 1 or of INT_MAX, NaN anywhere, an infinite or equal bound).
v1_function!(
    pg_finfo_dp_total_width_bucket_float8,
    dp_total_width_bucket_float8,
    |fcinfo| {
        // SAFETY: STRICT, declared (float8, float8, float8, int4); the built-in is called with the
        // same arguments once none of its errors can happen.
        unsafe {
            let (x, lo, hi, count) = (
                float8(fcinfo, 0),
                float8(fcinfo, 1),
                float8(fcinfo, 2),
                int(fcinfo, 3),
            );
            if count <= 0
                || count >= i64::from(i32::MAX)
                || x.is_nan()
                || !lo.is_finite()
                || !hi.is_finite()
                || lo == hi
            {
                return return_null(fcinfo);
            }
            pg_sys::width_bucket_float8(fcinfo)
        }
    }
);

// width_bucket(numeric, numeric, numeric, int4): as above.
v1_function!(
    pg_finfo_dp_total_width_bucket_numeric,
    dp_total_width_bucket_numeric,
    |fcinfo| {
        // SAFETY: as dp_total_width_bucket_float8, with numeric arguments.
        unsafe {
            let (x, lo, hi, count) = (
                numeric(fcinfo, 0),
                numeric(fcinfo, 1),
                numeric(fcinfo, 2),
                int(fcinfo, 3),
            );
            if count <= 0
                || count >= i64::from(i32::MAX)
                || pg_sys::numeric_is_nan(x)
                || special(lo)
                || special(hi)
                || too_long(x)
                || too_long(lo)
                || too_long(hi)
            {
                return return_null(fcinfo);
            }
            let equal = call(
                pg_sys::numeric_cmp,
                &[pg_sys::Datum::from(lo), pg_sys::Datum::from(hi)],
            );
            if equal.value() as i32 == 0 {
                return return_null(fcinfo);
            }
            pg_sys::width_bucket_numeric(fcinfo)
        }
    }
);

#[cfg(test)]
mod tests {
    #[test]
    fn casts_round_half_even_and_stop_at_the_range() {
        assert_eq!(
            super::float_to_int(2.5, super::I32_RANGE.0, super::I32_RANGE.1),
            Some(2)
        );
        assert_eq!(
            super::float_to_int(2147483647.4, super::I32_RANGE.0, super::I32_RANGE.1),
            Some(2147483647)
        );
        assert_eq!(
            super::float_to_int(2147483647.6, super::I32_RANGE.0, super::I32_RANGE.1),
            None
        );
        assert_eq!(
            super::float_to_int(f64::NAN, super::I64_RANGE.0, super::I64_RANGE.1),
            None
        );
    }
}
