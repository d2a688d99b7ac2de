//! One query level of an analyst's statement, checked (`check_level`):
//! if it reads a protected table directly, it must be an admitted
//! aggregate: its FROM (`protected_from`, `joins`), what it reads and
//! outputs (`reads_only`, `plain`), its aggregates and keys, then its
//! rewrite per person (`bounding`) and partition selection
//! (`partitions`). `super` walks the levels and raises the refusal.

use super::*;

/// Checks one query level: if it reads a protected table directly, it must
/// be an admitted aggregate.
///
/// # Safety
/// `query` is a live Query.
pub(super) unsafe fn check_level(query: *mut pg_sys::Query, walk: &Walk) -> Result<bool, Refusal> {
    // SAFETY: the caller's contract; RTE and node casts follow their kinds and tags.
    unsafe {
        let rtable = list_items::<pg_sys::RangeTblEntry>((*query).rtable);
        let read: Vec<usize> = rtable
            .iter()
            .enumerate()
            .filter(|(_, rte)| {
                (***rte).rtekind == pg_sys::RTEKind::RTE_RELATION
                    && walk.protected.tables.contains_key(&(***rte).relid)
            })
            .map(|(i, _)| i)
            .collect();
        if read.is_empty() {
            let found = persons::subqueries(query, walk);
            if !found.is_empty() {
                return persons::check(query, walk, &found);
            }
            return Ok(true);
        }
        if walk.explaining {
            return Err(refuse(
                "EXPLAIN shows estimates drawn from the protected data",
                "Run the query itself.",
            ));
        }
        if messages_shown() {
            return Err(messages_refused());
        }
        reads_only(query)?;
        // FROM: tables, inner joins. Protected tables are joined on their
        // privacy unit; public tables freely (bounding undoes any copies).
        // Or the public side of an outer join lists the group keys.
        let listed = public_keys(query, &rtable, &walk.protected)?;
        let (from, persons) = protected_from(query, &rtable, &walk.protected, listed, read.len())?;
        let grouped = !(*query).groupClause.is_null();
        let bounded = from.leaves.len() > 1 || !persons[0].1.one_row || listed.is_some();
        if !(*query).hasAggs && !grouped {
            // dp_count(…) OVER (…) parses as a window function, not an aggregate.
            if (*query).hasWindowFuncs {
                return Err(refuse(
                    "a dpnoise aggregate (or any aggregate) used as a window function (OVER) releases the same persons once per row",
                    "Drop OVER and group instead: SELECT site, dp_count(1.0) FROM visits GROUP BY site.",
                ));
            }
            // A CTE or subquery of raw rows, aggregated above: its
            // conditions belong in the aggregating level.
            if !std::ptr::eq(query, walk.top) {
                return Err(refuse(
                    "a CTE or subquery passes protected rows up without aggregating them",
                    "Put its conditions in the WHERE of the query that aggregates: SELECT dp_count(1.0) FROM visits WHERE amount > 10. \
                     A plain SELECT of rows in FROM or WITH is taken into that query as written, unless it has a LIMIT, OFFSET, \
                     DISTINCT, window, subquery or volatile output, is MATERIALIZED, LATERAL or a view, or sits on the nullable \
                     side of an outer join. Otherwise a CTE or subquery may read protected rows only grouped by the privacy unit \
                     (one row per person, aggregated above) or as dpnoise aggregates (post-processed above).",
                ));
            }
            return Err(refuse(
                "rows of a protected table cannot be read, only dpnoise aggregates of them",
                SHAPE,
            ));
        }
        plain(query)?;
        let group_keys = key_expressions(query);
        let mut check = Leakproof {
            allowed: &walk.protected.allowed,
            rows: true,
            keys: &group_keys,
            per_person: false,
        };
        for qual in &from.quals {
            check.node(*qual)?;
        }
        // HAVING is evaluated on every group, shown or not: as WHERE.
        check.node((*query).havingQual)?;
        // A group key is evaluated on every row, as WHERE is; any other
        // output holds protected values only inside dpnoise aggregates.
        let keys: HashSet<u32> = list_items::<pg_sys::SortGroupClause>((*query).groupClause)
            .iter()
            .map(|clause| (**clause).tleSortGroupRef)
            .collect();
        for entry in list_items::<pg_sys::TargetEntry>((*query).targetList) {
            check.rows = keys.contains(&(*entry).ressortgroupref);
            check.node((*entry).expr.cast())?;
        }
        if bounded {
            persons::grouped_by_unit(query, &rtable, &persons)?;
        }
        if grouped {
            keys::canonical(query, &walk.protected.forms)?;
        }
        // Or the policy lists every key's values (read as the level shows
        // them, in their normal forms).
        let listing = match listed {
            Some(join) => Some(bounding::Listing::Join(join)),
            // (FILTER is the policy's on a table of one row per person,
            // refused on several: the rewrite's own filter would replace it.)
            None if (*query).hasAggs && !filtered(query) => {
                super::policy::listed_keys(query, &rtable, &key_expressions(query), &walk.protected)
                    .map(bounding::Listing::Values)
            }
            None => None,
        };
        if grouped && listing.is_none() {
            // k as the bounding will set it (a table of one row per person: 1).
            let groups = if bounded {
                max_groups(persons.iter().map(|(_, t)| t.max_groups).min().unwrap_or(1))
            } else {
                1
            };
            select_partitions(query, &walk.protected, groups.max(1) as u32, bounded)?;
        }
        // Vouched for: the analyst needs no SELECT privilege on the tables.
        for (leaf, _) in &persons {
            crate::versions::waive_privileges(
                crate::versions::query_permissions(query),
                rtable[*leaf as usize - 1],
            );
        }
        if !bounded && listing.is_none() {
            return Ok(true);
        }
        if bounded {
            unbounded_aggregates(query)?;
        }
        let max_groups = max_groups(persons.iter().map(|(_, t)| t.max_groups).min().unwrap_or(1));
        let unit = (persons[0].0, persons[0].1.unit);
        bounding::bound(
            query,
            &walk.protected,
            &bounding::Bounds {
                unit,
                max_groups,
                listed: listing,
                pass: !bounded,
            },
        )?;
        // The levels written above are the gate's own: not walked again.
        Ok(false)
    }
}

