//! What identifies a release, read from the query as the planner gets it.
//!
//! For each query level with dpnoise aggregates, the level's FROM (its
//! range table, with every subquery, view and CTE body in it), its WHERE
//! and joins, its GROUP BY (the expressions and their operators), each
//! aggregate call (its arguments, FILTER, ORDER BY and parameters), and
//! the values of the statement's parameters are hashed into a digest. The
//! level's target list beyond its group keys, its HAVING, ORDER BY, LIMIT
//! and everything outside the level only post-process the releases, and
//! are left out: a release wrapped in `SELECT * FROM (…) LIMIT 1` or
//! counted by `count(*)` keeps its identity. Source positions are left out
//! too (the same text at another offset is the same release).
//!
//! A level is identified only if its true values are a function of the
//! data it reads and nothing else: every function in it is immutable and
//! PostgreSQL's or dpnoise's own, or follows the session's TimeZone alone
//! (`zoned`: date_trunc of a timestamptz), which then joins the digest;
//! nothing in it reads the time, another setting,
//! a sequence or an outer query's row; no subquery in it has a LIMIT, a
//! DISTINCT ON, a window function, a row lock or an aggregate whose result
//! depends on the order of its rows; every table it reads is tracked for
//! writes (`dp_track`, repeat.sql) and has no inheritance children; no
//! TABLESAMPLE; no grouping sets; its group keys are of types whose
//! equality is equality of bytes once normalised (so the same group has
//! the same key bytes whichever row represents it). Anything else is a
//! fresh release, charged, with fresh noise. Those conditions are checked
//! in `super::determined`; here, the walk over levels and the digest.

use super::determined::{
    check_node, checker, key_type_supported, operators_ours, repeatable, time_zone, Check,
};
use crate::gate::list_items;
use pgrx::pg_sys;
use std::ffi::c_void;

/// What the execution needs of one identified aggregate call.
pub struct Marked {
    /// The digest of its level and of the call.
    pub digest: [u8; 32],
    /// The tables its level reads (their versions complete the identity).
    pub relations: Vec<pg_sys::Oid>,
    /// Its level's GROUP BY items (their sort-group references) in a
    /// canonical order (by their expressions, not by where the query wrote
    /// them or what ORDER BY made of them): the Agg node must group by all
    /// of them, and a group's key lists its values in this order.
    pub group_items: Vec<u32>,
}

/// Aggref locations at or below this mark an identified call: the
/// `MARK - location`-th entry of the plan's marker. A location is only read
/// for error positions while parsing, which is over.
pub const MARK: i32 = -1_000_000;

/// Marks every identified dpnoise aggregate call in `parse` (its location
/// becomes its marker number) and returns what each needs.
///
/// # Safety
/// `parse` is the live Query the planner hook was given and `params` its
/// bound parameters (or null); inside a transaction.
pub unsafe fn mark(parse: *mut pg_sys::Query, params: pg_sys::ParamListInfo) -> Vec<Marked> {
    // SAFETY: inside a transaction (the caller's contract).
    let extension = unsafe { crate::extensions::oid(crate::extensions::Extension::Dpnoise) };
    let mut walk = Levels {
        params,
        marked: Vec::new(),
        extension,
        top: parse,
    };
    // SAFETY: the caller's contract; `walk` outlives the walk and is only reached through the pointer.
    unsafe { levels(parse.cast(), (&raw mut walk).cast()) };
    walk.marked
}

struct Levels {
    params: pg_sys::ParamListInfo,
    marked: Vec<Marked>,
    extension: pg_sys::Oid,
    /// The statement's own level.
    top: *mut pg_sys::Query,
}

/// Visits every query level (subqueries, CTEs and sublinks included).
///
/// # Safety
/// Called by `query_tree_walker` / `expression_tree_walker` (or `mark`) with
/// a live node and the `Levels` `mark` made; inside a transaction.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn levels(node: *mut pg_sys::Node, context: *mut c_void) -> bool {
    // SAFETY: the caller's contract; casts follow node tags.
    unsafe {
        if node.is_null() {
            return false;
        }
        if (*node).type_ == pg_sys::NodeTag::T_Query {
            let query = node as *mut pg_sys::Query;
            identify(query, &mut *(context as *mut Levels));
            return pg_sys::query_tree_walker(query, Some(levels), context, 0);
        }
        pg_sys::expression_tree_walker(node, Some(levels), context)
    }
}

/// The dpnoise aggregate calls of one level (its outputs and HAVING).
///
/// # Safety
/// `level` is a live Query; inside a transaction.
unsafe fn level_calls(level: *mut pg_sys::Query) -> Vec<*mut pg_sys::Aggref> {
    /// # Safety
    /// Called by `expression_tree_walker` with live nodes and the Vec.
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn find(node: *mut pg_sys::Node, context: *mut c_void) -> bool {
        // SAFETY: the caller's contract; casts follow node tags. A sublink's query is another level.
        unsafe {
            if node.is_null() || (*node).type_ == pg_sys::NodeTag::T_Query {
                return false;
            }
            if (*node).type_ == pg_sys::NodeTag::T_Aggref {
                let aggref = node as *mut pg_sys::Aggref;
                if (*aggref).agglevelsup == 0 && repeatable(aggref) {
                    (*(context as *mut Vec<*mut pg_sys::Aggref>)).push(aggref);
                }
                return false;
            }
            pg_sys::expression_tree_walker(node, Some(find), context)
        }
    }
    let mut found: Vec<*mut pg_sys::Aggref> = Vec::new();
    // SAFETY: the caller's contract; `found` outlives both walks.
    unsafe {
        for list in [(*level).targetList.cast(), (*level).havingQual] {
            find(list, (&raw mut found).cast());
        }
    }
    found
}

