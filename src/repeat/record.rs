//! Recording the answers of a starting plan's Agg nodes, to keep those
//! that finish (`store::keep`) when their execution ends.
//!
//! A recorded node runs to its end at its first call, whatever is above
//! it: its rows are held (a tuplestore within work_mem) and handed out as
//! they are asked for. A parent that stops early (a LIMIT over a sorted
//! aggregation, a merge join, a cursor fetched in part) would otherwise
//! leave the answer unfinished, and whether a repeat is free would follow
//! the plan: a hashed aggregation under a Sort runs to its end, a sorted
//! one under the LIMIT does not.

use super::serve::{keyed, Calls};
use super::store;
use crate::pg_list::list_nodes;
use pgrx::pg_sys;
use std::cell::RefCell;

/// Recording an Agg node's output, to keep it when its execution ends.
struct Recorder {
    state: *mut pg_sys::PlanState,
    /// Its execution (read without the state, whose memory may be gone).
    estate: *mut pg_sys::EState,
    inner: pg_sys::ExecProcNodeMtd,
    /// The answer's key in the store; None for a node only held (`hold`).
    key: Option<[u8; 32]>,
    /// Each column's binary send function.
    send: Vec<pg_sys::Oid>,
    rows: Vec<Vec<u8>>,
    bytes: usize,
    /// Over the store's limit: nothing more is recorded.
    over: bool,
    /// The node's whole output, read at its first call (null before).
    held: *mut pg_sys::Tuplestorestate,
    /// The slot the held rows are read into.
    out: *mut pg_sys::TupleTableSlot,
    /// The finished answer, stored only when its execution ends without
    /// error (`ended`): after the run time's delay and the sending of the
    /// held rows, so that a timeout or cancel during them leaves nothing
    /// to serve (a free repeat would tell that the run itself was shorter).
    answer: Option<Vec<u8>>,
}

thread_local! {
    static RECORDERS: RefCell<Vec<Recorder>> = const { RefCell::new(Vec::new()) };
}

/// Records the output of every Agg node with an answer key in the started
/// query `query` (whose plan's marked calls `calls` describes).
///
/// # Safety
/// `query` is the live QueryDesc just started (its plan state built); inside a transaction.
pub unsafe fn record(query: *mut pg_sys::QueryDesc, calls: &Calls) {
    // SAFETY: the caller's contract; the plan state tree and es_subplanstates are the execution's.
    unsafe {
        let found = keyed((*query).plannedstmt, calls);
        if found.is_empty() {
            return;
        }
        let states = plan_states(query);
        for (_, f) in found {
            let Some(&state) = states.iter().find(|s| (***s).plan == f.plan) else {
                continue;
            };
            if store::lookup(&f.key).is_some() {
                continue;
            }
            // The node's output columns, as its target list types them (its result slot's).
            let send = list_nodes((*f.plan).targetlist)
                .into_iter()
                .map(|entry| {
                    let type_ =
                        pg_sys::exprType((*(entry as *mut pg_sys::TargetEntry)).expr.cast());
                    let mut send = pg_sys::InvalidOid;
                    let mut varlena = false;
                    pg_sys::getTypeBinaryOutputInfo(type_, &mut send, &mut varlena);
                    send
                })
                .collect();
            wrap(state, Some(f.key), send);
        }
    }
}

/// Holds every node of the started analyst's query `query` that
/// finalizes a dpnoise aggregate and is not recorded already: it runs to
/// its end at its first call, and a rescan (the inner side of a nested
/// loop, a subquery evaluated again) hands out the same rows from the
/// first, so each release is drawn once whatever the plan (the plan check
/// admits a rescanned one only when no parameter from outside it can
/// change its rows).
///
/// # Safety
/// `query` is the live QueryDesc just started; inside a transaction.
pub unsafe fn hold(query: *mut pg_sys::QueryDesc) {
    // SAFETY: the caller's contract; the plan state tree and es_subplanstates are the execution's.
    unsafe {
        for state in plan_states(query) {
            if !crate::gate::plan::finalizes_release((*state).plan)
                || RECORDERS.with(|r| r.borrow().iter().any(|x| x.state == state))
            {
                continue;
            }
            wrap(state, None, Vec::new());
        }
    }
}

