//! The plan check: what PostgreSQL will execute for an analyst's statement,
//! judged at ExecutorStart (for fresh and cached plans alike), before
//! anything is read or charged. The query-tree checks (`check_query`) give
//! early, friendly refusals; this is the guarantee, because the planner
//! pulls subqueries up into join clauses, leaves some constant expressions
//! unfolded, and evaluates public parts lazily, only once a protected row
//! reaches them.
//!
//! The principle: while the statement runs, nothing it does may depend on a
//! protected row except the inputs of the dpnoise aggregates. So below every
//! plan node that finalizes a dpnoise aggregate (a *consumer*) whose input
//! reads a protected table:
//! - every expression evaluated (quals, join clauses, target lists, index
//!   and hash keys, aggregate arguments; public parts too, which may run
//!   only when a protected row arrives) is total and silent: LEAKPROOF,
//!   allowed by the DBA, or one of the few built-in functions proven total
//!   below; no volatile function but dpnoise's own draw, no subplan, no
//!   domain, XML or record-returning function;
//! - only plan nodes whose work is fixed by their input run there (no CTE
//!   scan, which fills its CTE lazily, no foreign or sample scan, no LIMIT
//!   over protected rows);
//! - a protected row meets at most `dpnoise.max_public_fanout` public rows,
//!   counted from the public side alone;
//! - the consumer, when rescanned (the inner side of a nested loop, a
//!   subquery run per row), reads no parameter set outside it: it is held
//!   (`repeat::hold`), runs once and hands out the same rows again, so
//!   each of its releases is charged before it runs and drawn once, and
//!   whether a statement is admitted does not follow the join the planner
//!   chose. A correlated one stays refused.
//!
//! A protected table read anywhere else is refused, and so is any read of
//! one under SERIALIZABLE isolation (its predicate locks record which
//! scans ran). Every analyst
//! statement, protected or not, is also refused the statistics functions
//! (`pg_stat_*`), which count accesses to protected rows.

use super::catalog::Protected;
use super::{list_items, refuse, Checked, Refusal, SHAPE};
use total::Total;

mod fanout;
mod total;

/// How many expression steps (calls, tests, branches) evaluated among
/// protected rows weigh as much as one more public row met: a step costs
/// 20 to 50 ns, a narrow row passed on about 50 ns, and a query is
/// evaluated for each public row a protected row meets (an attack ran 95
/// comparisons for each of 900 public rows behind a condition: 200 ms
/// against 3 ms, when the first 100 steps were free).
const STEPS_PER_ROW: f64 = 10.0;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::collections::HashSet;

/// What the check carries over one statement.
struct Check<'a> {
    stmt: *mut pg_sys::PlannedStmt,
    protected: &'a Protected,
    /// dpnoise's schema: its aggregates are the consumers.
    own: Option<pg_sys::Oid>,
    /// PARAM_EXEC numbers a nested loop sets from its outer row.
    nestloop_params: HashSet<i32>,
    /// Protected scans inside a consumer's input.
    consumed: HashSet<usize>,
    /// The public inputs of the consumer's joins with protected rows.
    public_joins: Vec<*mut pg_sys::Plan>,
    /// The table columns (range table index, column) that expressions in
    /// the consumer's input read: a public value's width counts only where
    /// it is read.
    read: std::cell::RefCell<HashSet<(i32, i16)>>,
    /// How many expression steps the consumer's input evaluates for a row.
    steps: std::cell::Cell<u64>,
    /// What one protected row can make the statement do, summed over the
    /// consumers that read it: the rows and pages it meets, weighed by the
    /// expression steps run for each (the run time's bound, `output::timing`).
    work: std::cell::Cell<f64>,
    /// The statement's parameters (null: none), whose sizes count as steps.
    params: pg_sys::ParamListInfo,
}

