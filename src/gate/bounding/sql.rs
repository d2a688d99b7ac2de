//! The middle step of the bounding rewrite as SQL text the gate writes and
//! parses: the per-person level over the rows' stand-in `p`, either a
//! window partitioned by person that keeps each person's first k groups
//! (`per_person_sql`) or, without keys, each person's rows grouped by the
//! person (`by_person_sql`), with each value combined as its aggregate
//! needs (`super::Combine`).

use super::Combine;
use crate::gate::catalog::Protected;
use crate::gate::{list_items, refuse, SHAPE};
use pgrx::pg_sys;
use std::ffi::{CStr, CString};

/// The rows as they are, for a level of one row per person whose keys
/// the policy lists (`super::Listing::Values`): nothing to bound, only
/// each listed key's own row to add, as `per_person_sql` adds it (each
/// value keeps its type; the last column is true for a row, NULL for a
/// key's own).
///
/// # Safety
/// As `per_person_sql`.
pub(super) unsafe fn pass_through_sql(
    columns: &[*mut pg_sys::Node],
    values: usize,
) -> Result<String, crate::gate::Refusal> {
    // SAFETY: the caller's contract.
    unsafe {
        let types = column_types(columns)?;
        let key_count = columns.len() - 1 - values;
        let mut inner: Vec<String> = (1..=1 + key_count).map(|i| format!("p.c{i}")).collect();
        let mut outer: Vec<String> = (1..=1 + key_count).map(|i| format!("b.c{i}")).collect();
        for j in 0..values {
            inner.push(format!("p.c{} AS v{j}", 2 + key_count + j));
            outer.push(format!("b.v{j}"));
        }
        outer.push("true".to_string());
        let mut own = vec![format!("NULL::{}", types[0])];
        own.extend((1..=key_count).map(|i| format!("k.c{i}")));
        own.extend(
            types[1 + key_count..]
                .iter()
                .map(|ty| format!("NULL::{ty}")),
        );
        own.push("NULL::pg_catalog.bool".to_string());
        Ok(format!(
            "SELECT {} FROM (SELECT {} FROM (SELECT {}) AS p) AS b \
             UNION ALL SELECT {} FROM (SELECT {}) AS k",
            outer.join(", "),
            inner.join(", "),
            stand_in(&types),
            own.join(", "),
            stand_in(&types[1..=key_count])
        ))
    }
}

/// The per-person level without keys as SQL over `p` (as `per_person_sql`'s
/// stand-in): each person's rows aggregated by the person, one row each,
/// with their combined values: `SELECT c1, <combines> FROM p GROUP BY c1`,
/// under the same two-level shape (the rows go to the inner level's p).
///
/// # Safety
/// As `per_person_sql`.
pub(super) unsafe fn by_person_sql(
    columns: &[*mut pg_sys::Node],
    values: &[(*mut pg_sys::Node, Combine)],
    protected: &Protected,
) -> Result<String, crate::gate::Refusal> {
    // SAFETY: the caller's contract.
    unsafe {
        let types = column_types(columns)?;
        let s = schema(protected)?;
        let mut inner = vec!["p.c1".to_string()];
        let mut outer = vec!["b.c1".to_string()];
        for (j, (_, combine)) in values.iter().enumerate() {
            let c = format!("p.c{}", 2 + j);
            inner.push(match combine {
                Combine::Present => {
                    format!("CASE WHEN pg_catalog.count({c}) > 0 THEN 1::pg_catalog.int8 END AS v{j}")
                }
                // numeric's sum of bigints is exact; saturated at the end, as dp_bound_sum does.
                Combine::SumInteger => format!(
                    "LEAST(GREATEST(pg_catalog.sum({c}), -9223372036854775808::pg_catalog.numeric), \
                     9223372036854775807::pg_catalog.numeric)::pg_catalog.int8 AS v{j}"
                ),
                Combine::SumFloat => format!("{s}.dp_person_sum({c}) AS v{j}"),
                Combine::Average => format!("{s}.dp_person_avg({c}) AS v{j}"),
                // float8 products through their total form (the plan
                // check admits what cannot fail among protected rows).
                Combine::RowScaled(rows) => format!(
                    "{s}.dp_total_float8mul({s}.dp_person_avg({c}), \
                     LEAST(pg_catalog.count({c}), {rows})::pg_catalog.float8) AS v{j}"
                ),
                Combine::Quantile(_) | Combine::Row => {
                    return Err(refuse("a per-person combine that needs the window", SHAPE))
                }
            });
            outer.push(format!("b.v{j}"));
        }
        Ok(format!(
            "SELECT {} FROM (SELECT {} FROM (SELECT {}) AS p GROUP BY p.c1) AS b",
            outer.join(", "),
            inner.join(", "),
            stand_in(&types),
        ))
    }
}