/// Puts `recording` in place of the node's ExecProcNode, with its
/// recorder: `key` the answer's store key (None: only held, nothing
/// recorded), `send` its columns' binary send functions.
///
/// # Safety
/// `state` is a live, started Agg node's state; inside its execution.
unsafe fn wrap(state: *mut pg_sys::PlanState, key: Option<[u8; 32]>, send: Vec<pg_sys::Oid>) {
    // SAFETY: the caller's contract.
    unsafe {
        let inner = (*state).ExecProcNodeReal;
        watch((*state).state);
        RECORDERS.with(|r| {
            r.borrow_mut().push(Recorder {
                state,
                estate: (*state).state,
                inner,
                over: key.is_none(),
                key,
                send,
                rows: Vec::new(),
                bytes: 8,
                held: std::ptr::null_mut(),
                out: std::ptr::null_mut(),
                answer: None,
            });
        });
        (*state).ExecProcNodeReal = Some(recording);
    }
}

/// Every node of a started query's plan state, its subplans' too.
///
/// # Safety
/// `query` is the live QueryDesc just started (its plan state built).
unsafe fn plan_states(query: *mut pg_sys::QueryDesc) -> Vec<*mut pg_sys::PlanState> {
    // SAFETY: the caller's contract; the plan state tree and es_subplanstates are the execution's.
    unsafe {
        let mut states = Vec::new();
        let mut roots = vec![(*query).planstate];
        roots.extend(
            list_nodes((*(*query).estate).es_subplanstates)
                .into_iter()
                .map(|s| s as *mut pg_sys::PlanState),
        );
        while let Some(state) = roots.pop() {
            if state.is_null() {
                continue;
            }
            states.push(state);
            roots.extend(crate::budget::plan_children(state));
        }
        states
    }
}

/// The execution `estate` ended without error: the answers it finished are
/// stored, and its recorders forgotten.
pub fn ended(estate: *mut pg_sys::EState) {
    RECORDERS.with(|r| {
        r.borrow_mut().retain_mut(|x| {
            if x.estate != estate {
                return true;
            }
            // SAFETY: a recorder's tuplestore lives until its execution's memory goes, after
            // this (an aborted one's recorders go with that memory: `watch`).
            unsafe {
                if !x.held.is_null() {
                    pg_sys::tuplestore_end(x.held);
                }
            }
            if let (Some(key), Some(answer)) = (x.key, x.answer.take()) {
                store::keep(&key, &answer);
            }
            false
        })
    });
}

/// The execution `estate` ran to its end: each recorded node it never
/// called (the inner side of a hash join whose other side was empty, a
/// subquery a CASE never reached) runs now, to its end, so that its answer
/// is kept whatever the plan chose to skip: it was paid for, and whether
/// its repeat is free must not follow the plan. A node above a Gather, a
/// foreign or a custom scan is left (those are shut down by now).
///
/// # Safety
/// `estate` is the live EState of an execution whose run just ended, inside it.
pub unsafe fn complete(estate: *mut pg_sys::EState) {
    let idle: Vec<*mut pg_sys::PlanState> = RECORDERS.with(|r| {
        r.borrow()
            .iter()
            .filter(|x| x.key.is_some() && x.held.is_null() && x.estate == estate)
            .map(|x| x.state)
            .collect()
    });
    for state in idle {
        // SAFETY: the caller's contract; the node was started and never called.
        unsafe {
            if !restartable((*state).plan) {
                continue;
            }
            let old = pg_sys::MemoryContextSwitchTo((*estate).es_query_cxt);
            fill(state);
            pg_sys::MemoryContextSwitchTo(old);
        }
    }
}