/// Checks the plan of an analyst's statement; what one protected row can
/// make it do (`Check::work`: 0 when it reads none).
///
/// # Safety
/// `stmt` is a live PlannedStmt, inside a transaction.
pub(super) unsafe fn check(
    stmt: *mut pg_sys::PlannedStmt,
    params: pg_sys::ParamListInfo,
    protected: &Protected,
) -> Result<f64, Refusal> {
    // SAFETY: the caller's contract: every node reached below is a live node of the plan.
    unsafe {
        let nodes = crate::parameters::plan_nodes(stmt);
        no_statistics(&nodes)?;
        let mut check = Check {
            stmt,
            protected,
            own: super::own_schema(),
            nestloop_params: HashSet::new(),
            consumed: HashSet::new(),
            public_joins: Vec::new(),
            read: std::cell::RefCell::new(HashSet::new()),
            steps: std::cell::Cell::new(0),
            work: std::cell::Cell::new(0.0),
            params,
        };
        for &plan in &nodes {
            if (*plan).type_ == pg_sys::NodeTag::T_NestLoop {
                for param in list_items::<pg_sys::NestLoopParam>(
                    (*(plan as *mut pg_sys::NestLoop)).nestParams,
                ) {
                    check.nestloop_params.insert((*param).paramno);
                }
            }
        }
        // Subplans that are not init plans run once per evaluation.
        let mut init = HashSet::new();
        for &plan in &nodes {
            for sub in list_items::<pg_sys::SubPlan>((*plan).initPlan) {
                init.insert((*sub).plan_id);
            }
        }
        // The planner hook planned such a statement again without workers.
        if released_in_workers(stmt) {
            return Err(refuse(
                "a dpnoise aggregate would run in parallel workers, each drawing its own noise",
                "SET max_parallel_workers_per_gather = 0, or prepare the statement again.",
            ));
        }
        check.visit((*stmt).planTree, false)?;
        for (i, sub) in list_items::<pg_sys::Plan>((*stmt).subplans)
            .into_iter()
            .enumerate()
        {
            check.visit(sub, !init.contains(&(i as i32 + 1)))?;
        }
        let mut reads = false;
        for &plan in &nodes {
            if check.protected_scan(plan) {
                if !check.consumed.contains(&(plan as usize)) {
                    return Err(refuse("this plan reads a protected table outside the input of a dpnoise aggregate", SHAPE));
                }
                reads = true;
            }
        }
        // Under SERIALIZABLE every scan that runs leaves a predicate lock
        // (shown in pg_locks, and felt as a serialization failure by a
        // writer), and a public side may run only once a protected row comes.
        if reads && pg_sys::XactIsoLevel == pg_sys::XACT_SERIALIZABLE as i32 {
            return Err(refuse(
                "under SERIALIZABLE isolation PostgreSQL records which parts of the plan ran (predicate locks), which can follow protected rows",
                "Run analysts' queries under READ COMMITTED or REPEATABLE READ (SET TRANSACTION ISOLATION LEVEL REPEATABLE READ).",
            ));
        }
        Ok(check.work.get())
    }
}

/// Refuses a plan that calls a statistics function. Run when a statement
/// is planned too: PL/pgSQL evaluates a simple expression (`RETURN
/// pg_stat_get_numscans(…)`) without ExecutorStart.
///
/// # Safety
/// `stmt` is a live PlannedStmt, inside a transaction.
pub(super) unsafe fn planned(stmt: *mut pg_sys::PlannedStmt) -> Checked {
    // SAFETY: the caller's contract.
    unsafe { no_statistics(&crate::parameters::plan_nodes(stmt)) }
}

/// # Safety
/// `nodes` are live plan nodes.
unsafe fn no_statistics(nodes: &[*mut pg_sys::Plan]) -> Checked {
    // SAFETY: the caller's contract.
    unsafe {
        for &plan in nodes {
            for expr in expressions(plan) {
                statistics(expr)?;
            }
        }
    }
    Ok(())
}

/// Refuses the statistics functions: they count accesses to tables and
/// indexes, protected ones too, so a later statement could read how many
/// protected rows an earlier one met.
///
/// # Safety
/// `node` is null or a live expression tree.
unsafe fn statistics(node: *mut pg_sys::Node) -> Checked {
    /// # Safety
    /// Called by `expression_tree_walker` with live nodes and a `*mut Option<String>`.
    #[pg_guard]
    unsafe extern "C-unwind" fn find(
        node: *mut pg_sys::Node,
        context: *mut std::ffi::c_void,
    ) -> bool {
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            if node.is_null() {
                return false;
            }
            if let Some(funcid) = function_of(node) {
                let name = super::leakproof::function_name(funcid);
                if name.starts_with("pg_stat") {
                    *(context as *mut Option<String>) = Some(name);
                    return true;
                }
            }
            pg_sys::expression_tree_walker(node, Some(find), context)
        }
    }
    let mut found: Option<String> = None;
    // SAFETY: the caller's contract; the walk only reads.
    unsafe { find(node, (&raw mut found).cast()) };
    match found {
        Some(name) => Err(refuse(
            &format!("{name} reads access statistics, which count protected rows too"),
            "Analysts cannot read the statistics views and functions (pg_stat_*, pg_statio_*).",
        )),
        None => Ok(()),
    }
}

