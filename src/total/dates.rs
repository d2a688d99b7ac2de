//! Total forms of the date and timestamp functions: date_trunc,
//! date_part and extract, date to timestamp, make_date, to_char, date ±
//! integer, AT TIME ZONE.

use super::{int, text_arg, text_bytes};
use crate::fmgr::{arg_datum, i64_datum, return_null, v1_function};
use pgrx::pg_sys;

/// Microseconds in 1001 years: a timestamp this far inside its type's range
/// stays inside when truncated to a millennium or moved by a time zone.
const MARGIN_USECS: i64 = 1001 * 366 * 86_400 * 1_000_000;
/// The finite timestamps: [MIN_TIMESTAMP, END_TIMESTAMP) of datatype/timestamp.h.
pub(super) const MIN_TIMESTAMP: i64 = -211_813_488_000_000_000;
pub(super) const END_TIMESTAMP: i64 = 9_223_371_331_200_000_000;
/// The dates (days from 2000-01-01) that convert to a timestamp at least
/// MARGIN_USECS inside its range.
const MARGIN_DAYS: i64 = MARGIN_USECS / 86_400_000_000;
const MIN_DATE: i64 = MIN_TIMESTAMP / 86_400_000_000 + MARGIN_DAYS;
const END_DATE: i64 = END_TIMESTAMP / 86_400_000_000 - MARGIN_DAYS;

/// A timestamp (with or without time zone) the date functions may be
/// given: ±infinity, or at least 1001 years inside the range.
fn timestamp_usable(t: i64) -> bool {
    t == i64::MIN
        || t == i64::MAX
        || (t >= MIN_TIMESTAMP + MARGIN_USECS && t < END_TIMESTAMP - MARGIN_USECS)
}

/// A date the date functions may be given (as a timestamp): ±infinity, or
/// one whose timestamp is usable.
fn date_usable(d: i32) -> bool {
    d == i32::MIN || d == i32::MAX || (i64::from(d) >= MIN_DATE && i64::from(d) < END_DATE)
}

/// Units of date_trunc on timestamps (and of date_part, extract below).
const TRUNC_UNITS: &[&str] = &[
    "microseconds",
    "milliseconds",
    "second",
    "seconds",
    "minute",
    "minutes",
    "hour",
    "hours",
    "day",
    "days",
    "week",
    "weeks",
    "month",
    "months",
    "quarter",
    "year",
    "years",
    "decade",
    "decades",
    "century",
    "centuries",
    "millennium",
    "millennia",
];
/// Units of date_part and extract on timestamps: those, and the fields that
/// are not truncation units. (No time zone fields: PostgreSQL refuses
/// them for timestamp without time zone.)
const PART_UNITS: &[&str] = &["dow", "isodow", "doy", "isoyear", "epoch", "julian"];
/// Units of extract on dates: no time of day.
const DATE_UNITS: &[&str] = &[
    "day",
    "days",
    "week",
    "weeks",
    "month",
    "months",
    "quarter",
    "year",
    "years",
    "decade",
    "decades",
    "century",
    "centuries",
    "millennium",
    "millennia",
    "dow",
    "isodow",
    "doy",
    "isoyear",
    "epoch",
    "julian",
];

/// Whether argument `i` (text) names one of `units` (case-insensitive, as
/// PostgreSQL lowercases it).
///
/// # Safety
/// Argument `i` of a live call, declared text, not NULL.
unsafe fn unit_in(fcinfo: pg_sys::FunctionCallInfo, i: usize, units: &[&[&str]]) -> bool {
    // SAFETY: the caller's contract; the text is detoasted and read as bytes.
    unsafe {
        if text_bytes(fcinfo, i) > 16 {
            return false;
        }
        let unit = pg_sys::pg_detoast_datum_packed(arg_datum(fcinfo, i).cast_mut_ptr());
        let bytes = std::slice::from_raw_parts(
            pgrx::vardata_any(unit.cast()).cast::<u8>(),
            pgrx::varsize_any_exhdr(unit.cast()),
        );
        units.iter().any(|list| {
            list.iter()
                .any(|u| u.as_bytes().eq_ignore_ascii_case(bytes))
        })
    }
}