/// Whether nothing under `plan` is shut down at the end of a run (a Gather
/// and its workers, a foreign or custom scan).
///
/// # Safety
/// `plan` is null or a live Plan.
unsafe fn restartable(plan: *mut pg_sys::Plan) -> bool {
    // SAFETY: the caller's contract; casts follow node tags.
    unsafe {
        if plan.is_null() {
            return true;
        }
        use pg_sys::NodeTag::*;
        let children = match (*plan).type_ {
            T_Gather | T_GatherMerge | T_CustomScan | T_ForeignScan => return false,
            T_Append => crate::pg_list::list_nodes((*(plan as *mut pg_sys::Append)).appendplans),
            T_MergeAppend => {
                crate::pg_list::list_nodes((*(plan as *mut pg_sys::MergeAppend)).mergeplans)
            }
            T_SubqueryScan => vec![(*(plan as *mut pg_sys::SubqueryScan)).subplan.cast()],
            _ => Vec::new(),
        };
        children.into_iter().all(|c| restartable(c.cast()))
            && restartable((*plan).lefttree)
            && restartable((*plan).righttree)
    }
}

/// A (sub)transaction aborted: the executions in it ended without their
/// ExecutorEnd, so what they finished is not stored; their recorders go
/// with their memory (`watch`). Those of executions outside it (a cursor
/// opened before a savepoint rolled back to) stay, and hand out their rows.
pub fn aborted() {}

thread_local! {
    /// The executions whose memory `forget_execution` watches.
    static WATCHED: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// Forgets the recorders of `estate` when its memory goes (at its end, or
/// when its (sub)transaction aborts): no later execution, whose nodes may
/// take the same addresses, finds them.
///
/// # Safety
/// `estate` is a live EState; inside a transaction.
unsafe fn watch(estate: *mut pg_sys::EState) {
    if WATCHED.with(|w| w.borrow().contains(&(estate as usize))) {
        return;
    }
    // SAFETY: the caller's contract; the callback lives in the memory it watches.
    unsafe {
        let callback = pg_sys::MemoryContextAlloc(
            (*estate).es_query_cxt,
            std::mem::size_of::<pg_sys::MemoryContextCallback>(),
        ) as *mut pg_sys::MemoryContextCallback;
        (*callback).func = Some(forget_execution);
        (*callback).arg = estate.cast();
        pg_sys::MemoryContextRegisterResetCallback((*estate).es_query_cxt, callback);
    }
    WATCHED.with(|w| w.borrow_mut().push(estate as usize));
}

/// # Safety
/// Called by PostgreSQL as a memory context reset callback with the EState `watch` registered.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn forget_execution(arg: *mut std::ffi::c_void) {
    let estate = arg as *mut pg_sys::EState;
    WATCHED.with(|w| w.borrow_mut().retain(|x| *x != estate as usize));
    // The states are not read: their memory is going.
    RECORDERS.with(|r| r.borrow_mut().retain(|x| x.estate != estate));
}

/// The Agg node's ExecProcNode while it is recorded: at its first call,
/// runs the node to its end, keeping a copy of each row (`fill`); hands
/// the held rows out, from the first again after a rescan.
///
/// # Safety
/// Called by the executor with the live PlanState `record` wrapped.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn recording(
    state: *mut pg_sys::PlanState,
) -> *mut pg_sys::TupleTableSlot {
    let Some((held, out)) = RECORDERS.with(|r| {
        r.borrow()
            .iter()
            .rev()
            .find(|x| x.state == state)
            .map(|x| (x.held, x.out))
    }) else {
        return std::ptr::null_mut();
    };
    // SAFETY: the executor's contract; `state` is an AggState (only Agg nodes are recorded); the
    // tuplestore and slot live in the execution's memory.
    unsafe {
        let (held, out) = if held.is_null() {
            fill(state)
        } else {
            // A rescan (ExecReScanAgg clears agg_done, which the run to
            // the end set): the same rows again, from the first.
            let agg = state as *mut pg_sys::AggState;
            if !(*agg).agg_done {
                pg_sys::tuplestore_rescan(held);
                (*agg).agg_done = true;
            }
            (held, out)
        };
        // In the node's own result slot, of the kind its parent's
        // expressions were built for.
        let result = (*state).ps_ResultTupleSlot;
        if pg_sys::tuplestore_gettupleslot(held, true, false, out) {
            pg_sys::ExecCopySlot(result, out)
        } else {
            pg_sys::ExecClearTuple(result)
        }
    }
}

