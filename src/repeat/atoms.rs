//! Identified Agg nodes output their atoms, whatever the plan.
//!
//! Where the planner computes an expression over an aggregate follows the
//! plan: `count(*)`, rewritten as `dp_sum(…)::bigint`, is cast in the Agg
//! node under a sorted aggregation, but in a Result above the final Sort
//! under a hashed one (PostgreSQL postpones a volatile expression past the
//! sort). The Agg's output, and with it its answer key (`serve`), would
//! differ, and a repeat under the other plan would be charged again.
//!
//! After planning, each Agg node whose aggregates are all identified calls
//! is made to output only its atoms: each release once, and each column
//! of its input its output reads, in a canonical order (the group keys by
//! their place among the level's GROUP BY items, then other columns, then
//! the releases by their digests). A Result above it computes what the
//! node computed before, from the atoms. Both plans then store and serve
//! the same rows.

use super::identity::Marked;
use crate::pg_list::list_nodes;
use pgrx::pg_sys;
use std::ffi::c_void;

/// Splits each identified Agg node of `stmt` (`marked`: its marked calls)
/// into its atoms and a Result over them.
///
/// # Safety
/// `stmt` is the live PlannedStmt the planner just made; inside a transaction.
pub unsafe fn split(stmt: *mut pg_sys::PlannedStmt, marked: &[Marked]) {
    // SAFETY: the caller's contract; nodes are made in the planner's memory context.
    unsafe {
        let mut next_id = crate::parameters::plan_nodes(stmt)
            .iter()
            .map(|p| (**p).plan_node_id)
            .max()
            .unwrap_or(0)
            + 1;
        for slot in super::serve::agg_slots(stmt) {
            if let Some(result) = split_one(*slot, marked, next_id) {
                *slot = result;
                next_id += 1;
            }
        }
    }
}

/// What the atoms of one node are collected into while its output is
/// rewritten over them.
struct Atoms {
    found: Vec<*mut pg_sys::Node>,
}

/// A Result computing `plan`'s output from its atoms, `plan` now
/// outputting them (None: `plan` is not split).
///
/// # Safety
/// `plan` is a live Agg node of a finished plan.
unsafe fn split_one(
    plan: *mut pg_sys::Plan,
    marked: &[Marked],
    id: i32,
) -> Option<*mut pg_sys::Plan> {
    // SAFETY: the caller's contract; the target list is a List of TargetEntry.
    unsafe {
        let agg = plan as *mut pg_sys::Agg;
        if (*agg).aggstrategy == pg_sys::AggStrategy::AGG_MIXED
            || !(*agg).groupingSets.is_null()
            || !(*agg).chain.is_null()
            || !(*plan).extParam.is_null()
            || !(*plan).initPlan.is_null()
        {
            return None;
        }
        let mut calls = Vec::new();
        crate::gate::bounding::collect_aggregates((*plan).targetlist.cast(), &mut calls);
        let mut items: &[u32] = &[];
        for &aggref in &calls {
            let marker = super::marker_index(aggref).filter(|&m| m < marked.len())?;
            if (*aggref).aggsplit & pg_sys::AGGSPLITOP_SKIPFINAL != 0 {
                return None;
            }
            items = &marked[marker].group_items;
        }
        if calls.is_empty() {
            return None;
        }
        // Each output expression over placeholders (OUTER_VAR Vars
        // numbered in the order the atoms were met).
        let mut atoms = Atoms { found: Vec::new() };
        let entries: Vec<*mut pg_sys::TargetEntry> = list_nodes((*plan).targetlist)
            .into_iter()
            .map(|e| e.cast())
            .collect();
        let over: Vec<*mut pg_sys::Node> = entries
            .iter()
            .map(|e| {
                let copy = pg_sys::copyObjectImpl((**e).expr.cast()) as *mut pg_sys::Node;
                collect(copy, (&raw mut atoms).cast())
            })
            .collect();
        // The canonical order.
        let mut order: Vec<(u8, Vec<u8>, usize)> = atoms
            .found
            .iter()
            .enumerate()
            .map(|(i, &atom)| {
                let (class, rank) = rank(plan, atom, items, marked);
                (class, rank, i)
            })
            .collect();
        order.sort();
        let mut place = vec![0i16; order.len()];
        for (to, (_, _, from)) in order.iter().enumerate() {
            place[*from] = (to + 1) as i16;
        }
        let already = entries.len() == order.len()
            && entries.iter().zip(&order).all(|(e, (_, _, from))| {
                !(**e).resjunk && pg_sys::equal((**e).expr.cast(), atoms.found[*from].cast())
            });
        if already {
            return None;
        }
        // The node's new output: its atoms.
        let mut targetlist: *mut pg_sys::List = std::ptr::null_mut();
        for (to, (_, _, from)) in order.iter().enumerate() {
            let tle = pg_sys::makeTargetEntry(
                atoms.found[*from].cast(),
                (to + 1) as i16,
                std::ptr::null_mut(),
                false,
            );
            targetlist = pg_sys::lappend(targetlist, tle.cast());
        }
        // The Result above: the old output over the atoms.
        let mut above: *mut pg_sys::List = std::ptr::null_mut();
        for (entry, expr) in entries.iter().zip(over) {
            let expr = renumber(expr, (&raw const place).cast_mut().cast());
            let tle = pg_sys::makeTargetEntry(
                expr.cast(),
                (**entry).resno,
                (**entry).resname,
                (**entry).resjunk,
            );
            (*tle).ressortgroupref = (**entry).ressortgroupref;
            (*tle).resorigtbl = (**entry).resorigtbl;
            (*tle).resorigcol = (**entry).resorigcol;
            above = pg_sys::lappend(above, tle.cast());
        }
        let result = pg_sys::palloc0(std::mem::size_of::<pg_sys::Result>()) as *mut pg_sys::Result;
        let r = &raw mut (*result).plan;
        (*r).type_ = pg_sys::NodeTag::T_Result;
        (*r).startup_cost = (*plan).startup_cost;
        (*r).total_cost = (*plan).total_cost;
        (*r).plan_rows = (*plan).plan_rows;
        (*r).plan_width = (*plan).plan_width;
        (*r).parallel_safe = (*plan).parallel_safe;
        (*r).plan_node_id = id;
        (*r).targetlist = above;
        (*r).lefttree = plan;
        (*r).extParam = pg_sys::bms_copy((*plan).extParam);
        (*r).allParam = pg_sys::bms_copy((*plan).allParam);
        (*plan).targetlist = targetlist;
        Some(result.cast())
    }
}

