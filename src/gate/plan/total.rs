//! The totality check: every expression evaluated among protected rows,
//! or among the public rows joined to them, returns for every input
//! without an error or an effect. LEAKPROOF functions, the DBA's allowed
//! ones, and a few built-ins proven total here pass; nothing else does.

use super::super::{list_items, refuse, Checked, Refusal, SHAPE};
use super::{function_of, Check};
use pgrx::pg_sys;
use pgrx::prelude::*;

/// Bytes of a constant or parameter a call reads that weigh one step.
const BYTES_PER_STEP: f64 = 16.0;

/// Steps a protected column read through `dp_total_capped` weighs: up to
/// `CAPPED_BYTES` of text, which lower() or LIKE work through at about 5 ns
/// a byte (an attack called them 490 times on a person's 40 000-character
/// text behind a condition: 106 ms against 6 ms).
const CAPPED_STEPS: f64 = crate::total::CAPPED_BYTES as f64 / 8.0;

/// Steps a comparison under a locale's collation weighs, beyond its own.
const COLLATED_STEPS: u64 = 9;

use super::super::leakproof::TOTAL_AGGREGATES;

/// The totality check of the expressions evaluated in a consumer's input.
pub(super) struct Total<'a, 'b> {
    pub(super) check: &'a Check<'b>,
}

impl Total<'_, '_> {
    fn function(&self, funcid: pg_sys::Oid, what: &str) -> Checked {
        let protected = self.check.protected;
        // SAFETY: syscache lookups by OID inside a transaction.
        let (volatile, leakproof, retset) = unsafe {
            (
                pg_sys::func_volatile(funcid) == pg_sys::PROVOLATILE_VOLATILE as std::ffi::c_char,
                pg_sys::get_func_leakproof(funcid),
                pg_sys::get_func_retset(funcid),
            )
        };
        // dpnoise's share (of constants) is safe on any row.
        if funcid == protected.share {
            return Ok(());
        }
        if volatile || retset {
            return Err(refuse(
                &format!("{what} {} is volatile or returns a set: it may run, with effects, once per protected row", super::super::leakproof::function_name(funcid)),
                "Use only stable or immutable LEAKPROOF functions in a query over protected rows, its public side included.",
            ));
        }
        if leakproof
            || protected.allowed.contains(&funcid)
            || super::super::substitute::proven_total(funcid)
        {
            return Ok(());
        }
        Err(refuse(
            &format!(
                "{what} {} is not LEAKPROOF and would run among protected rows as executed (it can fail, or show a value, on some rows)",
                super::super::leakproof::function_name(funcid)
            ),
            "Use only LEAKPROOF operators and functions over protected rows and the public rows joined to them, or ask the DBA to allow one with dp_allow_function.",
        ))
    }