/// Refuses a level over protected rows that writes or locks them.
///
/// # Safety
/// `query` is a live Query.
pub(super) unsafe fn reads_only(query: *mut pg_sys::Query) -> Checked {
    // SAFETY: the caller's contract.
    unsafe {
        if (*query).commandType != pg_sys::CmdType::CMD_SELECT || (*query).resultRelation != 0 {
            return Err(refuse(
                "analysts cannot write protected tables",
                "Ask the DBA.",
            ));
        }
        if !(*query).rowMarks.is_null() {
            return Err(refuse("FOR UPDATE/SHARE locks protected rows", SHAPE));
        }
        Ok(())
    }
}

/// Refuses what no level over protected rows may hold: grouping sets,
/// window and set-returning functions, DISTINCT, subqueries, CTEs and set
/// operations at the same level.
///
/// # Safety
/// `query` is a live Query.
pub(super) unsafe fn plain(query: *mut pg_sys::Query) -> Checked {
    // SAFETY: the caller's contract.
    unsafe {
        if !(*query).groupingSets.is_null() {
            return Err(refuse(
                "GROUPING SETS, ROLLUP and CUBE are not admitted yet",
                "Run one GROUP BY query per grouping set.",
            ));
        }
        if (*query).hasWindowFuncs || (*query).hasTargetSRFs || !(*query).distinctClause.is_null() {
            return Err(refuse("window functions, set-returning functions and DISTINCT are not admitted over protected rows", SHAPE));
        }
        if (*query).hasSubLinks
            || !(*query).cteList.is_null()
            || (*query).hasRecursive
            || (*query).hasModifyingCTE
        {
            return Err(refuse(
                "subqueries cannot be mixed with protected rows at the same query level",
                SUBQUERY,
            ));
        }
        if !(*query).setOperations.is_null() {
            return Err(refuse(
                "UNION, INTERSECT and EXCEPT are not admitted over protected rows",
                SHAPE,
            ));
        }
        Ok(())
    }
}

