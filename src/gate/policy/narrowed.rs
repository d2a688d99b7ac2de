//! An analyst's narrower domains: `dpnoise.narrowed_domains`, a setting
//! any role may change (a BI tool sets it in its connection's options,
//! `-c dpnoise.narrowed_domains=...`), lists columns whose values the
//! analyst's plain aggregates read within bounds narrower than the DBA's
//! `dp_domain`, for less noise:
//!
//! ```text
//! SET dpnoise.narrowed_domains = 'visits.amount=0:50, public.staff.salary=20000:90000';
//! ```
//!
//! Each entry is `[schema.]table.column=lower:upper`. It can only narrow:
//! the bounds used are the entry's intersected with the DBA's domain, so a
//! wider entry changes nothing; a column without a domain gets none. The
//! bounds are written into the dpnoise aggregate the plain one becomes,
//! so a release under narrowed bounds is a release of its own (its repeat
//! identity holds them), and a change re-plans cached statements. A
//! malformed value is refused when set (22023).

use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use pgrx::pg_sys;
use std::ffi::{CStr, CString};

static NARROWED_DOMAINS: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);

/// One entry: the table as written (with or without its schema), the
/// column, the bounds.
#[derive(Debug, PartialEq)]
struct Entry {
    schema: Option<String>,
    table: String,
    column: String,
    lower: f64,
    upper: f64,
}

/// Registers the setting. From `_PG_init`, once.
pub fn define() {
    // SAFETY: pgrx's condition for hooks is that no Rust panic escapes them into PostgreSQL: both
    // hooks are #[pg_guard]. Their signatures are the string GUC check and assign hook types;
    // NARROWED_DOMAINS is a static, so the setting's storage lives as long as the library; this
    // runs once, from _PG_init, on the process's only thread.
    unsafe {
        GucRegistry::define_string_guc_with_hooks(
            c"dpnoise.narrowed_domains",
            c"An analyst's narrower domains for plain sums, averages and order statistics: [schema.]table.column=lower:upper, comma-separated.",
            c"Each is intersected with the DBA's dp_domain of the column: it can only narrow it (less noise, values outside clamped).",
            &NARROWED_DOMAINS,
            GucContext::Userset,
            GucFlags::default(),
            Some(check),
            Some(assign),
            None,
        );
    }
}

/// Parses the setting's text: `None` if malformed (with why).
fn parse(text: &str) -> Result<Vec<Entry>, String> {
    let mut entries = Vec::new();
    for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (name, range) = item
            .split_once('=')
            .ok_or_else(|| format!("'{item}' has no '=': write table.column=lower:upper"))?;
        let (lower, upper) = range
            .split_once(':')
            .ok_or_else(|| format!("'{item}' has no ':' between its bounds"))?;
        let number = |s: &str| {
            s.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| format!("'{item}': '{}' is not a finite number", s.trim()))
        };
        let (lower, upper) = (number(lower)?, number(upper)?);
        if lower > upper {
            return Err(format!("'{item}': its lower bound is above its upper"));
        }
        let parts: Vec<&str> = name.trim().split('.').map(str::trim).collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err(format!("'{item}': write [schema.]table.column before '='"));
        }
        let (schema, table, column) = match parts[..] {
            [table, column] => (None, table, column),
            [schema, table, column] => (Some(schema.to_string()), table, column),
            _ => return Err(format!("'{item}': write [schema.]table.column before '='")),
        };
        entries.push(Entry {
            schema,
            table: table.to_string(),
            column: column.to_string(),
            lower,
            upper,
        });
    }
    Ok(entries)
}