/// Each column's type as SQL (qualified, with its typmod, and its collation
/// where it is not the type's default).
///
/// # Safety
/// The columns are live expressions; inside a transaction.
pub(in crate::gate) unsafe fn column_types(
    columns: &[*mut pg_sys::Node],
) -> Result<Vec<String>, crate::gate::Refusal> {
    // SAFETY: the caller's contract; catalog lookups by OID return palloc'd strings or null.
    unsafe {
        let mut types = Vec::new();
        for column in columns {
            let (typid, typmod, collid) = (
                pg_sys::exprType(*column),
                pg_sys::exprTypmod(*column),
                pg_sys::exprCollation(*column),
            );
            let flags = (pg_sys::FORMAT_TYPE_TYPEMOD_GIVEN | pg_sys::FORMAT_TYPE_FORCE_QUALIFY)
                as pg_sys::bits16;
            let Some(ty) = owned(pg_sys::format_type_extended(typid, typmod, flags)) else {
                return Err(refuse("a column of an unknown type", SHAPE));
            };
            let collate =
                if collid != pg_sys::InvalidOid && collid != pg_sys::get_typcollation(typid) {
                    format!(
                        " COLLATE {}",
                        owned(pg_sys::generate_collation_name(collid)).unwrap_or_default()
                    )
                } else {
                    String::new()
                };
            types.push(format!("{ty}{collate}"));
        }
        Ok(types)
    }
}