    /// # Safety
    /// `node` is null or a live expression node of the plan.
    pub(super) unsafe fn expr(&self, node: *mut pg_sys::Node) -> Checked {
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            if node.is_null() {
                return Ok(());
            }
            use pg_sys::NodeTag::*;
            // A WindowFunc's run condition (17 and later): the operator's call
            // the WindowAgg's run condition, checked too, makes of it.
            if let Some(operator) = crate::versions::window_run_condition(node) {
                self.function(pg_sys::get_opcode(operator), "operator")?;
                return self.children(node);
            }
            if !matches!((*node).type_, T_List | T_TargetEntry) {
                let collated = collation(node)?;
                self.check.steps.set(self.check.steps.get() + collated);
            }
            if !matches!(
                (*node).type_,
                T_List | T_TargetEntry | T_Var | T_Const | T_Param | T_CaseTestExpr | T_RelabelType
            ) {
                self.check.steps.set(self.check.steps.get() + 1);
            }
            if matches!(
                (*node).type_,
                T_FuncExpr
                    | T_OpExpr
                    | T_DistinctExpr
                    | T_NullIfExpr
                    | T_ScalarArrayOpExpr
                    | T_MinMaxExpr
                    | T_Aggref
                    | T_WindowFunc
            ) {
                self.note_reads(node);
            }
            match (*node).type_ {
                T_Var | T_Const | T_CaseTestExpr => Ok(()),
                T_Param => {
                    let param = node as *mut pg_sys::Param;
                    match (*param).paramkind {
                        pg_sys::ParamKind::PARAM_EXTERN => Ok(()),
                        pg_sys::ParamKind::PARAM_EXEC if self.check.nestloop_params.contains(&(*param).paramid) => Ok(()),
                        _ => Err(refuse(
                            "a value computed by a subquery when first needed meets protected rows (it would run only if one arrives)",
                            SHAPE,
                        )),
                    }
                }
                T_Aggref => {
                    let aggref = node as *mut pg_sys::Aggref;
                    let own = self.check.own_function((*aggref).aggfnoid);
                    if !own {
                        if !TOTAL_AGGREGATES.contains(&u32::from((*aggref).aggfnoid))
                            || !(*aggref).aggdistinct.is_null()
                            || !(*aggref).aggorder.is_null()
                        {
                            return Err(refuse(
                                &format!("the aggregate {} would run over protected rows", super::super::leakproof::function_name((*aggref).aggfnoid)),
                                SHAPE,
                            ));
                        }
                    }
                    self.children(node)
                }
                T_WindowFunc => {
                    // The bounding's own (`per_person`): total, and each reads a person's rows once more.
                    let winfnoid = (*(node as *mut pg_sys::WindowFunc)).winfnoid;
                    if u32::from(winfnoid) != pg_sys::F_ROW_NUMBER && !self.check.protected.windows.contains(&winfnoid) {
                        return Err(refuse("a window function would run over protected rows", SHAPE));
                    }
                    self.children(node)
                }
                T_FuncExpr => {
                    let call = node as *mut pg_sys::FuncExpr;
                    if let Some(inner) = clamped_cast(call) {
                        return self.expr(inner);
                    }
                    if (*call).funcresulttype == pg_sys::RECORDOID {
                        return Err(refuse("a function returning a record would run over protected rows", SHAPE));
                    }
                    self.function((*call).funcid, "function")?;
                    self.children(node)
                }
                T_OpExpr | T_DistinctExpr | T_NullIfExpr | T_ScalarArrayOpExpr => {
                    let funcid = function_of(node).unwrap_or(pg_sys::InvalidOid);
                    self.function(funcid, "operator")?;
                    if (*node).type_ == T_ScalarArrayOpExpr {
                        array_length(node as *mut pg_sys::ScalarArrayOpExpr)?;
                    }
                    self.children(node)
                }
                T_MinMaxExpr => {
                    self.function(super::super::leakproof::minmax_comparison(node.cast())?, "comparison")?;
                    self.children(node)
                }
                T_BoolExpr | T_NullTest | T_BooleanTest | T_RelabelType | T_CaseExpr | T_CaseWhen | T_CoalesceExpr | T_List
                | T_TargetEntry => self.children(node),
                T_SubPlan | T_AlternativeSubPlan => Err(refuse(
                    "a subquery would run once per protected row (the planner put it among them)",
                    SHAPE,
                )),
                T_CoerceToDomain => Err(refuse(
                    "a domain's check would run among protected rows (it can fail on some of them)",
                    "Cast to the domain's base type instead.",
                )),
                T_XmlExpr => Err(refuse("an XML expression would run among protected rows (it can fail on some of them)", SHAPE)),
                // CURRENT_DATE, CURRENT_USER and the like: stable, cannot fail.
                T_SQLValueFunction => Ok(()),
                T_ArrayExpr if !(*(node as *mut pg_sys::ArrayExpr)).multidims => self.children(node),
                other => Err(refuse(
                    &format!(
                        "{} can fail on some values and would run among protected rows",
                        expression_name(other)
                    ),
                    "Use only LEAKPROOF operators and functions over protected rows and the public rows joined to them.",
                )),
            }
        }
    }

    /// Records the table columns a call reads (its arguments' columns):
    /// their values are decompressed and compared there. The constants and
    /// query parameters it reads count as steps, one for each
    /// `BYTES_PER_STEP` bytes:
    /// a text comparison copies both its inputs under a collation (an
    /// attack compared a 10 MB parameter 30 times behind a condition: 22 ms
    /// against 1 ms).
    ///
    /// # Safety
    /// `node` is a live expression node; the statement's parameters are live or null.
    unsafe fn note_reads(&self, node: *mut pg_sys::Node) {
        struct Reads<'a> {
            read: &'a mut std::collections::HashSet<(i32, i16)>,
            params: pg_sys::ParamListInfo,
            bytes: f64,
            capped: pg_sys::Oid,
            root: *mut pg_sys::Node,
        }
        /// # Safety
        /// Called by `expression_tree_walker` with live nodes and the Reads.
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
                let reads = &mut *(context as *mut Reads);
                match (*node).type_ {
                    pg_sys::NodeTag::T_Var => {
                        let var = node as *mut pg_sys::Var;
                        if (*var).varno > 0 {
                            reads.read.insert(((*var).varno, (*var).varattno));
                        }
                        if (*var).varnosyn > 0 {
                            reads
                                .read
                                .insert(((*var).varnosyn as i32, (*var).varattnosyn));
                        }
                        return false;
                    }
                    pg_sys::NodeTag::T_Const => {
                        let constant = node as *mut pg_sys::Const;
                        if (*constant).constlen == -1 && !(*constant).constisnull {
                            reads.bytes +=
                                pg_sys::toast_raw_datum_size((*constant).constvalue) as f64;
                        }
                        return false;
                    }
                    pg_sys::NodeTag::T_Param => {
                        reads.bytes += parameter_size(reads.params, node as *mut pg_sys::Param);
                        return false;
                    }
                    // Counted once, as its own call (the calls around it see its bound).
                    pg_sys::NodeTag::T_FuncExpr
                        if node == reads.root
                            && (*(node as *mut pg_sys::FuncExpr)).funcid == reads.capped =>
                    {
                        reads.bytes += CAPPED_STEPS * BYTES_PER_STEP;
                    }
                    _ => {}
                }
                pg_sys::expression_tree_walker(node, Some(find), context)
            }
        }
        let mut read = self.check.read.borrow_mut();
        let capped = self
            .check
            .protected
            .forms
            .get("dp_total_capped")
            .copied()
            .unwrap_or(pg_sys::InvalidOid);
        let mut reads = Reads {
            read: &mut read,
            params: self.check.params,
            bytes: 0.0,
            capped,
            root: node,
        };
        // SAFETY: the caller's contract; the walk only reads the tree.
        unsafe { find(node, (&raw mut reads).cast()) };
        let steps = (reads.bytes / BYTES_PER_STEP).floor() as u64;
        self.check.steps.set(self.check.steps.get() + steps);
    }

    /// Checks each direct child of `node`.
    ///
    /// # Safety
    /// `node` is a live expression node.
    unsafe fn children(&self, node: *mut pg_sys::Node) -> Checked {
        // SAFETY: the caller's contract; `expr` recurses into each child.
        unsafe { super::super::leakproof::each_child(node, &mut |child| self.expr(child)) }
    }
}

