//! Repeats answered from the store, reading no protected row.
//!
//! Each Agg node of a plan whose releases are all identified has an
//! answer key (`answer_key`): its releases' identities and its output's
//! shape (what each column computes, with the plan's own numbering of its
//! input replaced by the group keys' labels and the releases by their
//! identities), so sorted, hashed and parallel plans of one query level
//! share it. Such a node runs to its end and its output rows are kept
//! (`record`: `store::keep`). When a statement starts, every Agg node whose
//! answer is stored is replaced, in a copy of the plan, by a scan of the
//! stored rows (`serve`), sorted as a sorted aggregation hands them out
//! (`order`): nothing below it is initialised or read, and its releases
//! are free. A release that runs is charged, even if paid before:
//! a repeat is free only when it reads no protected row, so that its run
//! time tells nothing that the first, charged, run did not.

use super::identity;
use super::store;
use crate::pg_list::list_nodes;
use pgrx::pg_sys;
use std::ffi::c_void;

/// What the answer keys of a plan's Agg nodes are made of: its marked
/// calls' identities and GROUP BY items (in their canonical order), by
/// marker number, and the secret key.
pub struct Calls<'a> {
    pub identities: &'a [Option<[u8; 32]>],
    pub items: &'a [Vec<u32>],
    pub secret: &'a [u8; 32],
}

/// An Agg node of a plan with an answer key.
pub(super) struct Found {
    pub plan: *mut pg_sys::Plan,
    pub key: [u8; 32],
}

/// The Agg nodes of `stmt` that have an answer key and run in this
/// process, in their places in the plan (`slot`: the pointer that holds each).
///
/// # Safety
/// `stmt` is a live PlannedStmt; `calls` what its marked calls are.
pub(super) unsafe fn keyed(
    stmt: *mut pg_sys::PlannedStmt,
    calls: &Calls,
) -> Vec<(*mut *mut pg_sys::Plan, Found)> {
    // SAFETY: the caller's contract.
    unsafe {
        agg_slots(stmt)
            .into_iter()
            .filter_map(|slot| {
                let plan = *slot;
                answer_key(plan, calls).map(|key| (slot, Found { plan, key }))
            })
            .collect()
    }
}

/// The slots (the pointers that hold them) of `stmt`'s Agg nodes that run
/// in this process: none below a Gather, whose workers would each run a
/// copy.
///
/// # Safety
/// `stmt` is a live PlannedStmt.
pub(super) unsafe fn agg_slots(stmt: *mut pg_sys::PlannedStmt) -> Vec<*mut *mut pg_sys::Plan> {
    let mut slots: Vec<*mut *mut pg_sys::Plan> = Vec::new();
    // SAFETY: the caller's contract; the plan tree and its subplans List hold live Plan pointers.
    unsafe {
        walk_slots(&raw mut (*stmt).planTree, &mut slots);
        if !(*stmt).subplans.is_null() {
            for i in 0..(*(*stmt).subplans).length as usize {
                walk_slots(
                    (&raw mut (*(*(*stmt).subplans).elements.add(i)).ptr_value).cast(),
                    &mut slots,
                );
            }
        }
    }
    slots
}

/// Collects the slots holding Agg nodes under `slot`, not below a Gather
/// or a CustomScan (Citus's, whose plans are its own).
///
/// # Safety
/// `slot` points to a null or live Plan pointer.
unsafe fn walk_slots(slot: *mut *mut pg_sys::Plan, into: &mut Vec<*mut *mut pg_sys::Plan>) {
    // SAFETY: the caller's contract; casts follow node tags; child Lists hold Plan pointers.
    unsafe {
        let plan = *slot;
        if plan.is_null() {
            return;
        }
        use pg_sys::NodeTag::*;
        match (*plan).type_ {
            T_Gather | T_GatherMerge | T_CustomScan => return,
            T_Agg => into.push(slot),
            T_Append => list_slots((*(plan as *mut pg_sys::Append)).appendplans, into),
            T_MergeAppend => list_slots((*(plan as *mut pg_sys::MergeAppend)).mergeplans, into),
            T_SubqueryScan => walk_slots(
                &raw mut (*(plan as *mut pg_sys::SubqueryScan)).subplan,
                into,
            ),
            _ => {}
        }
        walk_slots(&raw mut (*plan).lefttree, into);
        walk_slots(&raw mut (*plan).righttree, into);
    }
}