macro_rules! timestamp_function {
    ($finfo:ident, $name:ident, $builtin:ident, $units:expr) => {
        v1_function!($finfo, $name, |fcinfo| {
            // SAFETY: STRICT, declared (text, timestamp[tz]); the built-in is called with the same
            // arguments once the unit is one it knows and the timestamp far from the range's ends.
            unsafe {
                if !unit_in(fcinfo, 0, $units) || !timestamp_usable(int(fcinfo, 1)) {
                    return return_null(fcinfo);
                }
                pg_sys::$builtin(fcinfo)
            }
        });
    };
}

timestamp_function!(
    pg_finfo_dp_total_timestamp_trunc,
    dp_total_timestamp_trunc,
    timestamp_trunc,
    &[TRUNC_UNITS]
);
timestamp_function!(
    pg_finfo_dp_total_timestamptz_trunc,
    dp_total_timestamptz_trunc,
    timestamptz_trunc,
    &[TRUNC_UNITS]
);
timestamp_function!(
    pg_finfo_dp_total_timestamp_part,
    dp_total_timestamp_part,
    timestamp_part,
    &[TRUNC_UNITS, PART_UNITS]
);
timestamp_function!(
    pg_finfo_dp_total_timestamptz_part,
    dp_total_timestamptz_part,
    timestamptz_part,
    &[TRUNC_UNITS, PART_UNITS]
);
timestamp_function!(
    pg_finfo_dp_total_extract_timestamp,
    dp_total_extract_timestamp,
    extract_timestamp,
    &[TRUNC_UNITS, PART_UNITS]
);
timestamp_function!(
    pg_finfo_dp_total_extract_timestamptz,
    dp_total_extract_timestamptz,
    extract_timestamptz,
    &[TRUNC_UNITS, PART_UNITS]
);

/// A zone's name (its first TZ_STRLEN_MAX bytes) and the
/// `timezone_abbreviations` it was looked up under: the same name names
/// another zone, which may not be loaded, under another list.
type LoadedZone = (Vec<u8>, Vec<u8>);

thread_local! {
    /// In an analyst's session (`restrict_zones`), the time zones the
    /// gate loaded from the constants of the statements it checked, known
    /// to PostgreSQL; None in any other session: every zone.
    static LOADED_ZONES: std::cell::RefCell<Option<std::collections::HashSet<LoadedZone>>> =
        const { std::cell::RefCell::new(None) };
}

/// The session's `timezone_abbreviations`, as text.
///
/// # Safety
/// Inside a transaction.
unsafe fn abbreviations() -> Vec<u8> {
    // SAFETY: the caller's contract; GetConfigOption returns the setting's string (or null).
    unsafe {
        let value = pg_sys::GetConfigOption(c"timezone_abbreviations".as_ptr(), true, false);
        if value.is_null() {
            Vec::new()
        } else {
            std::ffi::CStr::from_ptr(value).to_bytes().to_vec()
        }
    }
}

/// From now on in this session, `AT TIME ZONE`'s total forms know only the
/// zones `load_zone` loaded. PostgreSQL reads a zone's file the first time
/// a session uses it and keeps it: a zone first met among protected rows
/// would leave, in how long a later lookup takes, whether a row reached
/// it. The gate loads every zone a statement names before any row is
/// read, and calls this for analysts' sessions.
pub fn restrict_zones() {
    LOADED_ZONES.with(|zones| {
        zones
            .borrow_mut()
            .get_or_insert_with(std::collections::HashSet::new);
    });
}