/// The length of a variable-length query parameter's value (0 for others
/// and when the statement has none).
///
/// # Safety
/// `params` is null or the statement's live parameters; `param` a live Param.
unsafe fn parameter_size(params: pg_sys::ParamListInfo, param: *mut pg_sys::Param) -> f64 {
    // SAFETY: the caller's contract; a parameter is fetched as the executor fetches it.
    unsafe {
        if params.is_null()
            || (*param).paramkind != pg_sys::ParamKind::PARAM_EXTERN
            || pg_sys::get_typlen((*param).paramtype) != -1
        {
            return 0.0;
        }
        let id = (*param).paramid;
        if id < 1 || id > (*params).numParams {
            return 0.0;
        }
        let mut workspace = pg_sys::ParamExternData::default();
        let value = match (*params).paramFetch {
            Some(fetch) => fetch(params, id, false, &mut workspace),
            None => (*params).params.as_mut_ptr().add(id as usize - 1),
        };
        if value.is_null() || (*value).isnull {
            return 0.0;
        }
        pg_sys::toast_raw_datum_size((*value).value) as f64
    }
}

/// `x op ANY/ALL (array)` compares with every element for each row that
/// reaches it (or hashes them all at the first): the array's length is
/// work one protected row can add, bounded like public rows by
/// `dpnoise.max_public_fanout`. An array from a query parameter is
/// refused: its length is not known when the plan is checked (an attack
/// timed 13 ms against 0.8 ms with 3 million elements behind a condition).
///
/// # Safety
/// `op` is a live ScalarArrayOpExpr.
unsafe fn array_length(op: *mut pg_sys::ScalarArrayOpExpr) -> Checked {
    // SAFETY: the caller's contract; casts follow the node tags; a constant array is detoasted to read its dimensions.
    unsafe {
        let args = list_items::<pg_sys::Node>((*op).args);
        let Some(&array) = args.get(1) else {
            return Ok(());
        };
        let length = match (*array).type_ {
            pg_sys::NodeTag::T_Const if (*(array as *mut pg_sys::Const)).constisnull => 0,
            pg_sys::NodeTag::T_Const => {
                let value = pg_sys::pg_detoast_datum((*(array as *mut pg_sys::Const)).constvalue.cast_mut_ptr()) as *mut pg_sys::ArrayType;
                pg_sys::ArrayGetNItems((*value).ndim, value.cast::<u8>().add(std::mem::size_of::<pg_sys::ArrayType>()).cast()) as i64
            }
            pg_sys::NodeTag::T_ArrayExpr => list_items::<pg_sys::Node>((*(array as *mut pg_sys::ArrayExpr)).elements).len() as i64,
            _ => {
                return Err(refuse(
                    "an array compared with protected values (IN, = ANY) comes from a query parameter or a column: its length, work for each protected row, is not known in advance",
                    "Write the list as constants: x IN (1, 2, 3).",
                ))
            }
        };
        let limit = crate::gucs::max_public_fanout() as i64;
        if length > limit {
            return Err(refuse(
                &format!("an array of {length} elements is compared with protected values, over dpnoise.max_public_fanout = {limit}"),
                "Compare with fewer values, or join a public table of them.",
            ));
        }
        Ok(())
    }
}

