//! Which releases are paid for: the plan's prepaid call sites, and each
//! call site's coverage in the current statement.
//!
//! `prepaid` keeps what a starting execution paid for, by call site: an
//! aggregate's by its Agg node and number (`aggno`), for as many grouping
//! sets as the node computes; a per-row function's by its expression node.
//! A call site's first release in a grouping set takes one, and its later
//! releases of the set are covered by its `Paid` (in `fn_extra`). A rescan
//! of its node forgets that coverage (`watch_rescans`): the next release
//! finds nothing prepaid and is charged then.

use super::{charge, nodes, outer_user, Cap, Charge, Identified};
use crate::call_site::Paid;
use pgrx::pg_sys;
use std::cell::{Cell, RefCell};

/// One call site a starting execution paid for.
#[derive(Clone, Copy)]
pub struct Site {
    /// The Agg plan node finalizing the aggregate, or the per-row call's
    /// expression node.
    pub node: usize,
    /// The aggregate's number in its Agg (`aggno`); -1 for a per-row call.
    pub aggno: i32,
    /// The grouping sets paid for (1 for a plain aggregate or a per-row call).
    pub sets: u32,
    /// The (ε, δ) its function pays with.
    pub epsilon: f64,
    pub delta: f64,
}

struct Entry {
    estate: usize,
    role: pg_sys::Oid,
    site: Site,
}

/// Past this many entries (executions that never ended, each paid for), the
/// oldest are dropped: a call site that finds none is charged again, never
/// less.
const MOST_ENTRIES: usize = 4096;

thread_local! {
    static PREPAID: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
    /// (statement, the ε it has spent, its cap).
    static SPENT: Cell<(u64, f64, Option<Cap>)> = const { Cell::new((0, 0.0, None)) };
    /// The cap of a statement that paid nothing ahead (`set_cap_source`).
    static CAP_SOURCE: Cell<Option<fn() -> Option<Cap>>> = const { Cell::new(None) };
}

/// Tells the budget where the cap of a statement that paid nothing ahead
/// comes from (the charge stage, which knows the analyst's setting).
pub fn set_cap_source(source: fn() -> Option<Cap>) {
    CAP_SOURCE.with(|c| c.set(Some(source)));
}

/// Keeps what the execution `estate` of `statement` paid for (`epsilon` in all).
pub(super) fn prepaid(
    estate: *mut pg_sys::EState,
    sites: Vec<Site>,
    statement: u64,
    epsilon: f64,
    cap: Option<Cap>,
) {
    let role = outer_user();
    PREPAID.with(|p| {
        let mut p = p.borrow_mut();
        p.extend(sites.into_iter().map(|site| Entry {
            estate: estate as usize,
            role,
            site,
        }));
        let over = p.len().saturating_sub(MOST_ENTRIES);
        p.drain(..over);
    });
    let (at, spent, _) = SPENT.with(Cell::get);
    let spent = if at == statement {
        spent + epsilon
    } else {
        epsilon
    };
    SPENT.with(|s| s.set((statement, spent, cap)));
}

/// The ε the top-level statement `statement` has spent so far, in every
/// execution it ran (functions called per row, a DO block's statements).
pub fn spent(statement: u64) -> f64 {
    let (at, spent, _) = SPENT.with(Cell::get);
    if at == statement {
        spent
    } else {
        0.0
    }
}

/// The execution `estate` ended: what it paid for and did not release stays
/// charged.
pub fn ended(estate: *mut pg_sys::EState) {
    PREPAID.with(|p| {
        let mut p = p.borrow_mut();
        if !p.is_empty() {
            p.retain(|e| e.estate != estate as usize);
        }
    });
}

/// A transaction aborted: every execution in it ended.
pub fn aborted() {
    PREPAID.with(|p| p.borrow_mut().clear());
}

/// Takes one grouping set of the prepaid call site (`node`, `aggno`) at
/// (ε, δ) or more, paid by `role`.
fn take(node: usize, aggno: i32, role: pg_sys::Oid, epsilon: f64, delta: f64) -> bool {
    PREPAID.with(|p| {
        let mut p = p.borrow_mut();
        let found = p.iter_mut().rev().find(|e| {
            e.site.node == node
                && e.site.aggno == aggno
                && e.role == role
                && e.site.sets > 0
                && epsilon <= e.site.epsilon
                && delta <= e.site.delta
        });
        found.map(|e| e.site.sets -= 1).is_some()
    })
}