/// The function an expression node calls, if it is a call.
///
/// # Safety
/// `node` is a live expression node.
unsafe fn function_of(node: *mut pg_sys::Node) -> Option<pg_sys::Oid> {
    // SAFETY: the caller's contract; casts follow the node tags.
    unsafe {
        use pg_sys::NodeTag::*;
        match (*node).type_ {
            T_FuncExpr => Some((*(node as *mut pg_sys::FuncExpr)).funcid),
            T_OpExpr | T_DistinctExpr | T_NullIfExpr => {
                let op = node as *mut pg_sys::OpExpr;
                pg_sys::set_opfuncid(op);
                Some((*op).opfuncid)
            }
            T_ScalarArrayOpExpr => {
                let op = node as *mut pg_sys::ScalarArrayOpExpr;
                pg_sys::set_sa_opfuncid(op);
                Some((*op).opfuncid)
            }
            T_Aggref => Some((*(node as *mut pg_sys::Aggref)).aggfnoid),
            T_WindowFunc => Some((*(node as *mut pg_sys::WindowFunc)).winfnoid),
            _ => None,
        }
    }
}

/// Every expression a plan node evaluates (its target list, quals and the
/// fields of its kind), as nodes for the tree walkers.
///
/// # Safety
/// `plan` is a live plan node.
unsafe fn expressions(plan: *mut pg_sys::Plan) -> Vec<*mut pg_sys::Node> {
    // SAFETY: the caller's contract; casts follow the node tags.
    unsafe {
        use pg_sys::NodeTag::*;
        let mut out: Vec<*mut pg_sys::Node> = vec![(*plan).targetlist.cast(), (*plan).qual.cast()];
        match (*plan).type_ {
            T_Result => out.push((*(plan as *mut pg_sys::Result)).resconstantqual),
            T_IndexScan => {
                let scan = plan as *mut pg_sys::IndexScan;
                out.extend(
                    [
                        (*scan).indexqual,
                        (*scan).indexqualorig,
                        (*scan).indexorderby,
                        (*scan).indexorderbyorig,
                    ]
                    .map(|l| l.cast()),
                );
            }
            T_IndexOnlyScan => {
                let scan = plan as *mut pg_sys::IndexOnlyScan;
                out.extend(
                    [(*scan).indexqual, (*scan).recheckqual, (*scan).indexorderby]
                        .map(|l| l.cast()),
                );
            }
            T_BitmapIndexScan => {
                let scan = plan as *mut pg_sys::BitmapIndexScan;
                out.extend([(*scan).indexqual, (*scan).indexqualorig].map(|l| l.cast()));
            }
            T_BitmapHeapScan => out.push(
                (*(plan as *mut pg_sys::BitmapHeapScan))
                    .bitmapqualorig
                    .cast(),
            ),
            T_TidScan => out.push((*(plan as *mut pg_sys::TidScan)).tidquals.cast()),
            T_TidRangeScan => out.push((*(plan as *mut pg_sys::TidRangeScan)).tidrangequals.cast()),
            T_FunctionScan => {
                for function in list_items::<pg_sys::RangeTblFunction>(
                    (*(plan as *mut pg_sys::FunctionScan)).functions,
                ) {
                    out.push((*function).funcexpr);
                }
            }
            T_ValuesScan => out.push((*(plan as *mut pg_sys::ValuesScan)).values_lists.cast()),
            T_NestLoop | T_MergeJoin | T_HashJoin => {
                out.push((*(plan as *mut pg_sys::Join)).joinqual.cast());
                match (*plan).type_ {
                    T_MergeJoin => {
                        out.push((*(plan as *mut pg_sys::MergeJoin)).mergeclauses.cast())
                    }
                    T_HashJoin => {
                        let join = plan as *mut pg_sys::HashJoin;
                        out.extend([(*join).hashclauses, (*join).hashkeys].map(|l| l.cast()));
                    }
                    _ => {}
                }
            }
            T_Hash => out.push((*(plan as *mut pg_sys::Hash)).hashkeys.cast()),
            T_Memoize => out.push((*(plan as *mut pg_sys::Memoize)).param_exprs.cast()),
            T_WindowAgg => {
                let window = plan as *mut pg_sys::WindowAgg;
                out.extend([
                    (*window).startOffset,
                    (*window).endOffset,
                    (*window).runCondition.cast(),
                ]);
            }
            T_Limit => {
                let limit = plan as *mut pg_sys::Limit;
                out.extend([(*limit).limitOffset, (*limit).limitCount]);
            }
            T_CustomScan => out.push((*(plan as *mut pg_sys::CustomScan)).custom_exprs.cast()),
            _ => {}
        }
        out.retain(|e| !e.is_null());
        out
    }
}

