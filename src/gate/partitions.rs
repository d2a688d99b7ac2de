//! Private partition selection: the HAVING the gate adds to a GROUP BY
//! over protected rows, so that a key is shown only if the keep test on its
//! number of persons passes; and the Aggref nodes the gate writes (here and
//! in `bounding`) and reads.

use super::{refuse, Checked};
use pgrx::pg_sys;

/// Adds private partition selection to a GROUP BY over protected rows:
/// `HAVING dp_partition_selected(selection ε, selection δ) AND <HAVING>`,
/// with the session's settings as constants (a prepared plan keeps them,
/// and pays what it holds). Where the level shows a dp_count without δ
/// whose ε and mechanism are constants, and its threshold at the
/// selection δ shows a group with even odds from no more persons than the
/// separate selection does (over the person's `groups` groups), that
/// count's own noise selects instead (`dp_count_selected(its ε, its
/// mechanism, selection δ)`, `dpnoise_core::threshold`): the count then
/// spends the whole ε and selection only δ, and at least as many groups
/// are shown. A count of a tiny ε keeps the separate selection, which
/// shows its groups at the selection's ε. A row count written as a float8
/// dp_sum of a positive constant (`dp_sum(1.0, ε, 0, U)`) is thresholded
/// the same way (`dp_sum_selected`) where, each person counted at their
/// least contribution, it shows as many groups.
///
/// # Safety
/// `query` is a live Query with a GROUP BY, before planning.
pub(super) unsafe fn select_partitions(
    query: *mut pg_sys::Query,
    protected: &super::catalog::Protected,
    groups: u32,
    bounded: bool,
) -> Checked {
    let (epsilon, delta) = (
        crate::gucs::selection_epsilon(),
        crate::gucs::selection_delta(),
    );
    if delta <= 0.0 || protected.selection == pg_sys::InvalidOid {
        return Err(refuse(
            "group keys from protected data need private partition selection, which needs dpnoise.selection_delta > 0",
            "SET dpnoise.selection_delta to a small positive number (such as 1e-6).",
        ));
    }
    // SAFETY: the caller's contract; new nodes are palloc'd in the planner's memory context.
    unsafe {
        let constant = |x: f64| -> *mut pg_sys::Node {
            pg_sys::makeConst(
                pg_sys::FLOAT8OID,
                -1,
                pg_sys::InvalidOid,
                8,
                pg_sys::Datum::from(x.to_bits()),
                false,
                true,
            )
            .cast()
        };
        let chosen = if crate::gucs::thresholded_counts() {
            thresholded(query, bounded).filter(|t| {
                t.selection(protected) != pg_sys::InvalidOid && t.shows_more(groups, epsilon, delta)
            })
        } else {
            None
        };
        if let Some(release) = chosen {
            let mut args: Vec<(*mut pg_sys::Node, pg_sys::Oid)> = release
                .parameters
                .iter()
                .zip(release.types())
                .map(|(&n, &t)| (n, t))
                .collect();
            args.push((constant(delta), pg_sys::FLOAT8OID));
            let selected = aggregate(release.selection(protected), pg_sys::BOOLOID, &args);
            // Its texts are compared with nothing, but typed so.
            (*selected).inputcollid = pg_sys::DEFAULT_COLLATION_OID;
            and_having(query, selected.cast());
            return Ok(());
        }
        let args = [
            (constant(epsilon), pg_sys::FLOAT8OID),
            (constant(delta), pg_sys::FLOAT8OID),
        ];
        and_having(
            query,
            aggregate(protected.selection, pg_sys::BOOLOID, &args).cast(),
        );
    }
    Ok(())
}

/// A release of the level whose own noise can select its groups.
struct Thresholded {
    /// None: a dp_count. Some(v): a float8 dp_sum, each person adding at
    /// least v > 0 to each of their groups (its constant value, clamped).
    per_person: Option<f64>,
    /// Copies of its parameters as the selection takes them: (ε, mechanism)
    /// for a count, (ε, lower, upper, mechanism, loss) for a sum.
    parameters: Vec<*mut pg_sys::Node>,
}