/// # Safety
/// `list` is null or a live List of Plan pointers.
unsafe fn list_slots(list: *mut pg_sys::List, into: &mut Vec<*mut *mut pg_sys::Plan>) {
    // SAFETY: the caller's contract; each cell's ptr_value is a Plan pointer.
    unsafe {
        if list.is_null() {
            return;
        }
        for i in 0..(*list).length as usize {
            walk_slots((&raw mut (*(*list).elements.add(i)).ptr_value).cast(), into);
        }
    }
}

/// The answer key of an Agg node whose every aggregate is an identified
/// release (None otherwise): its releases' identities and its output's shape.
///
/// # Safety
/// `plan` is a live Agg plan node of a plan whose marked calls `calls` describes.
unsafe fn answer_key(plan: *mut pg_sys::Plan, calls: &Calls) -> Option<[u8; 32]> {
    // SAFETY: the caller's contract.
    unsafe {
        let agg = plan as *mut pg_sys::Agg;
        if (*agg).aggstrategy == pg_sys::AggStrategy::AGG_MIXED
            || !(*agg).groupingSets.is_null()
            || !(*agg).chain.is_null()
        {
            return None;
        }
        // A node that reads parameters may give another answer each time it
        // is rescanned (a correlated subquery); one with initplans of its own
        // sets them: neither is answered from the store.
        if !(*plan).extParam.is_null() || !(*plan).initPlan.is_null() {
            return None;
        }
        let mut found = Vec::new();
        crate::gate::bounding::collect_aggregates((*plan).targetlist.cast(), &mut found);
        let outputs = found.len();
        crate::gate::bounding::collect_aggregates((*plan).qual.cast(), &mut found);
        let mut ids = Vec::new();
        let mut items: Option<&[u32]> = None;
        for (i, aggref) in found.into_iter().enumerate() {
            if (*aggref).aggsplit & pg_sys::AGGSPLITOP_SKIPFINAL != 0 {
                return None;
            }
            // An aggregate of HAVING that is no release (the gate's test
            // that a group's key is listed, `bool_or`) is part of the
            // level's identity, which holds its HAVING, checked order-free.
            let Some(marker) = super::marker_index(aggref) else {
                if i >= outputs {
                    continue;
                }
                return None;
            };
            ids.push(calls.identities.get(marker).copied().flatten()?);
            items = Some(calls.items.get(marker)?);
        }
        if ids.is_empty() {
            return None;
        }
        ids.sort_unstable();
        ids.dedup();
        let mut context = Shape {
            plan,
            ids: &ids,
            identities: calls.identities,
            items: items?,
        };
        // Each column's expression, not its name or sort reference (a
        // subquery's columns have them, the query's own have others).
        let mut shape = Vec::new();
        for entry in list_nodes((*plan).targetlist) {
            let entry = entry as *mut pg_sys::TargetEntry;
            let copy = pg_sys::copyObjectImpl((*entry).expr.cast()) as *mut pg_sys::Node;
            identity::serialize(label(copy, (&raw mut context).cast()), &mut shape);
            shape.push(u8::from((*entry).resjunk));
        }
        let copy = pg_sys::copyObjectImpl((*plan).qual.cast()) as *mut pg_sys::Node;
        identity::serialize(label(copy, (&raw mut context).cast()), &mut shape);
        let mut parts: Vec<&[u8]> = vec![b"stored answer v2"];
        parts.extend(ids.iter().map(|i| &i[..]));
        parts.push(&shape);
        Some(crate::seal::hmac(calls.secret, &parts))
    }
}

struct Shape<'a> {
    plan: *mut pg_sys::Plan,
    ids: &'a [[u8; 32]],
    identities: &'a [Option<[u8; 32]>],
    /// The node's GROUP BY items in their canonical order.
    items: &'a [u32],
}

