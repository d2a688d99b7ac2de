//! Finding a call's node in a running plan: the children of a plan node
//! and whether an expression tree holds a given node.

use pgrx::pg_sys;

/// The plan nodes under `node`: outer and inner, init plans and subplans,
/// and the members of appends and subquery scans.
///
/// # Safety
/// `node` is a live PlanState of a running query.
pub unsafe fn children(node: *mut pg_sys::PlanState) -> Vec<*mut pg_sys::PlanState> {
    // SAFETY: node is a live PlanState of the running query; its tag says which struct it is, and its arrays have the lengths it records.
    unsafe {
        let mut out = vec![(*node).lefttree, (*node).righttree];
        for list in [(*node).initPlan, (*node).subPlan] {
            let n = if list.is_null() { 0 } else { (*list).length as usize };
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
            pg_sys::NodeTag::T_SubqueryScanState => out.push((*(node as *mut pg_sys::SubqueryScanState)).subplan),
            _ => {}
        }
        out.retain(|p| !p.is_null());
        out
    }
}

/// Whether the expression tree `tree` holds the node `target` itself.
///
/// # Safety
/// `tree` is null or a live expression tree; `target` is only compared, never read.
pub unsafe fn contains_pointer(tree: *mut pg_sys::Node, target: *mut pg_sys::Node) -> bool {
    // SAFETY: tree and target are live nodes of the running query's plan.
    unsafe { walk(tree, target.cast()) }
}

/// # Safety
/// Called by `expression_tree_walker` on the nodes of a live tree, with `target` as given.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn walk(node: *mut pg_sys::Node, target: *mut std::ffi::c_void) -> bool {
    // SAFETY: PostgreSQL's walker passes live nodes or NULL.
    unsafe {
        !node.is_null()
            && (node.cast() == target || pg_sys::expression_tree_walker(node, Some(walk), target))
    }
}