/// `budget::pay` with the budget enforced.
///
/// # Safety
/// `fcinfo` is the live call of a dpnoise final or per-row function.
#[inline(never)]
pub(super) unsafe fn pay(
    fcinfo: pg_sys::FunctionCallInfo,
    function: &str,
    mechanism: &str,
    (epsilon, delta): (f64, f64),
    identified: Option<Identified>,
) {
    let statement = crate::execution::statement();
    let role = outer_user();
    // SAFETY: fcinfo is the live call (this function's contract).
    let set = unsafe { set_key(fcinfo) };
    // SAFETY: as above; the reference is dropped before anything else reaches the call site.
    let paid = unsafe { crate::call_site::call_site(fcinfo) }.paid();
    if paid.covers(role, statement, set, epsilon, delta) {
        return;
    }
    // Paid for once and for all before this statement started: free.
    if identified.is_some_and(|i| i.paid) {
        return;
    }
    // A parallel worker runs a copy of a fragment of the plan its leader
    // charged whole as it started (every grouping set of every releasing
    // call): covered, until its node is rescanned.
    // SAFETY: a by-value read of ParallelWorkerNumber, -1 outside a parallel worker.
    let leader_paid = unsafe { pg_sys::ParallelWorkerNumber } >= 0
        && !paid.rescanned()
        && crate::functions::named(function).is_some();
    // SAFETY: as above.
    let (node, aggno) = unsafe { site_key(fcinfo) };
    if !leader_paid && !take(node, aggno, role, epsilon, delta) {
        lazy(statement, function, mechanism, (epsilon, delta), identified);
    }
    paid.record(role, statement, set, epsilon, delta);
    if !paid.watching() {
        // SAFETY: fcinfo is the live call; paid lives in the call site, in fn_mcxt, as long as the query.
        unsafe { watch_rescans(fcinfo, paid) };
    }
}

/// Charges a release its statement's plan did not pay for: a rescan, or a
/// call evaluated without an executor start. Counted against the
/// statement's cap first.
#[cold]
fn lazy(
    statement: u64,
    function: &str,
    mechanism: &str,
    (epsilon, delta): (f64, f64),
    identified: Option<Identified>,
) {
    let (at, spent, cap) = SPENT.with(Cell::get);
    let (spent, cap) = if at == statement {
        (spent + epsilon, cap)
    } else {
        (
            epsilon,
            CAP_SOURCE.with(Cell::get).and_then(|source| source()),
        )
    };
    if let Some(cap) = cap.filter(|c| c.epsilon > 0.0 && spent > c.epsilon) {
        (cap.refuse)(spent, cap.epsilon);
    }
    let mechanism = format!("{function} ({mechanism})");
    let identities: Vec<[u8; 32]> = identified.map(|i| i.identity).into_iter().collect();
    // Charged as it comes, its plan unread: under zCDP as any (ε, δ)
    // release (`dpnoise_core::zcdp::approximate_cost`), a Gaussian too.
    let (rho, rho_delta) = dpnoise_core::zcdp::approximate_cost(epsilon, delta, 1);
    charge(&Charge {
        mechanism: &mechanism,
        epsilon,
        delta,
        rho,
        rho_delta,
        releases: 1,
        exact: None,
        identities: &identities,
        repeat: true,
        tables: None,
    });
    SPENT.with(|s| s.set((statement, spent, cap)));
}

/// The grouping set an aggregate's final function is releasing: its phase
/// and number among sorted sets, or its number among hashed ones. 0 for
/// per-row functions and plain aggregates.
///
/// # Safety
/// `fcinfo` is a live call.
unsafe fn set_key(fcinfo: pg_sys::FunctionCallInfo) -> u32 {
    // SAFETY: fcinfo's context, when an AggState, is the live node running this final function.
    unsafe {
        let Some(agg) = agg_state(fcinfo) else {
            return 0;
        };
        let set = (*agg).current_set.max(0) as u32 & 0xffff;
        if !(*agg).hashcontext.is_null() && (*agg).curaggcontext == (*agg).hashcontext {
            1 << 31 | set
        } else {
            ((*agg).current_phase.max(0) as u32 & 0x7fff) << 16 | set
        }
    }
}

/// The call site's key among the prepaid ones: its Agg plan node and
/// aggregate number, or its expression node.
///
/// # Safety
/// `fcinfo` is a live call.
unsafe fn site_key(fcinfo: pg_sys::FunctionCallInfo) -> (usize, i32) {
    // SAFETY: fcinfo is live; an AggState context is the node running this final function, whose
    // plan is the Agg node of the running plan, and AggGetAggref its Aggref (null outside one).
    unsafe {
        match agg_state(fcinfo) {
            Some(agg) => {
                let aggref = pg_sys::AggGetAggref(fcinfo);
                let aggno = if aggref.is_null() {
                    -2
                } else {
                    (*aggref).aggno
                };
                ((*agg).ss.ps.plan as usize, aggno)
            }
            None => ((*(*fcinfo).flinfo).fn_expr as usize, -1),
        }
    }
}

