//! Per-person subqueries: a level that reads protected tables grouped by
//! their privacy unit, with built-in aggregates that cannot fail, feeding
//! a level of dpnoise aggregates.
//!
//! ```sql
//! SELECT dp_avg(spent, 1.0, 0, 500) FROM
//!   (SELECT person_id, count(*) AS visits, sum(amount) AS spent FROM visits GROUP BY person_id) p
//! WHERE visits > 3
//! ```
//!
//! The inner level gives one row per person, as a table declared with one
//! row per person: adding or removing a person adds or removes one row of
//! the outer level, whose dpnoise aggregates clamp it to the bounds the
//! analyst gives them. The outer level is then checked as a level over
//! such a table (no bounding: a person is in one group; group keys pass
//! partition selection), and the inner level's output reaches the analyst
//! only through it. The inner level is checked as an admitted level's rows
//! are (FROM, WHERE, HAVING: total and LEAKPROOF), with the built-in
//! aggregates of `TOTAL_AGGREGATES` instead of dpnoise's; sums and averages
//! of float8 run in numeric, where they cannot overflow.

use super::leakproof::{Leakproof, PER_PERSON};
use super::{list_items, refuse, Checked, Refusal, Walk};
use pgrx::pg_sys;
use pgrx::prelude::*;

/// Sums and averages of floats, which raise on overflow ("value out of
/// range": a 1-bit oracle on one person's values), run in numeric: the
/// aggregate, its numeric counterpart, and the cast of its argument.
const IN_NUMERIC: &[(u32, u32, u32)] = &[
    (2111, 2114, 1743), // sum(float8): sum(numeric(x))
    (2105, 2103, 1743), // avg(float8): avg(numeric(x))
    (2104, 2103, 1742), // avg(float4): avg(numeric(x))
];

/// dpnoise's total numeric to float8 cast (`dp_total_float8_numeric`), by
/// the built-in it replaces.
const FLOAT8_NUMERIC: u32 = 1746;

/// Sums, averages, minima and maxima of numeric (sum, avg, max, min), which
/// read their argument through `dp_total_numeric_capped`: NULL for a value
/// spanning more digits than the total forms compute with. A sum of such
/// values could overflow the numeric format (9e131071 twice: "value
/// overflows numeric format", a 1-bit oracle found by an attack), and each
/// addition or comparison costs the length of its operands.
const CAPPED: &[u32] = &[2114, 2103, 2130, 2146];

/// The per-person subqueries in the FROM of `query`: subqueries that read
/// a protected table directly, aggregate or group, and hold no dpnoise
/// aggregate (range table indexes).
///
/// # Safety
/// `query` is a live Query.
pub(super) unsafe fn subqueries(query: *mut pg_sys::Query, walk: &Walk) -> Vec<i32> {
    // SAFETY: the caller's contract; RTE casts follow their kinds.
    unsafe {
        let mut found = Vec::new();
        for (i, rte) in list_items::<pg_sys::RangeTblEntry>((*query).rtable)
            .into_iter()
            .enumerate()
        {
            if (*rte).rtekind != pg_sys::RTEKind::RTE_SUBQUERY || (*rte).subquery.is_null() {
                continue;
            }
            let sub = (*rte).subquery;
            let reads = list_items::<pg_sys::RangeTblEntry>((*sub).rtable)
                .into_iter()
                .any(|inner| {
                    (*inner).rtekind == pg_sys::RTEKind::RTE_RELATION
                        && walk.protected.tables.contains_key(&(*inner).relid)
                });
            let mut aggregates = Vec::new();
            super::bounding::collect_aggregates((*sub).targetList.cast(), &mut aggregates);
            super::bounding::collect_aggregates((*sub).havingQual, &mut aggregates);
            let grouped = (*sub).hasAggs || !(*sub).groupClause.is_null();
            if reads
                && grouped
                && !aggregates
                    .iter()
                    .any(|a| crate::functions::releasing((**a).aggfnoid).is_some())
            {
                found.push(i as i32 + 1);
            }
        }
        found
    }
}