/// Where an atom goes: the group keys first, by their place among the
/// level's GROUP BY items; then other input columns, by what the input
/// computes for them; then the releases, by their digests.
///
/// # Safety
/// `plan` is a live Agg node; `atom` an Aggref or an OUTER_VAR Var of it.
unsafe fn rank(
    plan: *mut pg_sys::Plan,
    atom: *mut pg_sys::Node,
    items: &[u32],
    marked: &[Marked],
) -> (u8, Vec<u8>) {
    // SAFETY: the caller's contract.
    unsafe {
        if (*atom).type_ == pg_sys::NodeTag::T_Aggref {
            let marker = super::marker_index(atom.cast()).unwrap_or(usize::MAX);
            let mut rank = marked.get(marker).map_or([0xff; 32], |m| m.digest).to_vec();
            rank.extend_from_slice(&(marker as u64).to_be_bytes());
            return (2, rank);
        }
        let attno = (*(atom as *mut pg_sys::Var)).varattno;
        let input = (*plan).lefttree;
        let entry = list_nodes(if input.is_null() {
            std::ptr::null_mut()
        } else {
            (*input).targetlist
        })
        .get(attno as usize - 1)
        .copied()
        .map(|e| e as *mut pg_sys::TargetEntry);
        let Some(entry) = entry else {
            return (1, (attno as u32).to_be_bytes().to_vec());
        };
        if let Some(p) = items.iter().position(|i| *i == (*entry).ressortgroupref) {
            return (0, (p as u32).to_be_bytes().to_vec());
        }
        let text = pg_sys::nodeToString((*entry).expr.cast());
        let rank = std::ffi::CStr::from_ptr(text).to_bytes().to_vec();
        pg_sys::pfree(text.cast());
        (1, rank)
    }
}

/// Replaces each Aggref and each column of the Agg's input by a
/// placeholder numbered by its atom (collected in `Atoms`).
///
/// # Safety
/// Called by the tree mutator with a live node and the `Atoms`.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn collect(
    node: *mut pg_sys::Node,
    context: *mut c_void,
) -> *mut pg_sys::Node {
    // SAFETY: the caller's contract; casts follow node tags.
    unsafe {
        if node.is_null() {
            return node;
        }
        let atom = match (*node).type_ {
            pg_sys::NodeTag::T_Aggref => true,
            pg_sys::NodeTag::T_Var => {
                (*(node as *mut pg_sys::Var)).varno == pg_sys::OUTER_VAR as i32
            }
            _ => false,
        };
        if !atom {
            return crate::versions::expression_tree_mutator(node, collect, context);
        }
        let atoms = &mut *(context as *mut Atoms);
        let at = match atoms
            .found
            .iter()
            .position(|a| pg_sys::equal((*a).cast(), node.cast()))
        {
            Some(at) => at,
            None => {
                atoms.found.push(node);
                atoms.found.len() - 1
            }
        };
        let expr = node as *mut pg_sys::Expr;
        pg_sys::makeVar(
            pg_sys::OUTER_VAR as _,
            (at + 1) as i16,
            pg_sys::exprType(expr.cast()),
            pg_sys::exprTypmod(expr.cast()),
            pg_sys::exprCollation(expr.cast()),
            0,
        )
        .cast()
    }
}

/// Renumbers the placeholders by the atoms' canonical places (a `Vec<i16>`
/// from the order they were met).
///
/// # Safety
/// Called by the tree mutator with a live node and the places.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn renumber(
    node: *mut pg_sys::Node,
    context: *mut c_void,
) -> *mut pg_sys::Node {
    // SAFETY: the caller's contract; casts follow node tags.
    unsafe {
        if node.is_null() {
            return node;
        }
        if (*node).type_ == pg_sys::NodeTag::T_Var {
            let var = node as *mut pg_sys::Var;
            if (*var).varno == pg_sys::OUTER_VAR as i32 {
                let place = &*(context as *const Vec<i16>);
                (*var).varattno = place[(*var).varattno as usize - 1];
                (*var).varattnosyn = (*var).varattno;
                return node;
            }
        }
        crate::versions::expression_tree_mutator(node, renumber, context)
    }
}