/// A C string the catalog returned (null: None).
///
/// # Safety
/// `p` is null or a NUL-terminated string.
unsafe fn owned(p: *const std::ffi::c_char) -> Option<String> {
    // SAFETY: the caller's contract.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// A stand-in row of NULLs of these types, named c1, c2, …
fn stand_in(types: &[String]) -> String {
    types
        .iter()
        .enumerate()
        .map(|(i, ty)| format!("NULL::{ty} AS c{}", i + 1))
        .collect::<Vec<_>>()
        .join(", ")
}

/// dpnoise's schema, quoted, for qualified calls of its functions.
///
/// # Safety
/// Inside a transaction.
unsafe fn schema(protected: &Protected) -> Result<String, crate::gate::Refusal> {
    // SAFETY: the caller's contract; catalog lookups by OID.
    unsafe {
        let Some(schema) = owned(pg_sys::get_namespace_name(pg_sys::get_func_namespace(
            protected.share,
        ))) else {
            return Err(refuse(
                "dpnoise's functions are missing",
                "Ask the DBA to update dpnoise.",
            ));
        };
        Ok(owned(pg_sys::quote_identifier(
            CString::new(schema).expect("no NUL").as_ptr(),
        ))
        .unwrap_or_default())
    }
}

/// The per-person level as SQL over `p`, a stand-in of constants with the
/// rows' column types (c1 the person, then the keys, then the values).
/// One window over the rows, partitioned by person and ordered by each
/// row's choice key (`per_person`): the first row of each of the person's
/// first k groups is kept, with the person's combined values. Every name
/// is qualified: the analyst's search_path picks nothing.
///
/// # Safety
/// The columns are live expressions; inside a transaction.
pub(super) unsafe fn per_person_sql(
    columns: &[*mut pg_sys::Node],
    values: &[(*mut pg_sys::Node, Combine)],
    k: i32,
    protected: &Protected,
    listed: bool,
) -> Result<String, crate::gate::Refusal> {
    // SAFETY: the caller's contract; catalog lookups by OID return palloc'd strings or null.
    unsafe {
        let types = column_types(columns)?;
        let key_count = columns.len() - 1 - values.len();
        // The person and the keys are hashed by their types' hash functions.
        for (i, column) in columns.iter().enumerate().take(1 + key_count) {
            let cache = pg_sys::lookup_type_cache(
                pg_sys::exprType(*column),
                pg_sys::TYPECACHE_HASH_EXTENDED_PROC as i32,
            );
            if cache.is_null() || (*cache).hash_extended_proc == pg_sys::InvalidOid {
                let what = if i == 0 {
                    "the privacy unit"
                } else {
                    "a GROUP BY key"
                };
                return Err(refuse(
                    &format!("{what} is of type {}, which has no hash function to choose a person's groups by", types[i]),
                    "Group by a column or expression of a type with a hash opclass (integers, text, dates, numeric…).",
                ));
            }
        }
        let s = schema(protected)?;
        let parts: Vec<String> = (1..=1 + key_count).map(|i| format!("p.c{i}")).collect();
        let choice = format!(
            "{s}.dp_bound_key({}::pg_catalog.int8, {})",
            protected.seed,
            parts.join(", ")
        );
        let k = format!("{k}::pg_catalog.int4");
        let mut inner: Vec<String> = parts.clone();
        inner.push(format!("{s}.dp_bound_kept({choice}, {k}) OVER w AS r"));
        let mut outer: Vec<String> = (1..=1 + key_count).map(|i| format!("b.c{i}")).collect();
        for (j, (_, combine)) in values.iter().enumerate() {
            let c = format!("p.c{}", 2 + key_count + j);
            let call = |function: &str| format!("{s}.{function}({choice}, {k}, {c}");
            let call = match combine {
                Combine::Present => call("dp_bound_present"),
                Combine::SumFloat | Combine::SumInteger => call("dp_bound_sum"),
                Combine::Average => call("dp_bound_avg"),
                // The person's average in the group times their values
                // there, R at most; both windows keep the same first row.
                // R is a float8 constant as parsed (the repeat identity
                // admits outputs of the window's functions and constants).
                Combine::RowScaled(rows) => {
                    inner.push(format!(
                        "{s}.dp_total_float8mul({}) OVER w, LEAST({s}.dp_bound_sum({choice}, {k}, \
                         (CASE WHEN {c} IS NULL THEN 0 ELSE 1 END)::pg_catalog.float8) OVER w, \
                         '{rows}'::pg_catalog.float8)) AS v{j}",
                        call("dp_bound_avg")
                    ));
                    outer.push(format!("b.v{j}"));
                    continue;
                }
                Combine::Row => call("dp_bound_row"),
                // p exactly: float8in reads the shortest repr back to the same double.
                Combine::Quantile(p) => {
                    format!("{}, '{p:?}'::pg_catalog.float8", call("dp_bound_quantile"))
                }
            };
            inner.push(format!("{call}) OVER w AS v{j}"));
            outer.push(format!("b.v{j}"));
        }
        if listed {
            outer.push("true".to_string());
        }
        let mut text = format!(
            "SELECT {} FROM (SELECT {} FROM (SELECT {}) AS p WINDOW w AS (PARTITION BY p.c1 ORDER BY {choice})) AS b \
             WHERE b.r IS NOT NULL",
            outer.join(", "),
            inner.join(", "),
            stand_in(&types),
        );
        if listed {
            // Each listed key's own row: no person, no values.
            let mut own = vec![format!("NULL::{}", types[0])];
            own.extend((1..=key_count).map(|i| format!("k.c{i}")));
            own.extend(values.iter().map(|(_, combine)| match combine {
                Combine::Present | Combine::SumInteger => "NULL::pg_catalog.int8".to_string(),
                Combine::SumFloat
                | Combine::Average
                | Combine::RowScaled(_)
                | Combine::Quantile(_)
                | Combine::Row => "NULL::pg_catalog.float8".to_string(),
            }));
            own.push("NULL::pg_catalog.bool".to_string());
            text = format!(
                "{text} UNION ALL SELECT {} FROM (SELECT {}) AS k",
                own.join(", "),
                stand_in(&types[1..=key_count])
            );
        }
        Ok(text)
    }
}

/// A FROM entry of `subquery` named `alias`, its columns `names` (a List
/// of String), named as an alias too: a level deparsed (on Citus) reads
/// them by these names.
///
/// # Safety
/// `subquery` is a live Query; `names` a live List; inside a transaction.
pub(in crate::gate) unsafe fn subquery_entry(
    subquery: *mut pg_sys::Query,
    alias: &CStr,
    names: *mut pg_sys::List,
) -> *mut pg_sys::RangeTblEntry {
    // SAFETY: the caller's contract; the entry is zeroed and then filled as the parser fills it.
    unsafe {
        let rte = pg_sys::palloc0(std::mem::size_of::<pg_sys::RangeTblEntry>())
            as *mut pg_sys::RangeTblEntry;
        (*rte).type_ = pg_sys::NodeTag::T_RangeTblEntry;
        (*rte).rtekind = pg_sys::RTEKind::RTE_SUBQUERY;
        (*rte).subquery = subquery;
        (*rte).eref = pg_sys::makeAlias(alias.as_ptr(), names);
        (*rte).alias = pg_sys::makeAlias(alias.as_ptr(), pg_sys::copyObjectImpl(names.cast()).cast());
        (*rte).inFromCl = true;
        rte
    }
}

/// Parses and analyses one SELECT the gate wrote.
///
/// # Safety
/// Inside a transaction.
pub(in crate::gate) unsafe fn parse(text: &str) -> *mut pg_sys::Query {
    let text = CString::new(text).expect("no NUL in the gate's SQL");
    // SAFETY: the caller's contract; raw_parser returns a List of RawStmt (one here), which
    // parse_analyze_fixedparams analyses into a palloc'd Query.
    unsafe {
        let source = pg_sys::pstrdup(text.as_ptr());
        let statements = pg_sys::raw_parser(source, pg_sys::RawParseMode::RAW_PARSE_DEFAULT);
        let raw = list_items::<pg_sys::RawStmt>(statements)[0];
        let query = pg_sys::parse_analyze_fixedparams(
            raw,
            source,
            std::ptr::null(),
            0,
            std::ptr::null_mut(),
        );
        crate::versions::flatten_grouping(query);
        query
    }
}