/// Loads time zone `zone` (text, as `AT TIME ZONE` is written) as a call
/// would, so that calls of the total forms with it read nothing more, and
/// lets them know it.
///
/// # Safety
/// Inside a transaction.
pub unsafe fn load_zone(zone: &[u8]) {
    // SAFETY: the caller's contract.
    let (name, known) = unsafe { zone_lookup(zone) };
    // SAFETY: as above.
    let list = unsafe { abbreviations() };
    LOADED_ZONES.with(|zones| {
        if let (Some(zones), Some(name), true) = (zones.borrow_mut().as_mut(), name, known) {
            zones.insert((name, list));
        }
    });
}

/// The zone's name as PostgreSQL reads it (its first TZ_STRLEN_MAX bytes,
/// None if it holds a NUL), and whether `AT TIME ZONE` knows it: an
/// abbreviation of the session's `timezone_abbreviations` first, then a
/// full name or POSIX specification; without raising.
///
/// # Safety
/// Inside a transaction.
unsafe fn zone_lookup(bytes: &[u8]) -> (Option<Vec<u8>>, bool) {
    // SAFETY: the caller's contract; the bytes are copied into a NUL-terminated string before
    // the catalog of zones reads them.
    unsafe {
        let kept = clipped(bytes);
        let Ok(name) = std::ffi::CString::new(kept) else {
            return (None, false);
        };
        let lower = pg_sys::downcase_truncate_identifier(name.as_ptr(), kept.len() as i32, false);
        let known =
            crate::versions::zone_abbreviation(lower) || !pg_sys::pg_tzset(name.as_ptr()).is_null();
        (Some(kept.to_vec()), known)
    }
}

/// A zone name's first TZ_STRLEN_MAX bytes, cut at a character's end, as
/// PostgreSQL reads it (`text_to_cstring_buffer`).
///
/// # Safety
/// Inside a transaction (the database encoding is read).
unsafe fn clipped(bytes: &[u8]) -> &[u8] {
    // SAFETY: the caller's contract; pg_mbcliplen reads at most `len` bytes.
    let kept = unsafe {
        pg_sys::pg_mbcliplen(
            bytes.as_ptr().cast(),
            bytes.len() as i32,
            pg_sys::TZ_STRLEN_MAX as i32,
        )
    } as usize;
    &bytes[..kept.min(bytes.len())]
}