/// The Agg node running this call, if an aggregate runs it.
///
/// # Safety
/// `fcinfo` is a live call.
unsafe fn agg_state(fcinfo: pg_sys::FunctionCallInfo) -> Option<*mut pg_sys::AggState> {
    // SAFETY: a live fcinfo; the context's tag is checked before the cast.
    unsafe {
        let context = (*fcinfo).context;
        (!context.is_null()
            && (*(context as *const pg_sys::Node)).type_ == pg_sys::NodeTag::T_AggState)
            .then_some(context as *mut pg_sys::AggState)
    }
}

/// Forget the coverage when the call site's plan node is rescanned: a
/// rescan releases the same individuals again.
///
/// An aggregate's node is its Agg. A per-row function's is the node whose
/// target list or quals hold its call, found once in the running query's
/// plan (a function in a correlated subquery is rescanned with it); a call
/// evaluated outside any plan (a PL/pgSQL expression) has none, and pays
/// once per statement.
///
/// A rescan shuts down the expression context of every node it restarts,
/// but a sorted aggregate also shuts down its own between groups, so that
/// one cannot tell a rescan from the next group. A rescan of a sorted or
/// plain aggregate always restarts its input node, and nothing else does:
/// the callback goes on the input's context (one is made for an input
/// without its own, such as a Sort). A hashed aggregate resets its own
/// context between groups without shutting it down, and may rescan its hash
/// table without restarting its input: there the callback goes on its own.
///
/// # Safety
/// `fcinfo` is a live call; `paid` is its call site's, which outlives the
/// query's expression contexts (both are freed when the execution ends).
unsafe fn watch_rescans(fcinfo: pg_sys::FunctionCallInfo, paid: &mut Paid) {
    // SAFETY: the nodes are the running query's live PlanStates; the callback's Paid lives in the call site's memory, as long as the query.
    unsafe {
        let node = match agg_state(fcinfo) {
            Some(agg) => &raw mut (*agg).ss.ps,
            None => {
                let expr = (*(*fcinfo).flinfo).fn_expr;
                let Some(node) =
                    crate::execution::running_plan().and_then(|root| node_evaluating(root, expr))
                else {
                    return;
                };
                node
            }
        };
        let input = (*node).lefttree;
        let hashed = (*node).type_ == pg_sys::NodeTag::T_AggState
            && (*(node as *mut pg_sys::AggState)).aggstrategy == pg_sys::AggStrategy::AGG_HASHED;
        let watched = if (*node).type_ != pg_sys::NodeTag::T_AggState || hashed || input.is_null() {
            node
        } else {
            input
        };
        if (*watched).ps_ExprContext.is_null() {
            pg_sys::ExecAssignExprContext((*node).state, watched);
        }
        let econtext = (*watched).ps_ExprContext;
        if econtext.is_null() {
            return;
        }
        pg_sys::RegisterExprContextCallback(
            econtext,
            Some(rescanned),
            pg_sys::Datum::from(paid as *mut Paid),
        );
        paid.set_watching(true);
    }
}

/// The node of the plan under `root` whose target list or quals hold `expr`.
///
/// # Safety
/// `root` is null or a live PlanState tree; `expr` is null or a live node.
unsafe fn node_evaluating(
    root: *mut pg_sys::PlanState,
    expr: *mut pg_sys::Node,
) -> Option<*mut pg_sys::PlanState> {
    // SAFETY: root and its children are live PlanStates of the innermost running query.
    unsafe {
        if root.is_null() || expr.is_null() {
            return None;
        }
        let plan = (*root).plan;
        let holds =
            |list: *mut pg_sys::List| !list.is_null() && nodes::contains_pointer(list.cast(), expr);
        if !plan.is_null() && (holds((*plan).targetlist) || holds((*plan).qual)) {
            return Some(root);
        }
        nodes::children(root)
            .into_iter()
            .find_map(|child| node_evaluating(child, expr))
    }
}

/// # Safety
/// Called by PostgreSQL as an expression-context shutdown callback, with the `Paid` registered in `watch_rescans`.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn rescanned(arg: pg_sys::Datum) {
    let paid = arg.cast_mut_ptr::<Paid>();
    // SAFETY: PostgreSQL passes the live Paid registered in watch_rescans, before that memory is freed.
    unsafe { (*paid).forget() };
}