/// Refuses a collation that would make a LEAKPROOF text function fail on
/// the rows that reach it: an indeterminate one (two implicit collations
/// that clash: PostgreSQL raises only when the comparison runs) or a
/// nondeterministic one (LIKE, starts_with, position refuse it when called).
///
/// # Safety
/// `node` is a live expression node (not a List or TargetEntry).
unsafe fn collation(node: *mut pg_sys::Node) -> Result<u64, Refusal> {
    // SAFETY: the caller's contract; casts follow the node tags; the lookups are by OID.
    unsafe {
        use pg_sys::NodeTag::*;
        let indeterminate = || {
            refuse(
                "a text comparison or function among protected rows has no collation (two collations clash), so it would fail on the rows that reach it",
                "Give the values one collation with COLLATE on the public side.",
            )
        };
        let result = pg_sys::exprCollation(node);
        if pg_sys::type_is_collatable(pg_sys::exprType(node)) && result == pg_sys::InvalidOid {
            return Err(indeterminate());
        }
        warm(result);
        let args: Vec<*mut pg_sys::Node> = match (*node).type_ {
            T_FuncExpr => list_items((*(node as *mut pg_sys::FuncExpr)).args),
            T_OpExpr | T_DistinctExpr | T_NullIfExpr => {
                list_items((*(node as *mut pg_sys::OpExpr)).args)
            }
            T_ScalarArrayOpExpr => list_items((*(node as *mut pg_sys::ScalarArrayOpExpr)).args),
            T_MinMaxExpr => list_items((*(node as *mut pg_sys::MinMaxExpr)).args),
            T_WindowFunc => list_items((*(node as *mut pg_sys::WindowFunc)).args),
            T_Aggref => list_items::<pg_sys::TargetEntry>((*(node as *mut pg_sys::Aggref)).args)
                .into_iter()
                .map(|e| (*e).expr.cast())
                .collect(),
            _ => return Ok(0),
        };
        let input = pg_sys::exprInputCollation(node);
        if input == pg_sys::InvalidOid {
            if args
                .iter()
                .any(|a| pg_sys::type_is_collatable(pg_sys::exprType(*a)))
            {
                return Err(indeterminate());
            }
        } else if !pg_sys::get_collation_isdeterministic(input) {
            return Err(refuse(
                "a text function among protected rows has a nondeterministic collation, which some text functions refuse when called",
                "Compare under a deterministic collation (COLLATE \"C\" or the database's) on the public side.",
            ));
        }
        warm(input);
        // Ordering under a locale (ICU, or libc other than C) goes through
        // the collation's own comparison: ten times a byte comparison and
        // more (an attack's 120-byte Hangul strings took 2.4 µs each).
        if input != pg_sys::InvalidOid
            && input != pg_sys::C_COLLATION_OID
            && input != crate::versions::POSIX_COLLATION_OID
        {
            return Ok(COLLATED_STEPS);
        }
        Ok(0)
    }
}