/// The plan nodes below `plan` (its inputs).
///
/// # Safety
/// `plan` is a live plan node.
unsafe fn children(plan: *mut pg_sys::Plan) -> Vec<*mut pg_sys::Plan> {
    // SAFETY: the caller's contract; casts follow the node tags.
    unsafe {
        use pg_sys::NodeTag::*;
        let mut out = vec![(*plan).lefttree, (*plan).righttree];
        match (*plan).type_ {
            T_Append => out.extend(list_items::<pg_sys::Plan>(
                (*(plan as *mut pg_sys::Append)).appendplans,
            )),
            T_MergeAppend => out.extend(list_items::<pg_sys::Plan>(
                (*(plan as *mut pg_sys::MergeAppend)).mergeplans,
            )),
            T_SubqueryScan => out.push((*(plan as *mut pg_sys::SubqueryScan)).subplan),
            T_BitmapAnd => out.extend(list_items::<pg_sys::Plan>(
                (*(plan as *mut pg_sys::BitmapAnd)).bitmapplans,
            )),
            T_BitmapOr => out.extend(list_items::<pg_sys::Plan>(
                (*(plan as *mut pg_sys::BitmapOr)).bitmapplans,
            )),
            T_CustomScan => out.extend(list_items::<pg_sys::Plan>(
                (*(plan as *mut pg_sys::CustomScan)).custom_plans,
            )),
            _ => {}
        }
        out.retain(|p| !p.is_null());
        out
    }
}

/// Whether `plan` is an Agg node that finalizes a dpnoise aggregate (a
/// release's node; a partial aggregation in a worker is not one).
///
/// # Safety
/// `plan` is null or a live Plan; inside a transaction.
pub(crate) unsafe fn finalizes_release(plan: *mut pg_sys::Plan) -> bool {
    // SAFETY: the caller's contract.
    unsafe {
        if plan.is_null() || (*plan).type_ != pg_sys::NodeTag::T_Agg {
            return false;
        }
        let mut found = Vec::new();
        for list in [(*plan).targetlist, (*plan).qual] {
            super::bounding::collect_aggregates(list.cast(), &mut found);
        }
        found.iter().any(|a| {
            (**a).aggsplit & pg_sys::AGGSPLITOP_SKIPFINAL == 0
                && crate::functions::releasing((**a).aggfnoid).is_some()
        })
    }
}

/// Whether a release of `stmt` may run in a parallel worker: a node that
/// finalizes a dpnoise aggregate below a Gather or Gather Merge (the
/// inner side of a join each worker builds whole runs in every worker,
/// each drawing its own noise for one charge), or in a subplan of a plan
/// with workers (a subplan may run in them). The planner hook then plans
/// the statement again without workers, so that whether it is admitted
/// and what it shows does not follow the plan.
///
/// # Safety
/// `stmt` is a live PlannedStmt; inside a transaction.
pub(crate) unsafe fn released_in_workers(stmt: *mut pg_sys::PlannedStmt) -> bool {
    // SAFETY: the caller's contract; nodes are read through their tags.
    unsafe {
        let nodes = crate::parameters::plan_nodes(stmt);
        let gathers = |p: &&*mut pg_sys::Plan| {
            matches!(
                (***p).type_,
                pg_sys::NodeTag::T_Gather | pg_sys::NodeTag::T_GatherMerge
            )
        };
        if !nodes.iter().any(|p| gathers(&p)) {
            return false;
        }
        let all = nodes.iter().filter(|p| finalizes_release(**p)).count();
        // Those of the main tree that no Gather is above: they run in the leader.
        let mut leader = 0;
        let mut stack = vec![(*stmt).planTree];
        while let Some(plan) = stack.pop() {
            if plan.is_null() || gathers(&&plan) {
                continue;
            }
            if finalizes_release(plan) {
                leader += 1;
            }
            stack.extend(children(plan));
        }
        all > leader
    }
}