/// Runs the recorded node to its end, holding its rows and keeping a copy
/// of each; then holds its answer until its execution ends (`ended`).
///
/// # Safety
/// `state` is a live recorded AggState, at its first call; inside its execution.
unsafe fn fill(
    state: *mut pg_sys::PlanState,
) -> (*mut pg_sys::Tuplestorestate, *mut pg_sys::TupleTableSlot) {
    let (inner, send) = RECORDERS.with(|r| {
        let r = r.borrow();
        let x = r.iter().rev().find(|x| x.state == state).expect("recorded");
        (
            x.inner.expect("a started node has an ExecProcNode"),
            x.send.clone(),
        )
    });
    // SAFETY: the caller's contract; the tuplestore and the slot are made in the execution's
    // memory; each slot is the node's live result slot, read after slot_getallattrs and sent
    // with its column's send function. An error in `inner` unwinds through here, which holds
    // no RECORDERS borrow, to the abort that clears RECORDERS.
    unsafe {
        let estate = (*state).state;
        let old = pg_sys::MemoryContextSwitchTo((*estate).es_query_cxt);
        let held = pg_sys::tuplestore_begin_heap(false, false, pg_sys::work_mem);
        let out = pg_sys::ExecAllocTableSlot(
            &raw mut (*estate).es_tupleTable,
            (*state).ps_ResultTupleDesc,
            &raw const pg_sys::TTSOpsMinimalTuple,
        );
        pg_sys::MemoryContextSwitchTo(old);
        RECORDERS.with(|r| {
            if let Some(x) = r.borrow_mut().iter_mut().rev().find(|x| x.state == state) {
                x.held = held;
                x.out = out;
            }
        });
        loop {
            let slot = inner(state);
            if slot.is_null() || (*slot).tts_flags & pg_sys::TTS_FLAG_EMPTY as u16 != 0 {
                break;
            }
            pg_sys::slot_getallattrs(slot);
            let row = encode(slot, &send);
            pg_sys::tuplestore_puttupleslot(held, slot);
            RECORDERS.with(|r| {
                let mut r = r.borrow_mut();
                let Some(x) = r.iter_mut().rev().find(|x| x.state == state) else {
                    return;
                };
                if x.over {
                    return;
                }
                x.bytes += row.len();
                if x.bytes > store::MOST_BYTES {
                    x.over = true;
                    x.rows.clear();
                    return;
                }
                x.rows.push(row);
            });
        }
        RECORDERS.with(|r| {
            let mut r = r.borrow_mut();
            let Some(x) = r.iter_mut().rev().find(|x| x.state == state) else {
                return;
            };
            if x.over {
                return;
            }
            let mut answer = Vec::with_capacity(x.bytes);
            answer.extend_from_slice(&(x.send.len() as u32).to_le_bytes());
            answer.extend_from_slice(&(x.rows.len() as u32).to_le_bytes());
            for row in x.rows.drain(..) {
                answer.extend_from_slice(&row);
            }
            x.answer = Some(answer);
        });
        (held, out)
    }
}

/// A row's columns, each as a presence byte, then its length and its
/// binary form.
///
/// # Safety
/// `slot` holds a row whose attributes are all deformed; `send` its columns' send functions.
unsafe fn encode(slot: *mut pg_sys::TupleTableSlot, send: &[pg_sys::Oid]) -> Vec<u8> {
    // SAFETY: the caller's contract.
    unsafe {
        let mut row = Vec::new();
        for (i, send) in send.iter().enumerate() {
            if *(*slot).tts_isnull.add(i) {
                row.push(0u8);
                continue;
            }
            let bytes = pg_sys::OidSendFunctionCall(*send, *(*slot).tts_values.add(i));
            let len = pgrx::varlena::varsize_any_exhdr(bytes.cast());
            let body = std::slice::from_raw_parts(
                pgrx::varlena::vardata_any(bytes.cast()) as *const u8,
                len,
            );
            row.push(1);
            row.extend_from_slice(&(len as u32).to_le_bytes());
            row.extend_from_slice(body);
            pg_sys::pfree(bytes.cast());
        }
        row
    }
}