/// Checks a level of dpnoise aggregates over a per-person subquery (the
/// range table entries `found`), and the subquery. Returns whether the
/// walk goes below (it does not: both levels are checked here).
///
/// # Safety
/// `query` is a live Query of an analyst's statement, before planning.
pub(super) unsafe fn check(
    query: *mut pg_sys::Query,
    walk: &Walk,
    found: &[i32],
) -> Result<bool, Refusal> {
    // SAFETY: the caller's contract; RTE and node casts follow their kinds and tags.
    unsafe {
        if walk.explaining {
            return Err(refuse(
                "EXPLAIN shows estimates drawn from the protected data",
                "Run the query itself.",
            ));
        }
        super::reads_only(query)?;
        let items = list_items::<pg_sys::Node>((*(*query).jointree).fromlist);
        let alone = match (found, &items[..]) {
            ([index], [item]) => {
                (**item).type_ == pg_sys::NodeTag::T_RangeTblRef
                    && (*(*item as *mut pg_sys::RangeTblRef)).rtindex == *index
            }
            _ => false,
        };
        let rte = list_items::<pg_sys::RangeTblEntry>((*query).rtable)[found[0] as usize - 1];
        if !alone || (*rte).lateral {
            return Err(refuse(
                "a per-person subquery must be the only FROM item of the level that summarises it (no join, no LATERAL)",
                "Join public tables, and protected tables on the privacy unit, inside the per-person subquery.",
            ));
        }
        let unit_columns = inner(&(*rte).subquery, walk, (query, found[0]))?;
        let grouped = !(*query).groupClause.is_null();
        if !(*query).hasAggs && !grouped {
            return Err(refuse(
                "the rows of a per-person subquery cannot be read, only dpnoise aggregates of them",
                PER_PERSON,
            ));
        }
        super::plain(query)?;
        let group_keys: Vec<*mut pg_sys::Node> =
            list_items::<pg_sys::TargetEntry>((*query).targetList)
                .into_iter()
                .filter(|entry| {
                    (**entry).ressortgroupref != 0
                        && super::grouped_by(query, (**entry).ressortgroupref)
                })
                .map(|entry| (*entry).expr.cast())
                .collect();
        for key in &group_keys {
            let columns: Vec<(i32, i16)> = unit_columns.iter().map(|c| (found[0], *c)).collect();
            if reads_columns(*key, &columns) {
                return Err(refuse(
                    "a GROUP BY key over a per-person subquery reads the privacy unit: each group would be one person",
                    "Group by per-person values (counts, sums, a first date), not by the person.",
                ));
            }
        }
        // The subquery's columns are the protected values here: in WHERE,
        // HAVING, group keys and dpnoise aggregates only.
        let mut check = Leakproof {
            allowed: &walk.protected.allowed,
            rows: true,
            keys: &group_keys,
            per_person: false,
        };
        check.node((*(*query).jointree).quals)?;
        check.node((*query).havingQual)?;
        for entry in list_items::<pg_sys::TargetEntry>((*query).targetList) {
            check.rows =
                (*entry).ressortgroupref != 0 && super::grouped_by(query, (*entry).ressortgroupref);
            check.node((*entry).expr.cast())?;
        }
        if grouped {
            super::keys::canonical(query, &walk.protected.forms)?;
            super::select_partitions(query, &walk.protected, 1, false)?;
        }
        Ok(false)
    }
}