/// What one node of a consumer's input is.
struct Input {
    /// Its rows derive from a protected table.
    marked: bool,
}

impl Check<'_> {
    /// The relation a scan node reads, if it reads one.
    ///
    /// # Safety
    /// `plan` is a live node of `self.stmt`.
    unsafe fn scanned(&self, plan: *mut pg_sys::Plan) -> Option<pg_sys::Oid> {
        // SAFETY: the caller's contract; scan nodes begin with a Scan; scanrelid indexes the flat range table.
        unsafe {
            use pg_sys::NodeTag::*;
            let scans = matches!(
                (*plan).type_,
                T_SeqScan
                    | T_SampleScan
                    | T_IndexScan
                    | T_IndexOnlyScan
                    | T_BitmapHeapScan
                    | T_TidScan
                    | T_TidRangeScan
                    | T_ForeignScan
                    | T_CustomScan
            );
            if !scans {
                return None;
            }
            let index = (*(plan as *mut pg_sys::Scan)).scanrelid as usize;
            let rtable = list_items::<pg_sys::RangeTblEntry>((*self.stmt).rtable);
            let rte = *rtable.get(index.checked_sub(1)?)?;
            ((*rte).rtekind == pg_sys::RTEKind::RTE_RELATION).then_some((*rte).relid)
        }
    }

    /// # Safety
    /// As `scanned`.
    unsafe fn protected_scan(&self, plan: *mut pg_sys::Plan) -> bool {
        // SAFETY: the caller's contract.
        unsafe { self.scanned(plan) }
            .is_some_and(|relid| self.protected.tables.contains_key(&relid))
    }

    /// Whether `plan` finalizes a dpnoise aggregate.
    ///
    /// # Safety
    /// `plan` is a live plan node.
    unsafe fn consumer(&self, plan: *mut pg_sys::Plan) -> bool {
        // SAFETY: the caller's contract.
        unsafe {
            if (*plan).type_ != pg_sys::NodeTag::T_Agg {
                return false;
            }
            let mut found = Vec::new();
            for list in [(*plan).targetlist, (*plan).qual] {
                super::bounding::collect_aggregates(list.cast(), &mut found);
            }
            found.iter().any(|a| {
                (**a).aggsplit & pg_sys::AGGSPLITOP_SKIPFINAL == 0
                    && self.own_function((**a).aggfnoid)
            })
        }
    }

    fn own_function(&self, funcid: pg_sys::Oid) -> bool {
        // SAFETY: a syscache lookup by OID inside the caller's transaction.
        self.own.is_some() && self.own == Some(unsafe { pg_sys::get_func_namespace(funcid) })
    }

    /// Finds the consumers at or below `plan`; `rescanned` when `plan` can
    /// run more than once in the statement.
    ///
    /// # Safety
    /// `plan` is null or a live node of `self.stmt`.
    unsafe fn visit(&mut self, plan: *mut pg_sys::Plan, rescanned: bool) -> Checked {
        // SAFETY: the caller's contract.
        unsafe {
            if plan.is_null() {
                return Ok(());
            }
            if self.consumer(plan) {
                return self.consume(plan, rescanned);
            }
            let inner = if (*plan).type_ == pg_sys::NodeTag::T_NestLoop {
                (*plan).righttree
            } else {
                std::ptr::null_mut()
            };
            for child in children(plan) {
                self.visit(child, rescanned || child == inner)?;
            }
            Ok(())
        }
    }

    /// Checks a consumer and its input.
    ///
    /// # Safety
    /// `agg` is a live Agg node of `self.stmt`.
    unsafe fn consume(&mut self, agg: *mut pg_sys::Plan, rescanned: bool) -> Checked {
        // SAFETY: the caller's contract.
        unsafe {
            let input = (*agg).lefttree;
            if input.is_null() || !self.reads_protected(input) {
                return Ok(());
            }
            // A rescanned consumer is held (`repeat::hold`): it runs once
            // and hands out the same rows again, unless a parameter set
            // outside it (a nested loop's outer row, a correlated
            // subquery's) would change its input.
            if rescanned
                && !(*agg).extParam.is_null()
                && pg_sys::bms_num_members((*agg).extParam) > 0
            {
                return Err(refuse(
                    "a dpnoise aggregate of protected rows would run again for each row of another part of the query (a nested loop, or a subquery run per row)",
                    "Compute it once: WITH answers AS MATERIALIZED (SELECT dp_count(...) ...) SELECT ... FROM answers ...",
                ));
            }
            self.public_joins.clear();
            self.read.borrow_mut().clear();
            self.steps.set(0);
            self.input(input)?;
            // The consumer's HAVING runs on every group, shown or not; its
            // aggregates' arguments on every input row. Its other outputs
            // only on the groups it releases.
            let total = Total { check: self };
            total
                .expr((*agg).qual.cast())
                .map_err(|r| at(r, pg_sys::NodeTag::T_Agg))?;
            let mut found = Vec::new();
            super::bounding::collect_aggregates((*agg).targetlist.cast(), &mut found);
            for aggref in found {
                total
                    .expr(aggref.cast())
                    .map_err(|r| at(r, pg_sys::NodeTag::T_Agg))?;
            }
            // After every expression is seen: which public columns they read.
            let joins = std::mem::take(&mut self.public_joins);
            let fanout: f64 = joins.iter().map(|child| self.public_rows(*child)).product();
            // What a protected row costs grows with the expressions run for
            // it and for each public row it meets: a chain of cheap
            // comparisons behind a condition is work no row count shows.
            // Every STEPS_PER_ROW steps weigh one row more, for each public
            // row met.
            let steps = self.steps.get() as f64;
            let work = fanout * (1.0 + steps / STEPS_PER_ROW);
            let limit = crate::gucs::max_public_fanout();
            self.work.set(self.work.get() + work);
            if work > limit as f64 {
                return Err(refuse(
                    &format!(
                        "a protected row here meets up to {} public rows and pages (a row counts once more for each 128 bytes read of it) through {steps:.0} expression steps (each {STEPS_PER_ROW:.0} weigh one more row met), over dpnoise.max_public_fanout = {limit}",
                        if fanout >= 1e15 { "unboundedly many".to_string() } else { format!("{fanout:.0}") }
                    ),
                    "Join protected rows with smaller public tables, lists or series, or filter the public side; the DBA sets the limit.",
                ));
            }
            Ok(())
        }
    }

    /// Whether a protected table is scanned at or below `plan`.
    ///
    /// # Safety
    /// `plan` is a live node of `self.stmt`.
    unsafe fn reads_protected(&self, plan: *mut pg_sys::Plan) -> bool {
        // SAFETY: the caller's contract.
        unsafe {
            self.protected_scan(plan) || children(plan).into_iter().any(|c| self.reads_protected(c))
        }
    }

    /// Checks one node of a consumer's input and what is below it.
    ///
    /// # Safety
    /// `plan` is a live node of `self.stmt`.
    unsafe fn input(&mut self, plan: *mut pg_sys::Plan) -> Result<Input, Refusal> {
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            use pg_sys::NodeTag::*;
            let kind = (*plan).type_;
            let mut inputs = Vec::new();
            for child in children(plan) {
                inputs.push((child, self.input(child)?));
            }
            let protected = self.protected_scan(plan);
            if protected {
                self.consumed.insert(plan as usize);
            }
            let marked = protected || inputs.iter().any(|(_, i)| i.marked);
            let admitted = match kind {
                T_Result | T_SeqScan | T_IndexScan | T_IndexOnlyScan | T_BitmapIndexScan
                | T_BitmapHeapScan | T_BitmapAnd | T_BitmapOr | T_TidScan | T_TidRangeScan
                | T_SubqueryScan | T_ValuesScan | T_Append | T_MergeAppend | T_NestLoop
                | T_MergeJoin | T_HashJoin | T_Hash | T_Material | T_Memoize | T_Sort
                | T_IncrementalSort | T_Group | T_Agg | T_WindowAgg | T_Unique | T_SetOp => true,
                T_Gather | T_GatherMerge if marked => true,
                T_FunctionScan => {
                    self.series(plan)?;
                    true
                }
                // Public rows may be cut by a LIMIT; protected ones may not
                // (which rows pass would depend on their order).
                T_Limit => !marked,
                // Workers started for a public part only once a protected
                // row arrives (a nested loop's inner side, again at each
                // rescan) cost milliseconds each (found by an independent
                // attack: 8 ms against 1 ms, 0.7 s with JIT in the workers).
                T_Gather | T_GatherMerge if !marked => false,
                _ => false,
            };
            if !admitted {
                return Err(refuse(
                    &format!("the plan has a {} node among or beside protected rows", node_name(kind)),
                    "Write the query without it (a CTE as NOT MATERIALIZED or a subquery, no TABLESAMPLE, no foreign tables).",
                ));
            }
            let total = Total { check: self };
            let evaluated = if kind == T_FunctionScan {
                // Its functions are checked by `series`.
                vec![(*plan).targetlist.cast(), (*plan).qual.cast()]
            } else {
                expressions(plan)
            };
            for expr in evaluated {
                total.expr(expr).map_err(|r| at(r, kind))?;
            }
            // A join repeats a protected row once per public row it meets,
            // and may read its public side only once the first protected row
            // comes: a nested loop reads its whole public side for each
            // protected row (an index lookup too: its work follows dead
            // entries as much as visible rows), a merge join as far as the
            // protected keys go, a hash join its probe side only if the hash
            // table holds a row, and each probe walks a bucket's chain: each
            // counts its whole public side. A public build side is also built
            // before any protected row is read: PostgreSQL fetches the outer
            // side's first row first (and skips the build if there is none)
            // only when that looks cheaper than the build, which a start-up
            // cost it cannot beat rules out.
            if marked && matches!(kind, T_NestLoop | T_MergeJoin | T_HashJoin) {
                for (child, input) in &inputs {
                    if !input.marked {
                        if kind == T_HashJoin
                            && *child == (*plan).righttree
                            && !(*plan).lefttree.is_null()
                        {
                            (*(*plan).lefttree).startup_cost = f64::INFINITY;
                        }
                        self.public_joins.push(*child);
                    }
                }
            }
            Ok(Input { marked })
        }
    }
}