/// Label numbers: a release by its identity's place (below this), a group
/// key by its place among the GROUP BY items in their canonical order
/// (from this on: the query's own numbering follows its ORDER BY).
const KEY_LABELS: i32 = 1_000_000;

/// `node` with each release replaced by a label of its identity and each
/// column of the Agg's input by its group key's label, or by what the
/// input computes for it.
///
/// # Safety
/// Called by the tree mutator (or `answer_key`) with a live node and the `Shape`.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn label(
    node: *mut pg_sys::Node,
    context: *mut c_void,
) -> *mut pg_sys::Node {
    // SAFETY: the caller's contract; casts follow node tags.
    unsafe {
        if node.is_null() {
            return node;
        }
        let shape = &*(context as *const Shape);
        match (*node).type_ {
            pg_sys::NodeTag::T_Aggref => {
                let aggref = node as *mut pg_sys::Aggref;
                let id = super::marker_index(aggref)
                    .and_then(|m| shape.identities.get(m).copied().flatten())
                    .and_then(|i| shape.ids.iter().position(|x| *x == i))
                    .map_or(-1, |p| p as i32);
                return param(id, (*aggref).aggtype);
            }
            pg_sys::NodeTag::T_Var
                if (*(node as *mut pg_sys::Var)).varno == pg_sys::OUTER_VAR as i32 =>
            {
                return input_column(
                    (*shape.plan).lefttree,
                    (*(node as *mut pg_sys::Var)).varattno,
                    context,
                );
            }
            _ => {}
        }
        crate::versions::expression_tree_mutator(node, label, context)
    }
}

/// What column `attno` of `input` holds: its group key's label, or (through
/// nodes that pass their input's columns on) what computes it.
///
/// # Safety
/// `input` is null or a live Plan; `context` the `Shape`.
unsafe fn input_column(
    input: *mut pg_sys::Plan,
    attno: i16,
    context: *mut c_void,
) -> *mut pg_sys::Node {
    // SAFETY: the caller's contract; the target list is a List of TargetEntry.
    unsafe {
        let Some(entry) = (!input.is_null())
            .then(|| {
                list_nodes((*input).targetlist)
                    .get(attno as usize - 1)
                    .copied()
            })
            .flatten()
            .map(|e| e as *mut pg_sys::TargetEntry)
        else {
            return param(-2, pg_sys::InvalidOid);
        };
        if (*entry).ressortgroupref != 0 {
            let shape = &*(context as *const Shape);
            let place = shape
                .items
                .iter()
                .position(|i| *i == (*entry).ressortgroupref)
                .map_or(-3, |p| KEY_LABELS + p as i32);
            return param(place, pg_sys::exprType((*entry).expr.cast()));
        }
        let expr = (*entry).expr as *mut pg_sys::Node;
        use pg_sys::NodeTag::*;
        let passes = matches!(
            (*input).type_,
            T_Sort
                | T_IncrementalSort
                | T_Material
                | T_Gather
                | T_GatherMerge
                | T_Unique
                | T_Memoize
        );
        if passes
            && (*expr).type_ == T_Var
            && (*(expr as *mut pg_sys::Var)).varno == pg_sys::OUTER_VAR as i32
        {
            return input_column(
                (*input).lefttree,
                (*(expr as *mut pg_sys::Var)).varattno,
                context,
            );
        }
        label(
            pg_sys::copyObjectImpl(expr.cast()) as *mut pg_sys::Node,
            context,
        )
    }
}

/// A placeholder node carrying a label (a PARAM_EXEC Param numbered `id`).
///
/// # Safety
/// Inside a transaction; palloc'd in the current memory context.
unsafe fn param(id: i32, type_: pg_sys::Oid) -> *mut pg_sys::Node {
    // SAFETY: the node is filled as the parser fills a Param.
    unsafe {
        let p = pg_sys::palloc0(std::mem::size_of::<pg_sys::Param>()) as *mut pg_sys::Param;
        (*p).xpr.type_ = pg_sys::NodeTag::T_Param;
        (*p).paramkind = pg_sys::ParamKind::PARAM_EXEC;
        (*p).paramid = id;
        (*p).paramtype = type_;
        (*p).paramtypmod = -1;
        p.cast()
    }
}

