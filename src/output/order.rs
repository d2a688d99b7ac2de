//! The order in which an analyst's rows come: a function of the rows.
//!
//! Where a statement does not order its rows fully, PostgreSQL hands them
//! out in the order its plan makes them: a hash table's, a sort's on other
//! keys, a scan's. Which plan runs follows the analyst's own settings, and
//! a hash table's order can follow the order in which it met the rows (two
//! keys in one bucket stay in the order they came). The order of the rows,
//! and which rows a LIMIT keeps, would then tell the plan, and perhaps the
//! order of protected rows; a repeat answered from the release store
//! (sorted as the plan above it expects) would come in another order than
//! the first run.
//!
//! So each level whose order an analyst observes (the statement's own,
//! every subquery with LIMIT or OFFSET, whose rows are those its order puts
//! first, and every subquery whose rows are releases, which the level above
//! meets in the order they come: a window's ties, a float sum's rounding)
//! is ordered by its own ORDER BY, then by each of its columns in
//! turn, in the column type's default order, NULLs last, and, for a type
//! whose equal values can differ in bytes (`-0` and `0`, `0.0` and
//! `0.00`), by their binary form: rows that differ come in one order under
//! every plan, and rows that do not cannot be told apart. A column whose
//! type has no default order (json, point, a record) breaks no tie. A level above the releases that reorders them (a join,
//! a hashed grouping) passes them on in its own plan's order
//! (docs/analysts.md, "Row order").

use pgrx::pg_sys;

/// Orders every level of `query` whose row order an analyst observes.
///
/// # Safety
/// `query` is the live top-level Query of an analyst's statement, before planning.
pub unsafe fn order_rows(query: *mut pg_sys::Query) {
    // SAFETY: the caller's contract; each level is a live Query of the tree.
    unsafe {
        if (*query).commandType != pg_sys::CmdType::CMD_SELECT || !(*query).utilityStmt.is_null() {
            return;
        }
        super::each_level(query, &mut |level, top| {
            if top
                || (*level).commandType == pg_sys::CmdType::CMD_SELECT
                    && (!(*level).limitCount.is_null()
                        || !(*level).limitOffset.is_null()
                        || releases((*level).targetList.cast()))
            {
                break_ties(level);
            }
        });
    }
}

/// Whether `node` (a level's target list) holds a dpnoise aggregate of its
/// own level: the level's rows are releases, which the level above reads in
/// the order they come (a window's ties, a float sum's rounding).
///
/// # Safety
/// `node` is null or a live expression tree; inside a transaction.
pub(super) unsafe fn releases(node: *mut pg_sys::Node) -> bool {
    /// # Safety
    /// Called by the expression walker with live nodes and the extension's OID.
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn find(
        node: *mut pg_sys::Node,
        context: *mut std::ffi::c_void,
    ) -> bool {
        // SAFETY: the caller's contract; casts follow node tags; a sublink's query is another level.
        unsafe {
            if node.is_null() || (*node).type_ == pg_sys::NodeTag::T_Query {
                return false;
            }
            if (*node).type_ == pg_sys::NodeTag::T_Aggref {
                let aggref = node as *mut pg_sys::Aggref;
                let extension = *(context as *const pg_sys::Oid);
                return (*aggref).agglevelsup == 0
                    && pg_sys::getExtensionOfObject(
                        pg_sys::ProcedureRelationId,
                        (*aggref).aggfnoid,
                    ) == extension;
            }
            pg_sys::expression_tree_walker(node, Some(find), context)
        }
    }
    // SAFETY: the caller's contract.
    unsafe {
        let mut extension = crate::extensions::oid(crate::extensions::Extension::Dpnoise);
        find(node, (&raw mut extension).cast())
    }
}