/// Identifies the dpnoise aggregate calls of `level`, if the level can be.
///
/// # Safety
/// `level` is a live Query inside the tree `walk` walks; inside a transaction.
unsafe fn identify(level: *mut pg_sys::Query, walk: &mut Levels) {
    // SAFETY: the caller's contract; every list is a live List of the level.
    unsafe {
        let calls = level_calls(level);
        if calls.is_empty() {
            return;
        }
        let mut check = Check {
            depth: 0,
            ok: true,
            relations: Vec::new(),
            params: Vec::new(),
            extension: walk.extension,
            zoned: false,
        };
        let q = &*level;
        if q.commandType != pg_sys::CmdType::CMD_SELECT
            || !q.groupingSets.is_null()
            || q.hasRecursive
            || q.hasModifyingCTE
            || !q.rowMarks.is_null()
        {
            return;
        }
        // What is identified: the rows (FROM, its CTEs, WHERE), the groups, each call.
        let mut items = Vec::new();
        for clause in list_items::<pg_sys::SortGroupClause>(q.groupClause) {
            let entry = pg_sys::get_sortgroupclause_tle(clause, q.targetList);
            let expr = (*entry).expr as *mut pg_sys::Node;
            if !operators_ours(clause)
                || !key_type_supported(pg_sys::exprType(expr), pg_sys::exprCollation(expr))
            {
                return;
            }
            check_node(expr, &mut check);
            // What groups: the expression and its equality (not the item's
            // place, reference number or sort order, which ORDER BY sets).
            let mut item = Vec::new();
            serialize(expr, &mut item);
            item.extend_from_slice(&u32::from((*clause).eqop).to_le_bytes());
            items.push((item, (*clause).tleSortGroupRef));
        }
        items.sort();
        let mut text = Vec::new();
        for (item, _) in &items {
            text.extend_from_slice(&(item.len() as u64).to_le_bytes());
            text.extend_from_slice(item);
        }
        let group_items: Vec<u32> = items.iter().map(|(_, r)| *r).collect();
        // HAVING too: the planner moves its conditions on group keys into
        // WHERE, where they can split a group (−0 from 0, 'x ' from 'x').
        serialize(q.havingQual, &mut text);
        check_node(q.havingQual, &mut check);
        serialize(q.cteList.cast(), &mut text);
        serialize(q.rtable.cast(), &mut text);
        serialize(q.jointree.cast(), &mut text);
        for cte in list_items::<pg_sys::CommonTableExpr>(q.cteList) {
            check_node((*cte).ctequery, &mut check);
        }
        pg_sys::range_table_walker(
            q.rtable,
            Some(checker),
            (&raw mut check).cast(),
            pg_sys::QTW_EXAMINE_RTES_BEFORE as i32,
        );
        check_node(q.jointree.cast(), &mut check);
        let mut level_check = check;
        if !level_check.ok {
            return;
        }
        let before = walk.marked.len();
        for aggref in calls {
            let mut call = Check {
                relations: Vec::new(),
                params: Vec::new(),
                ..level_check
            };
            for list in [
                (*aggref).aggdirectargs,
                (*aggref).args,
                (*aggref).aggorder,
                (*aggref).aggdistinct,
            ] {
                check_node(list.cast(), &mut call);
            }
            check_node((*aggref).aggfilter.cast(), &mut call);
            let mut params = level_check.params.clone();
            params.extend(call.params);
            // Tables read in the call's own arguments or FILTER (a subquery) version it too.
            let mut relations = level_check.relations.clone();
            relations.extend(call.relations.iter().copied());
            relations.sort_unstable_by_key(|r| u32::from(*r));
            relations.dedup();
            let Some(values) = (call.ok)
                .then(|| parameter_values(&params, walk.params))
                .flatten()
            else {
                continue;
            };
            let mut whole = text.clone();
            serialize(aggref.cast(), &mut whole);
            whole.extend_from_slice(&values);
            if call.zoned {
                whole.extend_from_slice(b"TimeZone=");
                whole.extend_from_slice(&time_zone());
            }
            let digest = crate::seal::hmac(b"dpnoise release identity v1", &[&whole]);
            let index = walk.marked.len() as i32;
            (*aggref).location = MARK - index;
            walk.marked.push(Marked {
                digest,
                relations,
                group_items: group_items.clone(),
            });
        }
        level_check.relations.clear();
        if walk.marked.len() > before && level != walk.top {
            fence(level);
        }
    }
}

