//! Group keys shown as a function of their equality class.
//!
//! An admitted level's group key is shown as its group's representative
//! row has it, and which row represents a group follows the plan and the
//! order of the rows: with `-0` and `0` in one group, an index scan that
//! meets one person's row first shows that person's value (an attack read
//! a salary bit by bit this way). So every GROUP BY key of a level over
//! protected rows is either of a type whose equal values are the same
//! bytes, or written through dpnoise's normal form of its type
//! (`crate::output::canonical`), everywhere the level shows it: the key
//! itself and every expression of it in the select list and HAVING outside
//! the aggregates. Keys of any other type are refused.

use super::{list_items, refuse, Refusal};
use crate::output::canonical::{form, Form};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::collections::HashMap;

/// One key to rewrite: the expression as written, its normal form's function.
struct Key {
    expr: *mut pg_sys::Node,
    function: pg_sys::Oid,
}

/// Writes the normal form around every group key of `query` that needs
/// one; refuses a key of a type with none. `forms`: dpnoise's total forms
/// by name (the normal forms among them).
///
/// # Safety
/// `query` is a live Query of an analyst's statement before planning,
/// inside a transaction.
pub(super) unsafe fn canonical(
    query: *mut pg_sys::Query,
    forms: &HashMap<String, pg_sys::Oid>,
) -> Result<(), Refusal> {
    // SAFETY: the caller's contract; the target list, clauses and nodes are the level's own.
    unsafe {
        let mut keys = Vec::new();
        for clause in list_items::<pg_sys::SortGroupClause>((*query).groupClause) {
            let entry = pg_sys::get_sortgroupclause_tle(clause, (*query).targetList);
            let expr = (*entry).expr as *mut pg_sys::Node;
            let (type_, collation) = (pg_sys::exprType(expr), pg_sys::exprCollation(expr));
            match form(type_, collation) {
                Form::Image => {}
                Form::Normalised(name) => {
                    let Some(&function) = forms.get(name) else {
                        return Err(refuse(
                            "this GROUP BY key's type needs a normal form the installed dpnoise lacks",
                            "Ask the DBA to run ALTER EXTENSION dpnoise UPDATE.",
                        ));
                    };
                    keys.push(Key { expr, function });
                }
                Form::Refused => {
                    let name = std::ffi::CStr::from_ptr(pg_sys::format_type_be(type_))
                        .to_string_lossy()
                        .into_owned();
                    return Err(refuse(
                        &format!(
                            "a GROUP BY key of type {name}: equal values of this type can differ in bytes, so the \
                             value shown for a group would be the one the plan met first"
                        ),
                        "Group by a key whose equal values are identical (integer, text, date, timestamp, uuid) or \
                         one dpnoise normalises (float4, float8, numeric, interval, char(n)): cast it, for example to text.",
                    ));
                }
            }
        }
        if keys.is_empty() {
            return Ok(());
        }
        let mut context = keys;
        let context_ptr = (&raw mut context).cast();
        for entry in list_items::<pg_sys::TargetEntry>((*query).targetList) {
            (*entry).expr = normalise((*entry).expr.cast(), context_ptr).cast();
        }
        (*query).havingQual = normalise((*query).havingQual, context_ptr);
        Ok(())
    }
}

/// Replaces each occurrence of a key (outside aggregates) by its normal form.
///
/// # Safety
/// Called by the tree mutator (or `canonical`) with a live node and the keys.
#[pg_guard]
unsafe extern "C-unwind" fn normalise(
    node: *mut pg_sys::Node,
    context: *mut std::ffi::c_void,
) -> *mut pg_sys::Node {
    // SAFETY: the caller's contract; the new call is palloc'd in the planner's memory context.
    unsafe {
        if node.is_null() {
            return node;
        }
        let keys = &*(context as *const Vec<Key>);
        if let Some(key) = keys
            .iter()
            .find(|k| pg_sys::equal(k.expr.cast(), node.cast()))
        {
            let (type_, collation) = (pg_sys::exprType(node), pg_sys::exprCollation(node));
            let args = pg_sys::lappend(std::ptr::null_mut(), pg_sys::copyObjectImpl(node.cast()));
            let call = pg_sys::makeFuncExpr(
                key.function,
                type_,
                args,
                collation,
                collation,
                pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
            );
            (*call).location = pg_sys::exprLocation(node);
            return call.cast();
        }
        // An aggregate's arguments are read per input row: its inputs, not a shown key.
        if (*node).type_ == pg_sys::NodeTag::T_Aggref || (*node).type_ == pg_sys::NodeTag::T_Query {
            return node;
        }
        crate::versions::expression_tree_mutator(node, normalise, context)
    }
}