/// Replaces, in a copy of the starting plan, every Agg node whose answer
/// is stored by a scan of it; the query then runs the copy. Returns the
/// marker numbers of the calls that still run (in the plan run).
///
/// # Safety
/// `query` is the live QueryDesc about to be started; `calls` what its
/// marked calls are; inside a transaction.
pub unsafe fn serve(query: *mut pg_sys::QueryDesc, calls: &Calls) {
    // SAFETY: the caller's contract; the copy is made in the current memory context, which the
    // QueryDesc's caller keeps for as long as the query.
    unsafe {
        let stmt = (*query).plannedstmt;
        let answers: Vec<Vec<u8>> = keyed(stmt, calls)
            .iter()
            .filter_map(|(_, f)| store::lookup(&f.key))
            .collect();
        if answers.is_empty() {
            return;
        }
        let copy = pg_sys::copyObjectImpl(stmt.cast()) as *mut pg_sys::PlannedStmt;
        let mut replaced = false;
        for (slot, found) in keyed(copy, calls) {
            if let Some(answer) = store::lookup(&found.key) {
                if let Some(scan) = stored_scan(copy, found.plan, &answer) {
                    *slot = scan;
                    replaced = true;
                }
            }
        }
        if replaced {
            (*query).plannedstmt = copy;
        }
    }
}

/// A scan of a stored answer with the Agg node's output columns: a
/// ValuesScan of its rows (over a VALUES entry added to `stmt`'s range
/// table), or a Result that returns none.
///
/// # Safety
/// `agg` is a live Agg plan node of `stmt`, a live PlannedStmt (a copy this process owns).
unsafe fn stored_scan(
    stmt: *mut pg_sys::PlannedStmt,
    agg: *mut pg_sys::Plan,
    answer: &[u8],
) -> Option<*mut pg_sys::Plan> {
    // SAFETY: the caller's contract; nodes are palloc'd and filled as the planner fills them.
    unsafe {
        let entries: Vec<*mut pg_sys::TargetEntry> = list_nodes((*agg).targetlist)
            .into_iter()
            .map(|e| e.cast())
            .collect();
        let columns: Vec<(pg_sys::Oid, i32, pg_sys::Oid)> = entries
            .iter()
            .map(|e| {
                let expr = (**e).expr as *mut pg_sys::Node;
                (
                    pg_sys::exprType(expr),
                    pg_sys::exprTypmod(expr),
                    pg_sys::exprCollation(expr),
                )
            })
            .collect();
        let rows = decode(answer, &columns)?;
        let scanrelid = if rows.is_empty() {
            0
        } else {
            values_entry(stmt, columns.len())
        };
        let mut targetlist: *mut pg_sys::List = std::ptr::null_mut();
        for (i, (entry, (type_, typmod, collation))) in entries.iter().zip(&columns).enumerate() {
            let expr: *mut pg_sys::Node = if rows.is_empty() {
                pg_sys::makeNullConst(*type_, *typmod, *collation).cast()
            } else {
                pg_sys::makeVar(
                    scanrelid as _,
                    (i + 1) as i16,
                    *type_,
                    *typmod,
                    *collation,
                    0,
                )
                .cast()
            };
            // The Agg's column names and origins (a top-level node's name the statement's columns).
            let tle = pg_sys::makeTargetEntry(
                expr.cast(),
                (i + 1) as i16,
                (**entry).resname,
                (**entry).resjunk,
            );
            (*tle).ressortgroupref = (**entry).ressortgroupref;
            (*tle).resorigtbl = (**entry).resorigtbl;
            (*tle).resorigcol = (**entry).resorigcol;
            targetlist = pg_sys::lappend(targetlist, tle.cast());
        }
        let header = |plan: *mut pg_sys::Plan| {
            (*plan).startup_cost = 0.0;
            (*plan).total_cost = (*agg).total_cost.min(1.0);
            (*plan).plan_rows = rows.len() as f64;
            (*plan).plan_width = (*agg).plan_width;
            (*plan).plan_node_id = (*agg).plan_node_id;
            (*plan).targetlist = targetlist;
        };
        if rows.is_empty() {
            let result =
                pg_sys::palloc0(std::mem::size_of::<pg_sys::Result>()) as *mut pg_sys::Result;
            (*result).plan.type_ = pg_sys::NodeTag::T_Result;
            header(&raw mut (*result).plan);
            let never = pg_sys::makeBoolConst(false, false);
            (*result).resconstantqual = pg_sys::lappend(std::ptr::null_mut(), never.cast()).cast();
            return Some(result.cast());
        }
        let scan =
            pg_sys::palloc0(std::mem::size_of::<pg_sys::ValuesScan>()) as *mut pg_sys::ValuesScan;
        (*scan).scan.plan.type_ = pg_sys::NodeTag::T_ValuesScan;
        header(&raw mut (*scan).scan.plan);
        (*scan).scan.scanrelid = scanrelid as _;
        let mut lists: *mut pg_sys::List = std::ptr::null_mut();
        for row in rows {
            let mut consts: *mut pg_sys::List = std::ptr::null_mut();
            for (value, (type_, typmod, collation)) in row.into_iter().zip(&columns) {
                let c = match value {
                    None => pg_sys::makeNullConst(*type_, *typmod, *collation),
                    Some(datum) => {
                        let mut len: i16 = 0;
                        let mut byval = false;
                        pg_sys::get_typlenbyval(*type_, &mut len, &mut byval);
                        pg_sys::makeConst(
                            *type_, *typmod, *collation, len as i32, datum, false, byval,
                        )
                    }
                };
                consts = pg_sys::lappend(consts, c.cast());
            }
            lists = pg_sys::lappend(lists, consts.cast());
        }
        (*scan).values_lists = lists;
        Some(in_order(agg, scan.cast()))
    }
}