/// Refuses a level bounded per person (several rows per person, or a join)
/// grouped by the privacy unit of one of its protected tables (`persons`:
/// range table index, table): each group would be one person, whom
/// private partition selection shows with probability δ_s at most, so the
/// statement would be charged for an answer that is always empty. The
/// per-person subquery is what answers per-person questions. (On one table
/// of one row per person, gate.sql shows such groups hidden.)
///
/// # Safety
/// `query` is a live Query of an analyst's statement before planning, whose
/// range table is `rtable`.
pub(super) unsafe fn grouped_by_unit(
    query: *mut pg_sys::Query,
    rtable: &[*mut pg_sys::RangeTblEntry],
    persons: &[(i32, super::catalog::Table)],
) -> Checked {
    // SAFETY: the caller's contract; node casts follow their tags; the key is flattened on a copy.
    unsafe {
        for group in list_items::<pg_sys::SortGroupClause>((*query).groupClause) {
            let entries = list_items::<pg_sys::TargetEntry>((*query).targetList);
            let Some(entry) = entries
                .iter()
                .find(|e| (***e).ressortgroupref == (*group).tleSortGroupRef)
            else {
                continue;
            };
            let mut node = crate::versions::flatten_join_alias_vars(
                query,
                pg_sys::copyObjectImpl((**entry).expr.cast()).cast(),
            );
            // A cast of the unit still makes a group of each person.
            loop {
                node = match (*node).type_ {
                    pg_sys::NodeTag::T_RelabelType => {
                        (*(node as *mut pg_sys::RelabelType)).arg.cast()
                    }
                    pg_sys::NodeTag::T_CoerceViaIO => {
                        (*(node as *mut pg_sys::CoerceViaIO)).arg.cast()
                    }
                    pg_sys::NodeTag::T_FuncExpr
                        if (*(node as *mut pg_sys::FuncExpr)).funcformat
                            != pg_sys::CoercionForm::COERCE_EXPLICIT_CALL
                            && list_items::<pg_sys::Node>(
                                (*(node as *mut pg_sys::FuncExpr)).args,
                            )
                            .len()
                                == 1 =>
                    {
                        list_items::<pg_sys::Node>((*(node as *mut pg_sys::FuncExpr)).args)[0]
                    }
                    _ => break,
                };
            }
            if (*node).type_ != pg_sys::NodeTag::T_Var {
                continue;
            }
            let var = node as *mut pg_sys::Var;
            let Some((leaf, table)) = persons.iter().find(|(leaf, table)| {
                (*var).varlevelsup == 0
                    && (*var).varno as i32 == *leaf
                    && (*var).varattno == table.unit
            }) else {
                continue;
            };
            let name = pg_sys::get_attname((*rtable[*leaf as usize - 1]).relid, table.unit, true);
            let name = if name.is_null() {
                "the privacy unit".into()
            } else {
                std::ffi::CStr::from_ptr(name).to_string_lossy()
            };
            return Err(refuse(
                &format!(
                    "GROUP BY the privacy unit ({name}) makes each group one person, whom private partition selection \
                     shows only with probability delta: the answer would be empty, and still charged"
                ),
                PER_PERSON,
            ));
        }
        Ok(())
    }
}