/// Whether argument `i` (text) names a time zone that `AT TIME ZONE`
/// knows (`zone_lookup`) and, in an analyst's session, that the gate
/// loaded under the abbreviations in force now (`restrict_zones`): never a
/// zone's first read among rows.
///
/// # Safety
/// Argument `i` of a live call, declared text, not NULL.
unsafe fn zone_known(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> bool {
    // SAFETY: the caller's contract.
    unsafe {
        let bytes = text_arg(fcinfo, i);
        let allowed = LOADED_ZONES.with(|zones| match zones.borrow().as_ref() {
            None => true,
            Some(zones) => zones.contains(&(clipped(bytes).to_vec(), abbreviations())),
        });
        allowed && zone_lookup(bytes).1
    }
}

macro_rules! zone_function {
    ($finfo:ident, $name:ident, $builtin:ident) => {
        v1_function!($finfo, $name, |fcinfo| {
            // SAFETY: STRICT, declared (text, timestamp[tz]); the built-in is called with the same
            // arguments once the timestamp is far from the range's ends (infinite ones it returns
            // unchanged, whatever the zone) and the zone one it knows.
            unsafe {
                let t = int(fcinfo, 1);
                if !timestamp_usable(t)
                    || (t != i64::MIN && t != i64::MAX && !zone_known(fcinfo, 0))
                {
                    return return_null(fcinfo);
                }
                pg_sys::$builtin(fcinfo)
            }
        });
    };
}

// timestamptz AT TIME ZONE zone, timezone(zone, timestamptz).
zone_function!(
    pg_finfo_dp_total_timestamptz_zone,
    dp_total_timestamptz_zone,
    timestamptz_zone
);
// timestamp AT TIME ZONE zone, timezone(zone, timestamp).
zone_function!(
    pg_finfo_dp_total_timestamp_zone,
    dp_total_timestamp_zone,
    timestamp_zone
);

// extract(unit FROM date).
v1_function!(
    pg_finfo_dp_total_extract_date,
    dp_total_extract_date,
    |fcinfo| {
        // SAFETY: STRICT, declared (text, date); the built-in is called with the same arguments once
        // the unit is one it knows for dates.
        unsafe {
            if !unit_in(fcinfo, 0, &[DATE_UNITS]) || !date_usable(int(fcinfo, 1) as i32) {
                return return_null(fcinfo);
            }
            pg_sys::extract_date(fcinfo)
        }
    }
);

// date_part(unit, date): PostgreSQL's is SQL, date_part(unit, date::timestamp).
v1_function!(
    pg_finfo_dp_total_date_part_date,
    dp_total_date_part_date,
    |fcinfo| {
        // SAFETY: STRICT, declared (text, date); the date argument is replaced by its timestamp
        // (exact in range, as date2timestamp computes it) and timestamp_part called with both.
        unsafe {
            let d = int(fcinfo, 1) as i32;
            if !unit_in(fcinfo, 0, &[TRUNC_UNITS, PART_UNITS]) || !date_usable(d) {
                return return_null(fcinfo);
            }
            let t = match d {
                i32::MIN => i64::MIN,
                i32::MAX => i64::MAX,
                d => i64::from(d) * 86_400_000_000,
            };
            (*(*fcinfo).args.as_mut_ptr().add(1)).value = i64_datum(t);
            pg_sys::timestamp_part(fcinfo)
        }
    }
);

macro_rules! date_cast {
    ($finfo:ident, $name:ident, $builtin:ident) => {
        v1_function!($finfo, $name, |fcinfo| {
            // SAFETY: STRICT, one date argument; the built-in is called with it once it converts.
            unsafe {
                if !date_usable(int(fcinfo, 0) as i32) {
                    return return_null(fcinfo);
                }
                pg_sys::$builtin(fcinfo)
            }
        });
    };
}

date_cast!(
    pg_finfo_dp_total_date_timestamp,
    dp_total_date_timestamp,
    date_timestamp
);
date_cast!(
    pg_finfo_dp_total_date_timestamptz,
    dp_total_date_timestamptz,
    date_timestamptz
);

/// Whether make_date accepts (year, month, day): a real day of the
/// proleptic Gregorian calendar (year 0 does not exist; -1 is 1 BC), within
/// years 4713 BC to 5874897 AD less a year at each end.
fn real_date(year: i64, month: i64, day: i64) -> bool {
    if year == 0 || !(-4712..=5_874_896).contains(&year) || !(1..=12).contains(&month) || day < 1 {
        return false;
    }
    let y = if year < 0 { year + 1 } else { year };
    let leap = y.rem_euclid(4) == 0 && (y.rem_euclid(100) != 0 || y.rem_euclid(400) == 0);
    let days = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    day <= days
}

// make_date(year, month, day): NULL for a day that does not exist.
v1_function!(pg_finfo_dp_total_make_date, dp_total_make_date, |fcinfo| {
    // SAFETY: STRICT, three int4 arguments; the built-in is called with them once they name a real day.
    unsafe {
        if !real_date(int(fcinfo, 0), int(fcinfo, 1), int(fcinfo, 2)) {
            return return_null(fcinfo);
        }
        pg_sys::make_date(fcinfo)
    }
});

/// The longest to_char format the total forms format: PostgreSQL allocates
/// 12 bytes of output per format byte, and a request over 1 GB fails.
pub(super) const FORMAT_BYTES: usize = 1024;

/// Whether to_char formats every finite timestamp with this format: it is
/// at most `FORMAT_BYTES` long and has no TM (localized name) prefix. The
/// fields without TM print numbers and English names; a TM name is checked
/// against a length, and case-converted under the collation, only when a
/// timestamp of that month or day meets it. (Conservative: any "tm", in any
/// case, even inside quotes, gives NULL.)
///
/// # Safety
/// Argument `i` of a live call, declared text, not NULL.
unsafe fn format_total(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> bool {
    // SAFETY: the caller's contract; the size is read from the header before the text.
    unsafe {
        text_bytes(fcinfo, i) <= FORMAT_BYTES
            && !text_arg(fcinfo, i)
                .windows(2)
                .any(|w| w.eq_ignore_ascii_case(b"tm"))
    }
}

macro_rules! to_char_function {
    ($finfo:ident, $name:ident, $builtin:ident) => {
        v1_function!($finfo, $name, |fcinfo| {
            // SAFETY: STRICT, declared (timestamp[tz], text); the built-in is called with the same
            // arguments once the timestamp is far from the range's ends and the format total.
            unsafe {
                if !timestamp_usable(int(fcinfo, 0)) || !format_total(fcinfo, 1) {
                    return return_null(fcinfo);
                }
                pg_sys::$builtin(fcinfo)
            }
        });
    };
}

// to_char(timestamp, text) and to_char(timestamptz, text): NULL for a
// format over 1 KB or with a TM field (and, as PostgreSQL, for ±infinity).
to_char_function!(
    pg_finfo_dp_total_timestamp_to_char,
    dp_total_timestamp_to_char,
    timestamp_to_char
);
to_char_function!(
    pg_finfo_dp_total_timestamptz_to_char,
    dp_total_timestamptz_to_char,
    timestamptz_to_char
);

// date + integer, integer + date, date - integer: NULL where the day is not
// a usable date (PostgreSQL raises "date out of range"); ±infinity stays.
macro_rules! date_days {
    ($finfo:ident, $name:ident, $builtin:ident, $date:expr, $days:expr, $sign:expr) => {
        v1_function!($finfo, $name, |fcinfo| {
            // SAFETY: STRICT, declared with a date and an integer at the given places; the
            // built-in is called with the same arguments once its day is a usable date.
            unsafe {
                let d = int(fcinfo, $date) as i32;
                let days = int(fcinfo, $days);
                let moved = d == i32::MIN
                    || d == i32::MAX
                    || i32::try_from(i64::from(d) + $sign * days).is_ok_and(|r| {
                        r != i32::MIN && r != i32::MAX && date_usable(r) && date_usable(d)
                    });
                if !moved {
                    return return_null(fcinfo);
                }
                pg_sys::$builtin(fcinfo)
            }
        });
    };
}

date_days!(
    pg_finfo_dp_total_date_pli,
    dp_total_date_pli,
    date_pli,
    0,
    1,
    1
);
date_days!(
    pg_finfo_dp_total_date_mii,
    dp_total_date_mii,
    date_mii,
    0,
    1,
    -1
);

// integer + date: PostgreSQL's is SQL, date + integer with the operands swapped.
v1_function!(
    pg_finfo_dp_total_integer_pl_date,
    dp_total_integer_pl_date,
    |fcinfo| {
        // SAFETY: STRICT, declared (integer, date): the two arguments are swapped in place and
        // dp_total_date_pli's body runs with them, as (date, integer).
        unsafe {
            let args = (*fcinfo).args.as_mut_ptr();
            std::ptr::swap(args, args.add(1));
            dp_total_date_pli(fcinfo)
        }
    }
);

/// For a built-in comparison between dates and timestamps, by its name
/// (`date_lt_timestamptz`, `timestamptz_cmp_timestamp`, ...): whether it
/// follows the session's TimeZone (exactly one side is a timestamptz).
/// None for any other name.
pub fn date_time_comparison(name: &str) -> Option<bool> {
    let types = ["date", "timestamp", "timestamptz"];
    match name.split('_').collect::<Vec<_>>().as_slice() {
        [left, op, right]
            if ["eq", "ne", "lt", "le", "gt", "ge", "cmp"].contains(op)
                && types.contains(left)
                && types.contains(right) =>
        {
            Some((*left == "timestamptz") != (*right == "timestamptz"))
        }
        _ => None,
    }
}