/// `scan` (of a stored answer, with `agg`'s output columns), sorted as
/// `agg` would hand its rows out when it is a sorted aggregation: the
/// nodes above it were planned for that order (`order`).
///
/// # Safety
/// `agg` is a live Agg plan node; `scan` the live scan that replaces it.
unsafe fn in_order(agg: *mut pg_sys::Plan, scan: *mut pg_sys::Plan) -> *mut pg_sys::Plan {
    // SAFETY: the caller's contract; the Sort is palloc'd and filled as setrefs leaves one.
    unsafe {
        let node = agg as *mut pg_sys::Agg;
        if (*node).aggstrategy != pg_sys::AggStrategy::AGG_SORTED {
            return scan;
        }
        let mut keys = super::order::ordering(agg);
        if keys.is_empty() {
            keys = super::order::fallback(node);
        }
        if keys.is_empty() {
            return scan;
        }
        let sort = pg_sys::palloc0(std::mem::size_of::<pg_sys::Sort>()) as *mut pg_sys::Sort;
        (*sort).plan.type_ = pg_sys::NodeTag::T_Sort;
        (*sort).plan.startup_cost = (*scan).total_cost;
        (*sort).plan.total_cost = (*scan).total_cost;
        (*sort).plan.plan_rows = (*scan).plan_rows;
        (*sort).plan.plan_width = (*scan).plan_width;
        (*sort).plan.plan_node_id = (*scan).plan_node_id;
        let mut targetlist: *mut pg_sys::List = std::ptr::null_mut();
        for (i, entry) in list_nodes((*scan).targetlist).into_iter().enumerate() {
            let entry = entry as *mut pg_sys::TargetEntry;
            let expr = (*entry).expr as *mut pg_sys::Node;
            let var = pg_sys::makeVar(
                pg_sys::OUTER_VAR as _,
                (i + 1) as i16,
                pg_sys::exprType(expr),
                pg_sys::exprTypmod(expr),
                pg_sys::exprCollation(expr),
                0,
            );
            let tle = pg_sys::makeTargetEntry(
                var.cast(),
                (i + 1) as i16,
                (*entry).resname,
                (*entry).resjunk,
            );
            (*tle).ressortgroupref = (*entry).ressortgroupref;
            (*tle).resorigtbl = (*entry).resorigtbl;
            (*tle).resorigcol = (*entry).resorigcol;
            targetlist = pg_sys::lappend(targetlist, tle.cast());
        }
        (*sort).plan.targetlist = targetlist;
        (*sort).plan.lefttree = scan;
        let n = keys.len();
        let array = |size: usize| pg_sys::palloc0(size * n);
        (*sort).numCols = n as i32;
        (*sort).sortColIdx = array(std::mem::size_of::<pg_sys::AttrNumber>()).cast();
        (*sort).sortOperators = array(std::mem::size_of::<pg_sys::Oid>()).cast();
        (*sort).collations = array(std::mem::size_of::<pg_sys::Oid>()).cast();
        (*sort).nullsFirst = array(std::mem::size_of::<bool>()).cast();
        for (i, key) in keys.iter().enumerate() {
            *(*sort).sortColIdx.add(i) = key.column;
            *(*sort).sortOperators.add(i) = key.operator;
            *(*sort).collations.add(i) = key.collation;
            *(*sort).nullsFirst.add(i) = key.nulls_first;
        }
        sort.cast()
    }
}