/// Keeps the planner from pushing an outer level's conditions into a
/// level of identified calls. PostgreSQL moves a condition on a
/// subquery's group key (`SELECT * FROM (SELECT region, count(*) …
/// GROUP BY region) v WHERE region = 'north'`) into the subquery's WHERE,
/// where the identity, read from the level as written, does not see it:
/// the filtered answer would be kept, and served to the unfiltered
/// statement (an attack found it). An OFFSET 0 (no Limit node: the
/// planner drops it) makes the level a barrier, as PostgreSQL documents;
/// its groups are computed whole and the outer condition filters them.
///
/// # Safety
/// `level` is a live Query of the statement being planned; palloc'd in
/// the planner's memory context.
unsafe fn fence(level: *mut pg_sys::Query) {
    // SAFETY: the caller's contract.
    unsafe {
        if !(*level).limitOffset.is_null() || !(*level).limitCount.is_null() {
            return;
        }
        (*level).limitOffset = pg_sys::makeConst(
            pg_sys::INT8OID,
            -1,
            pg_sys::InvalidOid,
            8,
            pg_sys::Datum::from(0i64),
            false,
            true,
        )
        .cast();
    }
}

/// `node`'s text form without source positions (nor a statement's place
/// in its string), appended to `into`.
///
/// # Safety
/// `node` is null or a live node tree.
pub(super) unsafe fn serialize(node: *mut pg_sys::Node, into: &mut Vec<u8>) {
    // SAFETY: the caller's contract; nodeToString returns a palloc'd NUL-terminated string.
    let text = unsafe {
        if node.is_null() {
            into.extend_from_slice(b"<>");
            return;
        }
        let s = pg_sys::nodeToString(node as *const c_void);
        let owned = std::ffi::CStr::from_ptr(s).to_bytes().to_vec();
        pg_sys::pfree(s.cast());
        owned
    };
    into.extend_from_slice(&strip_positions(&text));
    into.push(0);
}

/// Removes `:location N`, `:stmt_location N`, `:stmt_len N` and `:queryId N`
/// fields (a field name is preceded by a space and followed by one; a token
/// inside a name or a constant has its spaces escaped, so cannot match).
fn strip_positions(text: &[u8]) -> Vec<u8> {
    const FIELDS: [&[u8]; 4] = [
        b" :location ",
        b" :stmt_location ",
        b" :stmt_len ",
        b" :queryId ",
    ];
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    'outer: while i < text.len() {
        for field in FIELDS {
            if text[i..].starts_with(field) {
                let mut j = i + field.len();
                if j < text.len() && text[j] == b'-' {
                    j += 1;
                }
                while j < text.len() && text[j].is_ascii_digit() {
                    j += 1;
                }
                i = j;
                continue 'outer;
            }
        }
        out.push(text[i]);
        i += 1;
    }
    out
}

/// The values of the external parameters `found` (their types and binary
/// forms), or None if one is not fixed for this plan (a generic plan's).
///
/// # Safety
/// `found` are live PARAM_EXTERN Params; `params` is null or the live
/// parameters of the statement being planned.
unsafe fn parameter_values(
    found: &[*mut pg_sys::Param],
    params: pg_sys::ParamListInfo,
) -> Option<Vec<u8>> {
    // SAFETY: the caller's contract: live Params.
    let mut found: Vec<(i32, *mut pg_sys::Param)> = found
        .iter()
        .map(|p| (unsafe { (**p).paramid }, *p))
        .collect();
    found.sort_unstable_by_key(|p| p.0);
    found.dedup_by_key(|p| p.0);
    let mut out = Vec::new();
    for (id, param) in found {
        // SAFETY: the caller's contract; fixed_param reads the ParamListInfo within its length.
        unsafe {
            let data = crate::parameters::fixed_param(param, params)?;
            let type_ = (*data).ptype;
            if u32::from(type_) >= pg_sys::FirstNormalObjectId {
                return None;
            }
            out.extend_from_slice(&id.to_le_bytes());
            out.extend_from_slice(&u32::from(type_).to_le_bytes());
            if (*data).isnull {
                out.push(0);
                continue;
            }
            let mut send = pg_sys::InvalidOid;
            let mut varlena = false;
            pg_sys::getTypeBinaryOutputInfo(type_, &mut send, &mut varlena);
            let bytes = pg_sys::OidSendFunctionCall(send, (*data).value);
            let len = pgrx::varlena::varsize_any_exhdr(bytes);
            let body =
                std::slice::from_raw_parts(pgrx::varlena::vardata_any(bytes) as *const u8, len);
            out.push(1);
            out.extend_from_slice(&(len as u64).to_le_bytes());
            out.extend_from_slice(body);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::strip_positions;

    #[test]
    fn positions_are_stripped_and_nothing_else() {
        let text = b"{AGGREF :aggfnoid 16400 :location 17} {QUERY :stmt_location 0 :stmt_len 33 :queryId -5 :x\\ :location\\ 4}";
        let stripped = strip_positions(text);
        assert_eq!(
            stripped,
            b"{AGGREF :aggfnoid 16400} {QUERY :x\\ :location\\ 4}".to_vec()
        );
    }
}