/// Opens a collation's locale now, before any protected row is read: a
/// backend opens one (an ICU collator: some 30 µs) at its first comparison
/// and keeps it, so a later statement could time whether a comparison ran
/// among protected rows (an attack chained 800 ICU collations behind a
/// condition on one person: 10 ms, read after the fact).
///
/// # Safety
/// Inside a transaction; `collid` is InvalidOid or a collation's OID.
unsafe fn warm(collid: pg_sys::Oid) {
    if collid == pg_sys::InvalidOid {
        return;
    }
    // SAFETY: the caller's contract; two empty strings, compared under the
    // collation (equal: it returns after opening the locale).
    unsafe { pg_sys::varstr_cmp(c"".as_ptr(), 0, c"".as_ptr(), 0, collid) };
}

/// A conversion of numeric to bigint or float8 that cannot fail because its
/// argument is clamped into the target's range first: `LEAST(GREATEST(x,
/// lo), hi)::int8` (or `::float8`) with constant bounds inside the range
/// (NaN sorts above every number, so it is clamped to hi). Returns `x`.
///
/// # Safety
/// `call` is a live FuncExpr.
unsafe fn clamped_cast(call: *mut pg_sys::FuncExpr) -> Option<*mut pg_sys::Node> {
    // SAFETY: the caller's contract; casts follow the node tags; numeric constants are printed by numeric_out.
    unsafe {
        let funcid = u32::from((*call).funcid);
        let to_int8 = funcid == pg_sys::F_INT8_NUMERIC;
        if !to_int8 && funcid != pg_sys::F_FLOAT8_NUMERIC {
            return None;
        }
        let [arg] = list_items::<pg_sys::Node>((*call).args)[..] else {
            return None;
        };
        let minmax = |node: *mut pg_sys::Node,
                      op: pg_sys::MinMaxOp::Type|
         -> Option<(*mut pg_sys::Node, *mut pg_sys::Const)> {
            if (*node).type_ != pg_sys::NodeTag::T_MinMaxExpr {
                return None;
            }
            let expr = node as *mut pg_sys::MinMaxExpr;
            if (*expr).op != op || (*expr).minmaxtype != pg_sys::NUMERICOID {
                return None;
            }
            let [a, b] = list_items::<pg_sys::Node>((*expr).args)[..] else {
                return None;
            };
            if (*b).type_ == pg_sys::NodeTag::T_Const {
                Some((a, b.cast()))
            } else if (*a).type_ == pg_sys::NodeTag::T_Const {
                Some((b, a.cast()))
            } else {
                None
            }
        };
        let (lower, hi) = minmax(arg, pg_sys::MinMaxOp::IS_LEAST)?;
        let (x, lo) = minmax(lower, pg_sys::MinMaxOp::IS_GREATEST)?;
        let inside = |c: *mut pg_sys::Const| -> bool {
            if (*c).constisnull {
                return false;
            }
            let text = pg_sys::OidOutputFunctionCall(
                pg_sys::Oid::from(pg_sys::F_NUMERIC_OUT),
                (*c).constvalue,
            );
            let text = std::ffi::CStr::from_ptr(text)
                .to_string_lossy()
                .into_owned();
            if to_int8 {
                text.parse::<i64>().is_ok()
            } else {
                text.parse::<f64>().is_ok_and(|v| v.is_finite())
            }
        };
        (inside(lo) && inside(hi)).then_some(x)
    }
}

/// An expression node's kind, for messages.
fn expression_name(tag: pg_sys::NodeTag) -> String {
    use pg_sys::NodeTag::*;
    match tag {
        T_CoerceViaIO => "a conversion through text".into(),
        T_ArrayCoerceExpr => "an array conversion".into(),
        T_ConvertRowtypeExpr | T_RowExpr | T_RowCompareExpr | T_FieldSelect | T_FieldStore => {
            "a row operation".into()
        }
        T_SubscriptingRef | T_ArrayExpr => "an array operation".into(),
        T_NextValueExpr => "a sequence".into(),
        _ => format!("an expression (node {})", tag as u32),
    }
}