/// Appends to `level`'s ORDER BY each of its columns it does not order by
/// yet, whose type has a default order; then, for each column whose equal
/// values can differ in bytes (`-0` and `0`, `0.0` and `0.00`: not an
/// image, `canonical::form`), its binary form (the type's send function,
/// a bytea), so that equal values shown differently come in one order too.
///
/// # Safety
/// `level` is a live SELECT Query.
unsafe fn break_ties(level: *mut pg_sys::Query) {
    // SAFETY: the caller's contract; the target list is a List of TargetEntry, the sort clause
    // of SortGroupClause.
    unsafe {
        let entries: Vec<*mut pg_sys::TargetEntry> =
            crate::pg_list::list_nodes((*level).targetList)
                .into_iter()
                .map(|e| e.cast())
                .collect();
        let ordered: Vec<u32> = crate::pg_list::list_nodes((*level).sortClause)
            .into_iter()
            .map(|c| (*(c as *mut pg_sys::SortGroupClause)).tleSortGroupRef)
            .collect();
        let mut next = entries
            .iter()
            .map(|e| (**e).ressortgroupref)
            .max()
            .unwrap_or(0);
        let mut bytes = Vec::new();
        for entry in entries {
            if (*entry).resjunk {
                continue;
            }
            let expr = (*entry).expr as *mut pg_sys::Node;
            if pg_sys::expression_returns_set(expr) {
                continue;
            }
            let type_ = pg_sys::exprType(expr);
            let Some((sortop, eqop)) = default_order(type_) else {
                continue;
            };
            if (*entry).ressortgroupref == 0 || !ordered.contains(&(*entry).ressortgroupref) {
                if (*entry).ressortgroupref == 0 {
                    next += 1;
                    (*entry).ressortgroupref = next;
                }
                sort_by(level, (*entry).ressortgroupref, sortop, eqop);
            }
            // A volatile column (a release per row: dp_laplace) is not
            // copied into a junk column: the copy would be another call.
            if super::canonical::form(type_, pg_sys::exprCollation(expr))
                != super::canonical::Form::Image
                && !pg_sys::contain_volatile_functions(expr)
            {
                bytes.push(expr);
            }
        }
        // A junk column may not be sorted under DISTINCT; and at a level
        // that aggregates, a copy of a release in a junk column would be
        // another call (and the send function runs in the aggregate node,
        // among protected rows, where the plan check admits only LEAKPROOF
        // functions): there, equal values shown differently keep the
        // plan's order (docs/analysts.md, "Row order").
        // Nor in a set operation's own target list (PostgreSQL implements
        // none there).
        if !(*level).distinctClause.is_null()
            || !(*level).setOperations.is_null()
            || (*level).hasAggs
            || (*level).hasWindowFuncs
            || !(*level).groupClause.is_null()
        {
            return;
        }
        let (sortop, eqop) = default_order(pg_sys::BYTEAOID).expect("bytea has a default order");
        for expr in bytes {
            let mut send = pg_sys::InvalidOid;
            let mut varlena = false;
            pg_sys::getTypeBinaryOutputInfo(pg_sys::exprType(expr), &mut send, &mut varlena);
            let call = pg_sys::makeFuncExpr(
                send,
                pg_sys::BYTEAOID,
                pg_sys::lappend(std::ptr::null_mut(), pg_sys::copyObjectImpl(expr.cast())),
                pg_sys::InvalidOid,
                pg_sys::InvalidOid,
                pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
            );
            let resno = crate::pg_list::list_nodes((*level).targetList).len() as i16 + 1;
            let junk = pg_sys::makeTargetEntry(call.cast(), resno, std::ptr::null_mut(), true);
            next += 1;
            (*junk).ressortgroupref = next;
            (*level).targetList = pg_sys::lappend((*level).targetList, junk.cast());
            sort_by(level, next, sortop, eqop);
        }
    }
}

/// Appends to `level`'s ORDER BY its column of reference `reference`, by
/// `sortop`, NULLs last.
///
/// # Safety
/// `level` is a live Query with a target entry of that reference.
unsafe fn sort_by(
    level: *mut pg_sys::Query,
    reference: u32,
    sortop: pg_sys::Oid,
    eqop: pg_sys::Oid,
) {
    // SAFETY: the caller's contract; the clause is palloc'd as the parser makes one.
    unsafe {
        let clause = pg_sys::palloc0(std::mem::size_of::<pg_sys::SortGroupClause>())
            as *mut pg_sys::SortGroupClause;
        (*clause).type_ = pg_sys::NodeTag::T_SortGroupClause;
        (*clause).tleSortGroupRef = reference;
        (*clause).eqop = eqop;
        (*clause).sortop = sortop;
        (*clause).nulls_first = false;
        (*clause).hashable = false;
        (*level).sortClause = pg_sys::lappend((*level).sortClause, clause.cast());
    }
}

/// The default ordering and equality operators of `type_` (None: no
/// default order, or a record or composite, whose comparison can fail on
/// a column).
///
/// # Safety
/// Inside a transaction.
unsafe fn default_order(type_: pg_sys::Oid) -> Option<(pg_sys::Oid, pg_sys::Oid)> {
    // SAFETY: the caller's contract; the type cache entry lives for the session.
    unsafe {
        if type_ == pg_sys::RECORDOID || pg_sys::type_is_rowtype(type_) {
            return None;
        }
        let cache = pg_sys::lookup_type_cache(
            type_,
            (pg_sys::TYPECACHE_LT_OPR | pg_sys::TYPECACHE_EQ_OPR) as i32,
        );
        let (lt, eq) = ((*cache).lt_opr, (*cache).eq_opr);
        (lt != pg_sys::InvalidOid && eq != pg_sys::InvalidOid).then_some((lt, eq))
    }
}