/// A plan node's kind, for messages.
fn node_name(tag: pg_sys::NodeTag) -> String {
    use pg_sys::NodeTag::*;
    match tag {
        T_CteScan => "CTE scan (a CTE is filled when first read)".into(),
        T_SampleScan => "TABLESAMPLE".into(),
        T_ForeignScan => "foreign scan".into(),
        T_Limit => "LIMIT over protected rows".into(),
        T_ProjectSet => "set-returning function".into(),
        T_RecursiveUnion | T_WorkTableScan => "recursive query".into(),
        T_LockRows => "FOR UPDATE/SHARE".into(),
        T_ModifyTable => "data-modifying".into(),
        T_CustomScan => "custom scan".into(),
        T_Gather | T_GatherMerge => "parallel query over a public part (its workers would start only once a protected row arrives; SET max_parallel_workers_per_gather = 0)".into(),
        _ => format!("node {}", tag as u32),
    }
}

/// Names, in a refusal, the plan node where the expression runs.
fn at(mut refusal: Refusal, tag: pg_sys::NodeTag) -> Refusal {
    use pg_sys::NodeTag::*;
    let node = match tag {
        T_SeqScan => "sequential scan",
        T_IndexScan => "index scan",
        T_IndexOnlyScan => "index-only scan",
        T_BitmapHeapScan => "bitmap heap scan",
        T_BitmapIndexScan => "bitmap index scan",
        T_TidScan | T_TidRangeScan => "TID scan",
        T_SubqueryScan => "subquery scan",
        T_FunctionScan => "function scan",
        T_ValuesScan => "VALUES scan",
        T_NestLoop => "nested loop",
        T_HashJoin => "hash join",
        T_MergeJoin => "merge join",
        T_Hash => "hash",
        T_Agg => "aggregate",
        T_WindowAgg => "window aggregate",
        T_Result => "result",
        T_Memoize => "memoize",
        T_Limit => "limit",
        _ => "plan",
    };
    refusal.what = format!("{} (in the plan's {node})", refusal.what);
    refusal
}