/// Appends to `stmt`'s range table a VALUES entry of `columns` columns
/// (what EXPLAIN names the scan of a stored answer by); its index.
///
/// # Safety
/// `stmt` is a live PlannedStmt this process owns; inside a transaction.
unsafe fn values_entry(stmt: *mut pg_sys::PlannedStmt, columns: usize) -> u32 {
    // SAFETY: the entry is filled as the parser fills a VALUES entry; names are palloc'd.
    unsafe {
        let mut names: *mut pg_sys::List = std::ptr::null_mut();
        for i in 0..columns {
            let name = std::ffi::CString::new(format!("column{}", i + 1)).expect("no NUL");
            names = pg_sys::lappend(
                names,
                pg_sys::makeString(pg_sys::pstrdup(name.as_ptr())).cast(),
            );
        }
        let rte = pg_sys::palloc0(std::mem::size_of::<pg_sys::RangeTblEntry>())
            as *mut pg_sys::RangeTblEntry;
        (*rte).type_ = pg_sys::NodeTag::T_RangeTblEntry;
        (*rte).rtekind = pg_sys::RTEKind::RTE_VALUES;
        (*rte).eref = pg_sys::makeAlias(c"stored answer".as_ptr(), names);
        (*stmt).rtable = pg_sys::lappend((*stmt).rtable, rte.cast());
        list_nodes((*stmt).rtable).len() as u32
    }
}

/// An answer's rows, each column's value read with its type's binary
/// receive function (None: the answer does not fit these columns).
///
/// # Safety
/// Inside a transaction; values are palloc'd in the current memory context.
unsafe fn decode(
    answer: &[u8],
    columns: &[(pg_sys::Oid, i32, pg_sys::Oid)],
) -> Option<Vec<Vec<Option<pg_sys::Datum>>>> {
    let mut at = 0usize;
    let mut take = |n: usize| -> Option<&[u8]> {
        let s = answer.get(at..at + n)?;
        at += n;
        Some(s)
    };
    let u32_at = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes"));
    let ncols = u32_at(take(4)?) as usize;
    let nrows = u32_at(take(4)?) as usize;
    if ncols != columns.len() {
        return None;
    }
    let mut rows = Vec::with_capacity(nrows);
    for _ in 0..nrows {
        let mut row = Vec::with_capacity(ncols);
        for (type_, typmod, _) in columns {
            let present = take(1)?[0] == 1;
            if !present {
                row.push(None);
                continue;
            }
            let len = u32_at(take(4)?) as usize;
            let bytes = take(len)?;
            // SAFETY: a StringInfo over a palloc'd, NUL-terminated copy, as the receive functions expect.
            let datum = unsafe {
                let mut recv = pg_sys::InvalidOid;
                let mut ioparam = pg_sys::InvalidOid;
                pg_sys::getTypeBinaryInputInfo(*type_, &mut recv, &mut ioparam);
                let buf = pg_sys::makeStringInfo();
                pg_sys::appendBinaryStringInfo(buf, bytes.as_ptr().cast(), bytes.len() as i32);
                pg_sys::OidReceiveFunctionCall(recv, buf, ioparam, *typmod)
            };
            row.push(Some(datum));
        }
        rows.push(row);
    }
    Some(rows)
}
