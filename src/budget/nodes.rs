//! Finding a call's node in a running plan: the children of a plan node
//! and whether an expression tree holds a given node.

use pgrx::pg_sys;

/// The plan nodes under `node`: outer and inner, init plans and subplans,
/// and the members of appends and subquery scans.
///
/// # Safety
/// `node` is non-null and a live PlanState of a running query (between its
/// ExecutorStart and ExecutorEnd).
pub unsafe fn children(node: *mut pg_sys::PlanState) -> Vec<*mut pg_sys::PlanState> {
    // SAFETY: `node` is a live PlanState (the caller's contract); the executor keeps the whole state
    // tree, in the query's EState memory context, until ExecutorEnd, so its header can be read.
    // `initPlan` and `subPlan` are null or Lists of SubPlanState pointers, read below `length`. The
    // casts to AppendState, MergeAppendState and SubqueryScanState follow the node's tag; their
    // `appendplans` / `mergeplans` arrays hold `as_nplans` / `ms_nplans` PlanState pointers.
    unsafe {
        let mut out = vec![(*node).lefttree, (*node).righttree];
        for list in [(*node).initPlan, (*node).subPlan] {
            let n = if list.is_null() {
                0
            } else {
                (*list).length as usize
            };
            for i in 0..n {
                let sub = (*(*list).elements.add(i)).ptr_value as *mut pg_sys::SubPlanState;
                if !sub.is_null() {
                    out.push((*sub).planstate);
                }
            }
        }
        let members = |plans: *mut *mut pg_sys::PlanState, n: i32| -> Vec<*mut pg_sys::PlanState> {
            (0..n.max(0) as usize).map(|i| *plans.add(i)).collect()
        };
        match (*node).type_ {
            pg_sys::NodeTag::T_AppendState => {
                let a = node as *mut pg_sys::AppendState;
                out.extend(members((*a).appendplans, (*a).as_nplans));
            }
            pg_sys::NodeTag::T_MergeAppendState => {
                let m = node as *mut pg_sys::MergeAppendState;
                out.extend(members((*m).mergeplans, (*m).ms_nplans));
            }
            pg_sys::NodeTag::T_SubqueryScanState => {
                out.push((*(node as *mut pg_sys::SubqueryScanState)).subplan)
            }
            _ => {}
        }
        out.retain(|p| !p.is_null());
        out
    }
}

/// Whether the expression tree `tree` holds the node `target` itself.
///
/// # Safety
/// `tree` is null or a live expression tree (a node, or a List of them) that
/// `expression_tree_walker` can walk; `target` is only compared, never read.
pub unsafe fn contains_pointer(tree: *mut pg_sys::Node, target: *mut pg_sys::Node) -> bool {
    // SAFETY: `tree` is null or a live expression tree (the caller's contract), which is what walk
    // needs; `target` travels as the walker's opaque context and is never dereferenced.
    unsafe { walk(tree, target.cast()) }
}

/// # Safety
/// `node` is null or a live expression node (as `expression_tree_walker`
/// passes them); `target` is only compared, never read.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn walk(node: *mut pg_sys::Node, target: *mut std::ffi::c_void) -> bool {
    // SAFETY: `node` is null (tested first) or a live node of the tree being walked (the caller's
    // contract); expression_tree_walker reads only it and its children, calling walk on each with
    // the same opaque `target`, which it never dereferences either.
    unsafe {
        !node.is_null()
            && (node.cast() == target || pg_sys::expression_tree_walker(node, Some(walk), target))
    }
}