impl Thresholded {
    fn types(&self) -> &'static [pg_sys::Oid] {
        const F: pg_sys::Oid = pg_sys::FLOAT8OID;
        const T: pg_sys::Oid = pg_sys::TEXTOID;
        match self.per_person {
            None => &[F, T],
            Some(_) => &[F, F, F, T, T],
        }
    }

    /// dp_count_selected or dp_sum_selected.
    fn selection(&self, protected: &super::catalog::Protected) -> pg_sys::Oid {
        match self.per_person {
            None => protected.count_selection,
            Some(_) => protected.sum_selection,
        }
    }

    /// Whether this release, thresholded at `delta` over `groups` groups,
    /// shows a group with even odds from no more persons than the
    /// separate selection at (`epsilon`, `delta`) does (a sum: each person
    /// adding their least value). Public parameters only; false where
    /// either cannot be planned or a parameter is not a constant.
    ///
    /// # Safety
    /// The parameters are live expressions.
    unsafe fn shows_more(&self, groups: u32, epsilon: f64, delta: f64) -> bool {
        // SAFETY: the caller's contract; the casts follow the types.
        unsafe {
            let mut values = Vec::new();
            for &p in &self.parameters {
                let Some(v) = folded(p) else {
                    return false;
                };
                values.push(v);
            }
            let float = |i: usize| f64::from_bits(values[i].value() as u64);
            let text = |i: usize| pgrx::text_to_rust_str_unchecked(values[i].cast_mut_ptr());
            let (shape, mechanism, loss) = match self.per_person {
                None => (dpnoise_core::Shape::Count, text(1), "l2"),
                Some(_) => {
                    let Ok(bounds) = dpnoise_core::Bounds::new(float(1), float(2)) else {
                        return false;
                    };
                    (dpnoise_core::Shape::Sum(bounds), text(3), text(4))
                }
            };
            let (Ok(choice), Ok(loss), Ok(e)) = (
                dpnoise_core::Choice::parse(mechanism),
                dpnoise_core::Loss::parse(loss),
                dpnoise_core::Epsilon::new(float(0)),
            ) else {
                return false;
            };
            let request = dpnoise_core::Request {
                choice,
                epsilon: e,
                delta: dpnoise_core::Delta::ZERO,
                loss: if self.per_person.is_none() {
                    dpnoise_core::Loss::Variance
                } else {
                    loss
                },
                shape,
                groups,
            };
            let (Ok(plan), Ok(separate)) = (
                request.plan(),
                dpnoise_core::selection::PartitionSelection::new(epsilon, delta, groups),
            ) else {
                return false;
            };
            let each = match self.per_person {
                None => 1,
                Some(v) => match plan.calibration.lattice.round(v) {
                    Ok(each) if each > 0 => each as u128,
                    _ => return false,
                },
            };
            dpnoise_core::threshold::CountThreshold::if_better(
                &plan, groups, delta, &separate, each,
            )
            .is_some()
        }
    }
}

/// The first release of the level's output that can select its groups by
/// its own noise (its final function runs before the level's HAVING in
/// each group: `release::note_released`), without DISTINCT or ORDER BY: a
/// dp_count that takes no δ (dp_count(ε), dp_count(value, ε), dp_count(ε,
/// mechanism)), else a float8 dp_sum of a constant value whose least
/// per-person contribution (the value clamped to its bounds) is positive
/// and whose δ, if written, is 0 (a row count written dp_sum(1.0, ε, 0, U)).
/// Defaults are written out: 'laplace' for a count, 'auto' and 'l2' for a
/// sum. On a `bounded` level the value form dp_count(value, ε) is passed
/// over (the bounding rewrites it).
///
/// # Safety
/// `query` is a live Query before planning; copies are palloc'd in the
/// current memory context.
unsafe fn thresholded(query: *mut pg_sys::Query, bounded: bool) -> Option<Thresholded> {
    // SAFETY: the caller's contract.
    unsafe {
        let mut sum = None;
        for entry in crate::pg_list::list_items::<pg_sys::TargetEntry>((*query).targetList) {
            let expr = (*entry).expr;
            if (*entry).resjunk || (*expr).type_ != pg_sys::NodeTag::T_Aggref {
                continue;
            }
            let aggref = expr as *mut pg_sys::Aggref;
            let Some(function) = crate::functions::releasing((*aggref).aggfnoid) else {
                continue;
            };
            if !(*aggref).aggdistinct.is_null() || !(*aggref).aggorder.is_null() {
                continue;
            }
            let types = aggregate_types(aggref);
            let args: Vec<*mut pg_sys::Node> =
                crate::pg_list::list_items::<pg_sys::TargetEntry>((*aggref).args)
                    .into_iter()
                    .map(|e| (*e).expr.cast())
                    .collect();
            let copy = |n: *mut pg_sys::Node| pg_sys::copyObjectImpl(n.cast()).cast();
            match function.name {
                "dp_count" => {
                    let first = function.first_parameter(&types);
                    // The value form on a level the gate bounds is
                    // rewritten to combine each person's rows: the count
                    // the selection would read is then not released there.
                    if bounded && first == 1 {
                        continue;
                    }
                    let mechanism = match types.len() - first {
                        1 => text_constant("laplace"),
                        2 if types[first + 1] == pg_sys::TEXTOID => copy(args[first + 1]),
                        _ => continue,
                    };
                    return Some(Thresholded {
                        per_person: None,
                        parameters: vec![copy(args[first]), mechanism],
                    });
                }
                "dp_sum" if sum.is_none() && types.first() == Some(&pg_sys::FLOAT8OID) => {
                    let float =
                        |n: *mut pg_sys::Node| folded(n).map(|v| f64::from_bits(v.value() as u64));
                    let (Some(value), Some(lower), Some(upper)) =
                        (float(args[0]), float(args[2]), float(args[3]))
                    else {
                        continue;
                    };
                    // NaN bounds are refused when the sum runs (22023); here
                    // they are no threshold (and f64::clamp would panic).
                    if lower.is_nan() || upper.is_nan() {
                        continue;
                    }
                    let least = value.clamp(lower.min(upper), upper.max(lower));
                    let zero_delta = args
                        .get(4)
                        .is_none_or(|&d| float(d).is_some_and(|d| d.to_bits() == 0));
                    if !(least.is_finite() && least > 0.0 && zero_delta) {
                        continue;
                    }
                    let text = |at: usize, default: &str| {
                        args.get(at)
                            .map_or_else(|| text_constant(default), |&a| copy(a))
                    };
                    sum = Some(Thresholded {
                        per_person: Some(least),
                        parameters: vec![
                            copy(args[1]),
                            copy(args[2]),
                            copy(args[3]),
                            text(5, "auto"),
                            text(6, "l2"),
                        ],
                    });
                }
                _ => {}
            }
        }
        sum
    }
}

