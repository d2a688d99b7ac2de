//! Total forms of date and timestamp arithmetic with intervals and of
//! to_char for intervals: date ± interval, timestamp ± interval and
//! to_char(interval, text), NULL where PostgreSQL could raise an error.
//!
//! PostgreSQL raises "timestamp out of range" when a sum leaves the
//! timestamp's range (or a date its own), "interval out of range" for an
//! interval of more hours than an int holds in to_char, and rejects or
//! misreads some to_char fields for negative months: on protected rows an
//! error would tell what a row holds. These forms call the built-in only
//! where it cannot fail:
//! - a sum whose every step stays at least a few days inside the range
//!   (each month counted as 31 days, a day as 24 hours, with 4 days for a
//!   month's end and the step's rounding): NULL nearer to the range's ends
//!   (the years around 4713 BC and 294276 AD); an infinite timestamp or
//!   date with a finite interval stays infinite, as PostgreSQL has it;
//! - to_char with a format of only numeric fields (HH24, HH12, HH, MI, SS,
//!   MS, US, DD, MM, YYYY, YY, upper or lower case), FM, digits, spaces and
//!   `: - . / , ;`, at most `FORMAT_BYTES` long, of an interval of at most
//!   2^31 - 1 hours; any other format gives NULL.

use super::dates::{END_TIMESTAMP, FORMAT_BYTES, MIN_TIMESTAMP};
use super::{int, text_arg};
use crate::fmgr::{arg_datum, return_null, v1_function};
use pgrx::pg_sys;

const USECS_PER_DAY: i128 = 86_400_000_000;