/// Checks a per-person subquery: protected tables (joined on their privacy
/// unit) and public ones, grouped by exactly the privacy unit, with the
/// built-in aggregates of `TOTAL_AGGREGATES` and total expressions; no
/// ORDER BY, LIMIT or OFFSET. Runs its float sums in numeric. Returns its
/// output columns (numbers from 1) that read the privacy unit.
///
/// # Safety
/// `sub` is a live Query, a subquery of an analyst's statement before planning.
unsafe fn inner(
    sub: &*mut pg_sys::Query,
    walk: &Walk,
    outer: (*mut pg_sys::Query, i32),
) -> Result<Vec<i16>, Refusal> {
    // SAFETY: the caller's contract; RTE and node casts follow their kinds and tags.
    unsafe {
        let sub = *sub;
        super::reads_only(sub)?;
        let rtable = list_items::<pg_sys::RangeTblEntry>((*sub).rtable);
        let read = rtable
            .iter()
            .filter(|rte| {
                (***rte).rtekind == pg_sys::RTEKind::RTE_RELATION
                    && walk.protected.tables.contains_key(&(***rte).relid)
            })
            .count();
        if super::joins::public_keys(sub, &rtable, &walk.protected)?.is_some() {
            return Err(refuse(
                "an outer join is not admitted in a per-person subquery",
                PER_PERSON,
            ));
        }
        let (from, persons) = super::protected_from(sub, &rtable, &walk.protected, None, read)?;
        super::plain(sub)?;
        if !(*sub).sortClause.is_null()
            || !(*sub).limitCount.is_null()
            || !(*sub).limitOffset.is_null()
        {
            return Err(refuse(
                "ORDER BY, LIMIT and OFFSET are not admitted in a per-person subquery: they would pick persons by their values",
                PER_PERSON,
            ));
        }
        // Grouped by the privacy unit alone: one row per person.
        let groups = list_items::<pg_sys::SortGroupClause>((*sub).groupClause);
        let entries = list_items::<pg_sys::TargetEntry>((*sub).targetList);
        let key = match groups[..] {
            [group] => entries
                .iter()
                .find(|e| (***e).ressortgroupref == (*group).tleSortGroupRef)
                .map(|e| (**e).expr),
            _ => None,
        };
        let is_unit = key.is_some_and(|key| {
            let mut node = crate::versions::flatten_join_alias_vars(
                sub,
                pg_sys::copyObjectImpl(key.cast()).cast(),
            );
            while !node.is_null() && (*node).type_ == pg_sys::NodeTag::T_RelabelType {
                node = (*(node as *mut pg_sys::RelabelType)).arg.cast();
            }
            !node.is_null()
                && (*node).type_ == pg_sys::NodeTag::T_Var
                && persons.iter().any(|(leaf, table)| {
                    let var = node as *mut pg_sys::Var;
                    (*var).varlevelsup == 0
                        && (*var).varno as i32 == *leaf
                        && (*var).varattno == table.unit
                })
        });
        if !is_unit {
            let hint = keyed_form(outer, sub, &rtable, &persons, walk);
            return Err(refuse(
                "a subquery over protected rows that feeds dpnoise aggregates must be grouped by exactly the privacy unit (one row per person)",
                hint.as_deref().unwrap_or(PER_PERSON),
            ));
        }
        in_numeric(sub, &walk.protected.forms)?;
        // Every expression here runs once per row or per person, output
        // included: all of it is checked as rows are.
        let group_keys = [key.expect("checked above").cast::<pg_sys::Node>()];
        let mut check = Leakproof {
            allowed: &walk.protected.allowed,
            rows: true,
            keys: &group_keys,
            per_person: true,
        };
        for qual in &from.quals {
            check.node(*qual)?;
        }
        check.node((*sub).havingQual)?;
        for entry in &entries {
            check.node((**entry).expr.cast())?;
        }
        for (leaf, _) in &persons {
            crate::versions::waive_privileges(
                crate::versions::query_permissions(sub),
                rtable[*leaf as usize - 1],
            );
        }
        // The columns that read the unit outside an aggregate (other
        // columns of a table of one row per person are a person's values).
        let units: Vec<(i32, i16)> = persons
            .iter()
            .map(|(leaf, table)| (*leaf, table.unit))
            .collect();
        Ok(list_items::<pg_sys::TargetEntry>((*sub).targetList)
            .into_iter()
            .filter(|e| {
                let flat = crate::versions::flatten_join_alias_vars(
                    sub,
                    pg_sys::copyObjectImpl((**e).expr.cast()).cast(),
                );
                reads_columns(flat, &units)
            })
            .map(|e| (*e).resno)
            .collect())
    }
}