/// The value of `expression` folded as the planner will (1.0 is a
/// numeric cast to float8), if it folds to a non-NULL constant.
///
/// # Safety
/// `expression` is a live expression; inside a transaction.
pub(super) unsafe fn folded(expression: *mut pg_sys::Node) -> Option<pg_sys::Datum> {
    // SAFETY: the caller's contract; the copy is folded, the cast follows its tag.
    unsafe {
        let n = pg_sys::eval_const_expressions(
            std::ptr::null_mut(),
            pg_sys::copyObjectImpl(expression.cast()).cast(),
        );
        ((*n).type_ == pg_sys::NodeTag::T_Const && !(*(n as *mut pg_sys::Const)).constisnull)
            .then(|| (*(n as *mut pg_sys::Const)).constvalue)
    }
}

/// A text constant.
///
/// # Safety
/// Inside a transaction; palloc'd in the current memory context.
unsafe fn text_constant(text: &str) -> *mut pg_sys::Node {
    // SAFETY: the caller's contract; cstring_to_text copies the NUL-terminated string.
    unsafe {
        let c = std::ffi::CString::new(text).expect("no NUL");
        pg_sys::makeConst(
            pg_sys::TEXTOID,
            -1,
            pg_sys::DEFAULT_COLLATION_OID,
            -1,
            pg_sys::Datum::from(pg_sys::cstring_to_text(c.as_ptr())),
            false,
            false,
        )
        .cast()
    }
}

/// A plain call of the aggregate `funcid` on `args` (expression, type).
///
/// # Safety
/// Inside a transaction; the arguments are live expressions. The node is
/// palloc'd in the current memory context.
pub(super) unsafe fn aggregate(
    funcid: pg_sys::Oid,
    result: pg_sys::Oid,
    args: &[(*mut pg_sys::Node, pg_sys::Oid)],
) -> *mut pg_sys::Aggref {
    // SAFETY: the caller's contract; the Aggref is filled as the parser fills a plain call's.
    unsafe {
        let aggref = pg_sys::palloc0(std::mem::size_of::<pg_sys::Aggref>()) as *mut pg_sys::Aggref;
        (*aggref).xpr.type_ = pg_sys::NodeTag::T_Aggref;
        (*aggref).aggfnoid = funcid;
        (*aggref).aggtype = result;
        (*aggref).aggcollid = pg_sys::InvalidOid;
        (*aggref).inputcollid = pg_sys::InvalidOid;
        (*aggref).aggtranstype = pg_sys::InvalidOid;
        let mut types = std::ptr::null_mut();
        let mut entries = std::ptr::null_mut();
        for (i, (expr, typid)) in args.iter().enumerate() {
            types = pg_sys::lappend_oid(types, *typid);
            let entry = pg_sys::makeTargetEntry(
                (*expr).cast(),
                (i + 1) as i16,
                std::ptr::null_mut(),
                false,
            );
            entries = pg_sys::lappend(entries, entry.cast());
        }
        (*aggref).aggargtypes = types;
        (*aggref).args = entries;
        (*aggref).aggkind = b'n' as std::ffi::c_char;
        (*aggref).aggsplit = pg_sys::AggSplit::AGGSPLIT_SIMPLE;
        (*aggref).aggno = -1;
        (*aggref).aggtransno = -1;
        (*aggref).location = -1;
        aggref
    }
}

/// ANDs `condition` into the level's HAVING.
///
/// # Safety
/// `query` is a live Query before planning; `condition` a live boolean expression.
pub(super) unsafe fn and_having(query: *mut pg_sys::Query, condition: *mut pg_sys::Node) {
    // SAFETY: the caller's contract.
    unsafe {
        let having = (*query).havingQual;
        (*query).havingQual = if having.is_null() {
            condition
        } else {
            let both = pg_sys::lappend(
                pg_sys::lappend(std::ptr::null_mut(), condition.cast()),
                having.cast(),
            );
            pg_sys::makeBoolExpr(pg_sys::BoolExprType::AND_EXPR, both, -1).cast()
        };
        (*query).hasAggs = true;
    }
}

/// # Safety
/// `aggref` is a live Aggref.
pub(crate) unsafe fn aggregate_types(aggref: *mut pg_sys::Aggref) -> Vec<pg_sys::Oid> {
    // SAFETY: the caller's contract; aggargtypes is an OID list.
    unsafe { crate::pg_list::oid_list((*aggref).aggargtypes) }
}