/// An interval argument: (months, days, microseconds).
///
/// # Safety
/// Argument `i` of a live call, declared interval, not NULL.
unsafe fn interval(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> (i32, i32, i64) {
    // SAFETY: the caller's contract; an interval datum points to its 16 bytes.
    unsafe {
        let span = arg_datum(fcinfo, i).cast_mut_ptr::<pg_sys::Interval>();
        ((*span).month, (*span).day, (*span).time)
    }
}

/// Whether moving the finite timestamp `t` by the interval, forwards or
/// back, keeps every step of PostgreSQL's sum inside the range.
fn moves_inside(t: i64, (month, day, time): (i32, i32, i64)) -> bool {
    let reach = i128::from(month).abs() * 31 * USECS_PER_DAY
        + (i128::from(day).abs() + 4) * USECS_PER_DAY
        + i128::from(time).abs();
    let t = i128::from(t);
    t - reach >= i128::from(MIN_TIMESTAMP) && t + reach < i128::from(END_TIMESTAMP)
}

/// Whether timestamp ± interval returns without an error: a finite sum
/// inside the range, or an infinite timestamp (kept as it is) with a
/// finite interval.
fn timestamp_sum_total(t: i64, span: (i32, i32, i64)) -> bool {
    // PostgreSQL 17's infinite intervals: every field at its end.
    let infinite_span = matches!(
        span,
        (i32::MAX, i32::MAX, i64::MAX) | (i32::MIN, i32::MIN, i64::MIN)
    );
    if infinite_span {
        return false;
    }
    t == i64::MIN || t == i64::MAX || moves_inside(t, span)
}

macro_rules! timestamp_interval {
    ($finfo:ident, $name:ident, $builtin:ident) => {
        v1_function!($finfo, $name, |fcinfo| {
            // SAFETY: STRICT, declared (timestamp, interval); the built-in is called with the
            // same arguments once their sum cannot leave the range.
            unsafe {
                if !timestamp_sum_total(int(fcinfo, 0), interval(fcinfo, 1)) {
                    return return_null(fcinfo);
                }
                pg_sys::$builtin(fcinfo)
            }
        });
    };
}

timestamp_interval!(
    pg_finfo_dp_total_timestamp_pl_interval,
    dp_total_timestamp_pl_interval,
    timestamp_pl_interval
);
timestamp_interval!(
    pg_finfo_dp_total_timestamp_mi_interval,
    dp_total_timestamp_mi_interval,
    timestamp_mi_interval
);

macro_rules! date_interval {
    ($finfo:ident, $name:ident, $builtin:ident) => {
        v1_function!($finfo, $name, |fcinfo| {
            // SAFETY: STRICT, declared (date, interval); the built-in is called with the same
            // arguments once the date converts to a timestamp and the sum cannot leave the range.
            unsafe {
                let d = int(fcinfo, 0) as i32;
                let t = match d {
                    i32::MIN => i64::MIN,
                    i32::MAX => i64::MAX,
                    // Days from 2000-01-01, as a timestamp: inside the
                    // range, or the conversion itself would raise.
                    _ => {
                        let t = i128::from(d) * USECS_PER_DAY;
                        if t < i128::from(MIN_TIMESTAMP) || t >= i128::from(END_TIMESTAMP) {
                            return return_null(fcinfo);
                        }
                        t as i64
                    }
                };
                if !timestamp_sum_total(t, interval(fcinfo, 1)) {
                    return return_null(fcinfo);
                }
                pg_sys::$builtin(fcinfo)
            }
        });
    };
}

date_interval!(
    pg_finfo_dp_total_date_pl_interval,
    dp_total_date_pl_interval,
    date_pl_interval
);
date_interval!(
    pg_finfo_dp_total_date_mi_interval,
    dp_total_date_mi_interval,
    date_mi_interval
);

/// The to_char fields of an interval that print a number whatever its
/// value (longest first, so that HH24 is read before HH).
const NUMERIC_FIELDS: &[&[u8]] = &[
    b"YYYY", b"yyyy", b"HH24", b"hh24", b"HH12", b"hh12", b"HH", b"hh", b"MI", b"mi", b"SS", b"ss",
    b"MS", b"ms", b"US", b"us", b"DD", b"dd", b"MM", b"mm", b"YY", b"yy", b"FM", b"fm",
];

/// Whether to_char formats every interval of at most 2^31 - 1 hours with
/// `format` without an error: numeric fields, FM, digits, spaces and a
/// few separators only. Read as PostgreSQL reads it, such a format holds
/// no other field: every field name that starts with one of these
/// letters and is not listed (D, DY, Y, FF1, ...) leaves a letter this
/// reading refuses; DDD and SSSS, read by PostgreSQL before the DD and SS
/// they begin with, are refused by name (an attack found DDDD, which
/// PostgreSQL reads as DDD and D and refuses for an interval only when a
/// row reaches it).
fn interval_format_total(format: &[u8]) -> bool {
    // SSSS (seconds past midnight) reads as two SS here.
    if format.len() > FORMAT_BYTES || format.windows(4).any(|w| w.eq_ignore_ascii_case(b"ssss")) {
        return false;
    }
    let mut i = 0;
    while i < format.len() {
        // PostgreSQL reads DDD (the day of the year) before DD: DDDD is
        // DDD and D, which it refuses for an interval.
        if format[i..].len() >= 3 && format[i..i + 3].eq_ignore_ascii_case(b"ddd") {
            return false;
        }
        if let Some(field) = NUMERIC_FIELDS.iter().find(|f| format[i..].starts_with(f)) {
            i += field.len();
            continue;
        }
        if !matches!(
            format[i],
            b'0'..=b'9' | b' ' | b':' | b'-' | b'.' | b'/' | b',' | b';'
        ) {
            return false;
        }
        i += 1;
    }
    true
}

// to_char(interval, text): NULL for a format with any other field, or for
// an interval of more hours than an int holds.
v1_function!(
    pg_finfo_dp_total_interval_to_char,
    dp_total_interval_to_char,
    |fcinfo| {
        // SAFETY: STRICT, declared (interval, text); the built-in is called with the same
        // arguments once the format and the interval's hours are ones it prints.
        unsafe {
            let (_, _, time) = interval(fcinfo, 0);
            let hours = time / 3_600_000_000;
            if hours.unsigned_abs() > i32::MAX as u64 || !interval_format_total(text_arg(fcinfo, 1))
            {
                return return_null(fcinfo);
            }
            pg_sys::interval_to_char(fcinfo)
        }
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        for ok in [
            "HH24:MI:SS",
            "FMDD",
            "yyyy-mm-dd hh24:mi",
            "HH12.MS",
            "9999 DD",
            "",
        ] {
            assert!(interval_format_total(ok.as_bytes()), "{ok}");
        }
        for refused in [
            "DDD",
            "D",
            "DY",
            "SSSS",
            "Y",
            "FF1",
            "Month",
            "RM",
            "HH24 \"h\"",
            "TMMon",
            "IW",
        ] {
            assert!(!interval_format_total(refused.as_bytes()), "{refused}");
        }
        assert!(!interval_format_total(&[b'H'; FORMAT_BYTES + 1]));
    }

    #[test]
    fn sums() {
        let day = 86_400_000_000i64;
        assert!(timestamp_sum_total(0, (12, 3, 5 * day)));
        assert!(timestamp_sum_total(i64::MAX, (1, 0, 0)));
        assert!(!timestamp_sum_total(0, (i32::MAX, i32::MAX, i64::MAX)));
        assert!(!timestamp_sum_total(END_TIMESTAMP - day, (0, 1, 0)));
        assert!(!timestamp_sum_total(MIN_TIMESTAMP + day, (0, 0, -day)));
        assert!(!timestamp_sum_total(0, (i32::MIN, 0, 0)));
        assert!(!timestamp_sum_total(0, (0, 0, i64::MIN)));
    }
}