/// The form that answers a subquery grouped by the privacy unit and other
/// keys (a person's value in each group, then a summary by group: "the
/// mean, per site, of each person's mean there"): the table grouped by
/// those keys itself, whose dpnoise aggregates combine each person's rows
/// in a group as one value (bounded to k groups a person). None when the
/// statement is not that shape: grouped by the unit and at least one
/// column of one protected table, summarised by an outer aggregate whose
/// pair with the person's has a dpnoise form (the average of averages, the
/// sum of sums or of row counts, the least of minima, the greatest of
/// maxima, a count of persons).
///
/// # Safety
/// `sub` is a live Query whose range table is `rtable`; `persons` its
/// protected leaves.
unsafe fn keyed_form(
    outer: (*mut pg_sys::Query, i32),
    sub: *mut pg_sys::Query,
    rtable: &[*mut pg_sys::RangeTblEntry],
    persons: &[(i32, super::catalog::Table)],
    walk: &Walk,
) -> Option<String> {
    // SAFETY: the caller's contract; node casts follow their tags; catalog lookups return palloc'd copies or null.
    unsafe {
        let [(leaf, table)] = persons else {
            return None;
        };
        let relid = (*rtable[*leaf as usize - 1]).relid;
        let name = |attno: i16| -> Option<String> {
            let name = pg_sys::get_attname(relid, attno, true);
            (!name.is_null()).then(|| quoted(name))
        };
        let column = |node: *mut pg_sys::Node| -> Option<i16> {
            let mut node = crate::versions::flatten_join_alias_vars(
                sub,
                pg_sys::copyObjectImpl(node.cast()).cast(),
            );
            // Through implicit casts and the normal forms the gate wrote
            // around text keys (`keys::canonical`).
            while !node.is_null() {
                node = match (*node).type_ {
                    pg_sys::NodeTag::T_RelabelType => {
                        (*(node as *mut pg_sys::RelabelType)).arg.cast()
                    }
                    pg_sys::NodeTag::T_FuncExpr
                        if walk
                            .protected
                            .forms
                            .values()
                            .any(|f| *f == (*(node as *mut pg_sys::FuncExpr)).funcid) =>
                    {
                        let args =
                            list_items::<pg_sys::Node>((*(node as *mut pg_sys::FuncExpr)).args);
                        let [arg] = args[..] else { break };
                        arg
                    }
                    _ => break,
                };
            }
            let var = node as *mut pg_sys::Var;
            (!node.is_null()
                && (*node).type_ == pg_sys::NodeTag::T_Var
                && (*var).varlevelsup == 0
                && (*var).varno as i32 == *leaf)
                .then(|| (*var).varattno)
        };
        let entries = list_items::<pg_sys::TargetEntry>((*sub).targetList);
        let mut keys = Vec::new();
        let mut unit = false;
        for group in list_items::<pg_sys::SortGroupClause>((*sub).groupClause) {
            let entry = entries
                .iter()
                .find(|e| (***e).ressortgroupref == (*group).tleSortGroupRef)?;
            let attno = column((**entry).expr.cast())?;
            if attno == table.unit {
                unit = true;
            } else {
                keys.push(name(attno)?);
            }
        }
        if !unit || keys.is_empty() {
            return None;
        }
        // The first aggregate of the outer level over a person's value (an
        // aggregate of the subquery), as a pair of function names: the
        // dpnoise aggregate that combines and summarises alike.
        let (query, index) = outer;
        let function = |aggref: *mut pg_sys::Aggref| {
            let name = pg_sys::get_func_name((*aggref).aggfnoid);
            (!name.is_null()).then(|| {
                std::ffi::CStr::from_ptr(name)
                    .to_string_lossy()
                    .into_owned()
            })
        };
        // The value an aggregate reads: its first argument (the policy may
        // have written the outer level's plain aggregates as dpnoise's).
        let argument = |aggref: *mut pg_sys::Aggref| {
            let args = list_items::<pg_sys::TargetEntry>((*aggref).args);
            args.first().map(|arg| (**arg).expr.cast::<pg_sys::Node>())
        };
        let epsilon = walk
            .protected
            .policy
            .epsilon
            .get(&relid)
            .copied()
            .unwrap_or(1.0);
        let bounds = |attno: i16| {
            walk.protected
                .policy
                .domains
                .get(&(relid, attno))
                .map_or("lower, upper".to_string(), |(lo, hi)| format!("{lo}, {hi}"))
        };
        let rows = walk.protected.policy.rows.get(&relid).copied();
        let mut found = Vec::new();
        super::bounding::collect_aggregates((*query).targetList.cast(), &mut found);
        let call = found.into_iter().find_map(|aggref| {
            let outer = function(aggref)?;
            let outer = outer.strip_prefix("dp_").unwrap_or(&outer).to_string();
            if outer == "count" && ((*aggref).aggstar || function(aggref)? != outer) {
                return Some(format!("dp_count({epsilon:?})"));
            }
            let mut node = argument(aggref)?;
            // Through casts (the policy reads a count as a float8).
            loop {
                node = match (*node).type_ {
                    pg_sys::NodeTag::T_RelabelType => {
                        (*(node as *mut pg_sys::RelabelType)).arg.cast()
                    }
                    pg_sys::NodeTag::T_FuncExpr
                        if (*(node as *mut pg_sys::FuncExpr)).funcformat
                            != pg_sys::CoercionForm::COERCE_EXPLICIT_CALL =>
                    {
                        let args =
                            list_items::<pg_sys::Node>((*(node as *mut pg_sys::FuncExpr)).args);
                        let [arg] = args[..] else { return None };
                        arg
                    }
                    _ => break,
                };
            }
            let var = node as *mut pg_sys::Var;
            if (*node).type_ != pg_sys::NodeTag::T_Var
                || (*var).varlevelsup != 0
                || (*var).varno as i32 != index
            {
                return None;
            }
            let entry = entries.iter().find(|e| (***e).resno == (*var).varattno)?;
            let value = (**entry).expr.cast::<pg_sys::Node>();
            if (*value).type_ != pg_sys::NodeTag::T_Aggref {
                return None;
            }
            let inner = value as *mut pg_sys::Aggref;
            let person = function(inner)?;
            if person == "count" {
                // The person's rows in the group, summed: at most the
                // policy's rows per person.
                let rows = rows.map_or("upper".to_string(), |r| r.to_string());
                return (outer == "sum").then(|| format!("dp_sum(1, {epsilon:?}, 0, {rows})"));
            }
            let dp = match (outer.as_str(), person.as_str()) {
                ("avg", "avg") => "dp_avg",
                ("sum", "sum") => "dp_sum",
                ("min", "min") => "dp_min",
                ("max", "max") => "dp_max",
                _ => return None,
            };
            let attno = column(argument(inner)?)?;
            // A person's sum in a group spans their rows' values, the
            // policy's rows per person of them at most.
            let bounds = match (dp, walk.protected.policy.domains.get(&(relid, attno)), rows) {
                ("dp_sum", Some((lo, hi)), Some(r)) => {
                    format!("{}, {}", lo * r as f64, hi * r as f64)
                }
                _ => bounds(attno),
            };
            Some(format!("{dp}({}, {epsilon:?}, {bounds})", name(attno)?))
        })?;
        let keys = keys.join(", ");
        let table = quoted(pg_sys::get_rel_name(relid));
        let filter = if (*(*sub).jointree).quals.is_null() {
            ""
        } else {
            " (with the subquery's WHERE)"
        };
        Some(format!(
            "Group the table itself by {keys}: over several rows per person, dpnoise's aggregates combine each \
             person's rows in a group as one value (dp_avg averages the persons' averages, dp_sum sums their sums, \
             dp_count counts the persons, dp_min and dp_max take their least and greatest), each person in k groups \
             at most. Here{filter}: SELECT {keys}, {call} FROM {table} GROUP BY {keys}"
        ))
    }
}