/// The FROM of a level that reads `read` protected tables directly: its
/// items (`FromItems`) and its protected tables (range table index,
/// table), each joined to the others on its privacy unit, at most one of
/// them with several rows per person.
///
/// # Safety
/// `query` is a live Query whose range table is `rtable`.
pub(super) unsafe fn protected_from<'a>(
    query: *mut pg_sys::Query,
    rtable: &[*mut pg_sys::RangeTblEntry],
    protected: &'a Protected,
    listed: Option<*mut pg_sys::JoinExpr>,
    read: usize,
) -> Result<(FromItems<'a>, Vec<(i32, Table)>), Refusal> {
    // SAFETY: the caller's contract; RTE and node casts follow their kinds and tags.
    unsafe {
        let mut from = FromItems {
            leaves: Vec::new(),
            quals: vec![(*(*query).jointree).quals],
            listed,
            protected,
        };
        for item in list_items::<pg_sys::Node>((*(*query).jointree).fromlist) {
            from.item(item, rtable)?;
        }
        let mut persons: Vec<(i32, Table)> = Vec::new();
        for &leaf in &from.leaves {
            let rte = rtable[leaf as usize - 1];
            if let Some(table) = protected.tables.get(&(*rte).relid) {
                if !(*rte).tablesample.is_null() {
                    return Err(refuse(
                        "TABLESAMPLE picks protected rows by their place on disk",
                        "Drop TABLESAMPLE: the aggregates read every row anyway; to look at part of the table, filter on its columns (WHERE person_id % 10 = 0).",
                    ));
                }
                if table.unit == 0 {
                    return Err(refuse(
                        "this protected table's privacy unit column is gone",
                        "Ask the DBA to protect it again.",
                    ));
                }
                persons.push((leaf, *table));
            }
        }
        if persons.len() != read || persons.is_empty() {
            return Err(refuse(
                "a protected table must be a FROM item of its query level",
                SHAPE,
            ));
        }
        if persons.len() > 1 {
            joined_on_unit(rtable, &persons, &from.quals)?;
        }
        // A join of two tables that may hold several rows per person gives
        // a person the product of their rows: one person could then make
        // the statement run as long as they like (n^k rows for k copies).
        if persons.iter().filter(|(_, table)| !table.one_row).count() > 1 {
            return Err(refuse(
                "two tables with several rows per person (or one of them twice) are joined: a person's rows would multiply",
                "Join a table with several rows per person only with tables of one row per person and public tables; query each such table apart.",
            ));
        }
        Ok((from, persons))
    }
}

/// Refuses, on a level the gate bounds (several rows per person, or a
/// join), an aggregate the bounding rewrite cannot combine per person
/// (dp_var, dp_stddev and the quantiles: `functions::Function::bounded`).
///
/// # Safety
/// `query` is a live Query of an analyst's statement, before planning.
unsafe fn unbounded_aggregates(query: *mut pg_sys::Query) -> Result<(), Refusal> {
    // SAFETY: the caller's contract; Aggref nodes from the query's own lists.
    unsafe {
        let mut found = Vec::new();
        bounding::collect_aggregates((*query).targetList.cast(), &mut found);
        bounding::collect_aggregates((*query).havingQual, &mut found);
        for aggref in found {
            if let Some(f) = crate::functions::releasing((*aggref).aggfnoid).filter(|f| !f.bounded)
            {
                return Err(refuse(
                    &format!("{} is admitted only over a table of one row per person, not joined", f.name),
                    "Query a protected table declared with one row per person (dp_protect), or use dp_avg, which the gate bounds per person.",
                ));
            }
        }
        Ok(())
    }
}

/// The expressions of `query`'s GROUP BY keys, in its target list's order.
///
/// # Safety
/// `query` is a live Query.
unsafe fn key_expressions(query: *mut pg_sys::Query) -> Vec<*mut pg_sys::Node> {
    // SAFETY: the caller's contract.
    unsafe {
        list_items::<pg_sys::TargetEntry>((*query).targetList)
            .into_iter()
            .filter(|entry| {
                (**entry).ressortgroupref != 0 && grouped_by(query, (**entry).ressortgroupref)
            })
            .map(|entry| (*entry).expr.cast())
            .collect()
    }
}

/// Whether an aggregate of `query` has a FILTER.
///
/// # Safety
/// `query` is a live Query.
unsafe fn filtered(query: *mut pg_sys::Query) -> bool {
    // SAFETY: the caller's contract; Aggref nodes from the query's own lists.
    unsafe {
        let mut found = Vec::new();
        bounding::collect_aggregates((*query).targetList.cast(), &mut found);
        bounding::collect_aggregates((*query).havingQual, &mut found);
        found.iter().any(|a| !(**a).aggfilter.is_null())
    }
}

/// Whether the sort/group reference `tleref` names a GROUP BY key of `query`.
///
/// # Safety
/// `query` is a live Query.
pub(super) unsafe fn grouped_by(query: *mut pg_sys::Query, tleref: u32) -> bool {
    // SAFETY: the caller's contract.
    unsafe {
        list_items::<pg_sys::SortGroupClause>((*query).groupClause)
            .iter()
            .any(|c| (**c).tleSortGroupRef == tleref)
    }
}