/// The bounds `domain` (the DBA's, of column `attno` of `relid`) narrowed
/// by the session's entries for that column: their intersection, which
/// never widens it. An entry disjoint from the domain leaves one end of it.
///
/// # Safety
/// Inside a transaction (catalog lookups by OID).
pub(super) unsafe fn narrow(relid: pg_sys::Oid, attno: i16, domain: (f64, f64)) -> (f64, f64) {
    let Some(text) = NARROWED_DOMAINS.get() else {
        return domain;
    };
    let Ok(entries) = parse(&text.to_string_lossy()) else {
        return domain;
    };
    if entries.is_empty() {
        return domain;
    }
    // SAFETY: the caller's contract; the lookups return palloc'd strings or null.
    let (schema, table, column) = unsafe {
        let owned = |p: *mut std::ffi::c_char| {
            (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
        };
        (
            owned(pg_sys::get_namespace_name(pg_sys::get_rel_namespace(relid))),
            owned(pg_sys::get_rel_name(relid)),
            owned(pg_sys::get_attname(relid, attno, true)),
        )
    };
    let (Some(table), Some(column)) = (table, column) else {
        return domain;
    };
    let (mut lower, mut upper) = domain;
    for entry in entries.iter().filter(|e| {
        e.table == table
            && e.column == column
            && e.schema.as_ref().is_none_or(|s| Some(s) == schema.as_ref())
    }) {
        lower = entry.lower.clamp(lower, upper);
        upper = entry.upper.clamp(lower, upper);
    }
    (lower, upper)
}

/// # Safety
/// Only for PostgreSQL, as the setting's check hook: `newval` is non-null
/// and points to the proposed value, null or a NUL-terminated string.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn check(
    newval: *mut *mut std::ffi::c_char,
    _extra: *mut *mut std::ffi::c_void,
    _source: pg_sys::GucSource::Type,
) -> bool {
    // SAFETY: `newval` is the non-null `char **` PostgreSQL passes a string check hook.
    let value = unsafe { *newval };
    if value.is_null() {
        return true;
    }
    // SAFETY: a proposed string value is NUL-terminated and lives for the whole hook call.
    let text = unsafe { CStr::from_ptr(value) }
        .to_string_lossy()
        .into_owned();
    let Err(why) = parse(&text) else {
        return true;
    };
    let message = CString::new(format!("dpnoise.narrowed_domains: {why}"))
        .unwrap_or_else(|_| c"dpnoise.narrowed_domains is malformed".into());
    // SAFETY: the check-hook protocol (utils/guc.h): a hook returning false may set these two
    // globals of this process, which PostgreSQL reads right after the hook returns; the message
    // is pstrdup'd into the current memory context, which outlives that report.
    unsafe {
        pg_sys::GUC_check_errcode(pgrx::PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE as i32);
        pg_sys::GUC_check_errmsg_string = pg_sys::pstrdup(message.as_ptr());
    }
    false
}

/// # Safety
/// Only for PostgreSQL, as the setting's assign hook (the static still
/// holds the old value).
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn assign(newval: *const std::ffi::c_char, _extra: *mut std::ffi::c_void) {
    // SAFETY: a NUL-terminated value or null, for the hook call.
    let new = (!newval.is_null()).then(|| unsafe { CStr::from_ptr(newval) }.to_owned());
    if new.as_deref() != NARROWED_DOMAINS.get().as_deref() {
        // Cached plans hold the old bounds: analysed and planned again.
        // SAFETY: ResetPlanCache only marks this backend's cached plan sources invalid.
        unsafe { pg_sys::ResetPlanCache() };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse_and_malformed_ones_say_why() {
        let entries = parse(" visits.amount = 0 : 50 , public.staff.salary=-1e3:2.5e4,").unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].table, "visits");
        assert_eq!((entries[0].lower, entries[0].upper), (0.0, 50.0));
        assert_eq!(entries[1].schema.as_deref(), Some("public"));
        assert_eq!((entries[1].lower, entries[1].upper), (-1000.0, 25000.0));
        assert!(parse("").unwrap().is_empty());
        for bad in [
            "visits.amount",
            "visits.amount=1",
            "amount=0:1",
            "visits.amount=5:1",
            "visits.amount=0:inf",
            "a.b.c.d=0:1",
            ".amount=0:1",
            "visits.amount=x:1",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
