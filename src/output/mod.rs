//! What an analyst observes leaves through here: values shown as a
//! function of their equality class (`canonical`), never of the row
//! PostgreSQL happened to meet first.
//!
//! PostgreSQL keeps one of several equal values wherever it groups or
//! removes duplicates: a group's displayed key is its representative row's
//! value, and which row represents the group follows the plan and the order
//! of the rows, both of which an analyst steers with ordinary settings.
//! When equal values can differ in bytes (`-0` and `0`, `3.0` and `3.00`,
//! `'1 day'` and `'24:00:00'`, `'a'` and `'a '` as char(n)), the bytes shown
//! would tell which protected row came first. docs/analysts.md, "Canonical
//! values", lists what is normalised and what is refused.
//!
//! Rows leave in an order that is a function of the rows (`order`): the
//! statement's ORDER BY, then each of its columns; and float sums over
//! them do not round by that order (`exact`). Above the releases, values
//! are shown, grouped and compared in their normal form (`normal`).
//!
//! The run time leaves here too: a fresh statement's answer is held for a
//! calibrated random delay (`timing`), so that when it arrives is a release.

pub mod canonical;
pub mod exact;
pub mod normal;
pub mod order;
pub mod timing;

pgrx::extension_sql_file!("canonical.sql", name = "canonical_sql");

/// Calls `each` with `query` and then with every query level below it
/// (subqueries, CTEs, sublinks), each with whether it is the top.
///
/// # Safety
/// `query` is a live Query; `each` may rewrite a level, not replace it.
unsafe fn each_level(
    query: *mut pgrx::pg_sys::Query,
    each: &mut dyn FnMut(*mut pgrx::pg_sys::Query, bool),
) {
    use pgrx::pg_sys;
    /// # Safety
    /// Called by PostgreSQL's tree walkers with live nodes and the callback.
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walker(
        node: *mut pg_sys::Node,
        context: *mut std::ffi::c_void,
    ) -> bool {
        // SAFETY: the caller's contract; casts follow node tags; the context is `each_level`'s
        // callback, borrowed for the walk alone.
        unsafe {
            if node.is_null() {
                return false;
            }
            if (*node).type_ == pg_sys::NodeTag::T_Query {
                let query = node as *mut pg_sys::Query;
                let each = &mut *(context as *mut &mut dyn FnMut(*mut pg_sys::Query, bool));
                each(query, false);
                return pg_sys::query_tree_walker(query, Some(walker), context, 0);
            }
            pg_sys::expression_tree_walker(node, Some(walker), context)
        }
    }
    // SAFETY: the caller's contract; `each` outlives the walk.
    unsafe {
        each(query, true);
        let mut each = each;
        pg_sys::query_tree_walker(query, Some(walker), (&raw mut each).cast(), 0);
    }
}