/// An identifier as SQL writes it (quoted where it must be).
///
/// # Safety
/// `name` is null or a live C string.
unsafe fn quoted(name: *const std::ffi::c_char) -> String {
    // SAFETY: the caller's contract; quote_identifier returns its argument or a palloc'd copy.
    unsafe {
        if name.is_null() {
            return String::new();
        }
        std::ffi::CStr::from_ptr(pg_sys::quote_identifier(name))
            .to_string_lossy()
            .into_owned()
    }
}

/// Rewrites the sums and averages of floats of a per-person level
/// (`IN_NUMERIC`) to run in numeric, their result cast back to float8 by
/// dpnoise's total cast (±Infinity beyond float8's range); the numeric
/// aggregates of `CAPPED` read their argument through the capped form.
///
/// # Safety
/// `sub` is a live Query before planning.
unsafe fn in_numeric(
    sub: *mut pg_sys::Query,
    forms: &std::collections::HashMap<String, pg_sys::Oid>,
) -> Checked {
    struct Context {
        cast: pg_sys::Oid,
        capped: pg_sys::Oid,
    }
    /// The aggregate's (only) argument, passed through `function`.
    ///
    /// # Safety
    /// `aggref` is a live Aggref of one argument; `function` takes and returns `result`.
    unsafe fn wrap_argument(
        aggref: *mut pg_sys::Aggref,
        function: pg_sys::Oid,
        result: pg_sys::Oid,
        form: pg_sys::CoercionForm::Type,
    ) {
        // SAFETY: the caller's contract; the new node is palloc'd.
        unsafe {
            let entry = list_items::<pg_sys::TargetEntry>((*aggref).args)[0];
            (*entry).expr = pg_sys::makeFuncExpr(
                function,
                result,
                pg_sys::lappend(std::ptr::null_mut(), (*entry).expr.cast()),
                pg_sys::InvalidOid,
                pg_sys::InvalidOid,
                form,
            )
            .cast();
        }
    }
    /// # Safety
    /// Called by the expression mutator with live nodes and the Context.
    #[pg_guard]
    unsafe extern "C-unwind" fn mutate(
        node: *mut pg_sys::Node,
        context: *mut std::ffi::c_void,
    ) -> *mut pg_sys::Node {
        // SAFETY: the caller's contract; casts follow the node tags; new nodes are palloc'd.
        unsafe {
            if node.is_null() {
                return node;
            }
            if (*node).type_ == pg_sys::NodeTag::T_Aggref {
                let aggref = node as *mut pg_sys::Aggref;
                if CAPPED.contains(&u32::from((*aggref).aggfnoid)) {
                    let copy = pg_sys::copyObjectImpl(aggref.cast()) as *mut pg_sys::Aggref;
                    let capped = (*(context as *mut Context)).capped;
                    wrap_argument(
                        copy,
                        capped,
                        pg_sys::NUMERICOID,
                        pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
                    );
                    return copy.cast();
                }
                let Some(&(_, numeric, to_numeric)) = IN_NUMERIC
                    .iter()
                    .find(|(f, _, _)| *f == u32::from((*aggref).aggfnoid))
                else {
                    return node;
                };
                let copy = pg_sys::copyObjectImpl(aggref.cast()) as *mut pg_sys::Aggref;
                (*copy).aggfnoid = pg_sys::Oid::from(numeric);
                (*copy).aggtype = pg_sys::NUMERICOID;
                (*(*(*copy).aggargtypes).elements).oid_value = pg_sys::NUMERICOID;
                wrap_argument(
                    copy,
                    pg_sys::Oid::from(to_numeric),
                    pg_sys::NUMERICOID,
                    pg_sys::CoercionForm::COERCE_EXPLICIT_CAST,
                );
                let cast = (*(context as *mut Context)).cast;
                return pg_sys::makeFuncExpr(
                    cast,
                    pg_sys::FLOAT8OID,
                    pg_sys::lappend(std::ptr::null_mut(), copy.cast()),
                    pg_sys::InvalidOid,
                    pg_sys::InvalidOid,
                    pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
                )
                .cast();
            }
            crate::versions::expression_tree_mutator(node, mutate, context)
        }
    }
    let substitutes = super::substitute::resolve(forms);
    let (Some(&cast), Some(&capped)) = (
        substitutes.get(&pg_sys::Oid::from(FLOAT8_NUMERIC)),
        forms.get("dp_total_numeric_capped"),
    ) else {
        return Err(refuse(
            "dpnoise's total forms are missing",
            "Ask the DBA to update dpnoise.",
        ));
    };
    let mut context = Context { cast, capped };
    // SAFETY: the caller's contract; each output expression and HAVING is replaced by its mutated copy.
    unsafe {
        let context = (&raw mut context).cast();
        for entry in list_items::<pg_sys::TargetEntry>((*sub).targetList) {
            (*entry).expr = mutate((*entry).expr.cast(), context).cast();
        }
        (*sub).havingQual = mutate((*sub).havingQual, context);
    }
    Ok(())
}

/// Whether `node` reads one of `columns` (range table index, column) of
/// its level outside an aggregate.
///
/// # Safety
/// `node` is a live expression tree.
unsafe fn reads_columns(node: *mut pg_sys::Node, columns: &[(i32, i16)]) -> bool {
    /// # Safety
    /// Called by `expression_tree_walker` with live nodes and the columns.
    #[pg_guard]
    unsafe extern "C-unwind" fn find(
        node: *mut pg_sys::Node,
        context: *mut std::ffi::c_void,
    ) -> bool {
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            if node.is_null() || (*node).type_ == pg_sys::NodeTag::T_Aggref {
                return false;
            }
            if (*node).type_ == pg_sys::NodeTag::T_Var {
                let var = node as *mut pg_sys::Var;
                let columns = &*(context as *const &[(i32, i16)]);
                return (*var).varlevelsup == 0
                    && columns.contains(&((*var).varno as i32, (*var).varattno));
            }
            pg_sys::expression_tree_walker(node, Some(find), context)
        }
    }
    let mut columns = columns;
    // SAFETY: the caller's contract; the walk only reads.
    unsafe { find(node, (&raw mut columns).cast()) }
}
