//! The bounds a plain aggregate is released with (`domain`): a count
//! needs none; a sum or average takes its argument's, read from the
//! policy's domains of the columns it reads and the numbers written beside
//! them (`bounded`); count(DISTINCT x) counts persons only when x is the
//! privacy unit (`counts_persons`).

use super::forms::{first_argument, Plain};
use super::{list_items, Context};
use pgrx::pg_sys;

/// The bounds a plain aggregate is released with: none for a count; for
/// a sum or average, its column's `dp_domain`, if its argument is a column
/// of a protected table of the level that has one (None otherwise: it is
/// left as written).
///
/// # Safety
/// `aggref` is a live Aggref of the level whose range table `c` holds.
pub(super) unsafe fn domain(
    aggref: *mut pg_sys::Aggref,
    kind: Plain,
    c: &Context,
) -> Option<(f64, f64)> {
    if matches!(kind, Plain::CountStar | Plain::Count) {
        return Some((0.0, 0.0));
    }
    if kind == Plain::Persons {
        // SAFETY: the caller's contract.
        return unsafe { counts_persons(aggref, c) }.then_some((0.0, 0.0));
    }
    // SAFETY: the caller's contract.
    unsafe {
        let arg = first_argument(aggref)?;
        // Spreads and order statistics read a column: a CASE or a constant
        // is bounded for sums and averages only.
        if !matches!(kind, Plain::Sum | Plain::Avg) && !is_column(arg) {
            return None;
        }
        bounded(arg, c)?
    }
}

/// Whether `node` is a column, through implicit casts.
///
/// # Safety
/// `node` is a live expression.
unsafe fn is_column(mut node: *mut pg_sys::Node) -> bool {
    // SAFETY: the caller's contract; casts follow the node tags.
    unsafe {
        loop {
            match (*node).type_ {
                pg_sys::NodeTag::T_RelabelType => {
                    node = (*(node as *mut pg_sys::RelabelType)).arg.cast()
                }
                pg_sys::NodeTag::T_FuncExpr => {
                    let call = node as *mut pg_sys::FuncExpr;
                    let args = list_items::<pg_sys::Node>((*call).args);
                    if (*call).funcformat != pg_sys::CoercionForm::COERCE_IMPLICIT_CAST
                        || args.len() != 1
                    {
                        return false;
                    }
                    node = args[0];
                }
                tag => return tag == pg_sys::NodeTag::T_Var,
            }
        }
    }
}

/// The bounds of the values `node` takes: a numeric column of a protected
/// table of the level, its `dp_domain`; a number written in the statement,
/// itself; a CASE, the smallest interval holding each of its results (as
/// Metabase writes a count or sum where a condition holds:
/// `SUM(CASE WHEN site = 's1' THEN amount ELSE 0.0 END)`). None: not
/// bounded; Some(None): only NULL, which adds nothing.
///
/// # Safety
/// `node` is a live expression of the level whose range table `c` holds.
unsafe fn bounded(mut arg: *mut pg_sys::Node, c: &Context) -> Option<Option<(f64, f64)>> {
    // SAFETY: the caller's contract; casts follow the node tags, rtable holds RangeTblEntry.
    unsafe {
        // Through the implicit cast to the aggregate's argument type
        // (percentile_cont of an integer reads it as float8).
        while let pg_sys::NodeTag::T_FuncExpr | pg_sys::NodeTag::T_RelabelType = (*arg).type_ {
            arg = match (*arg).type_ {
                pg_sys::NodeTag::T_RelabelType => (*(arg as *mut pg_sys::RelabelType)).arg.cast(),
                _ => {
                    let call = arg as *mut pg_sys::FuncExpr;
                    let args = list_items::<pg_sys::Node>((*call).args);
                    if (*call).funcformat != pg_sys::CoercionForm::COERCE_IMPLICIT_CAST
                        || args.len() != 1
                    {
                        return None;
                    }
                    args[0]
                }
            };
        }
        // A domain bounds numbers: a column of another type is left as written.
        let numeric = [
            pg_sys::INT2OID,
            pg_sys::INT4OID,
            pg_sys::INT8OID,
            pg_sys::FLOAT4OID,
            pg_sys::FLOAT8OID,
            pg_sys::NUMERICOID,
        ];
        match (*arg).type_ {
            pg_sys::NodeTag::T_Var => {
                let var = arg as *mut pg_sys::Var;
                let rte = pg_sys::list_nth(c.level.rtable, (*var).varno as i32 - 1)
                    as *mut pg_sys::RangeTblEntry;
                if (*var).varlevelsup != 0
                    || (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION
                    || !numeric.contains(&(*var).vartype)
                {
                    return None;
                }
                c.protected
                    .policy
                    .domains
                    .get(&((*rte).relid, (*var).varattno))
                    .map(|&d| Some(d))
            }
            pg_sys::NodeTag::T_Const => {
                let constant = arg as *mut pg_sys::Const;
                if (*constant).constisnull {
                    return Some(None);
                }
                let value = (*constant).constvalue;
                let v = match (*constant).consttype {
                    pg_sys::INT2OID => f64::from(value.value() as i16),
                    pg_sys::INT4OID => f64::from(value.value() as i32),
                    pg_sys::INT8OID => value.value() as i64 as f64,
                    pg_sys::FLOAT4OID => f64::from(f32::from_bits(value.value() as u32)),
                    pg_sys::FLOAT8OID => f64::from_bits(value.value() as u64),
                    pg_sys::NUMERICOID => f64::from_bits(
                        pgrx::direct_function_call_as_datum(
                            pg_sys::numeric_float8_no_overflow,
                            &[Some(value)],
                        )?
                        .value() as u64,
                    ),
                    _ => return None,
                };
                v.is_finite().then_some(Some((v, v)))
            }
            pg_sys::NodeTag::T_CaseExpr => {
                let case = arg as *mut pg_sys::CaseExpr;
                let mut results: Vec<*mut pg_sys::Node> =
                    list_items::<pg_sys::CaseWhen>((*case).args)
                        .iter()
                        .map(|w| (**w).result.cast())
                        .collect();
                if !(*case).defresult.is_null() {
                    results.push((*case).defresult.cast());
                }
                let mut whole: Option<(f64, f64)> = None;
                for result in results {
                    if let Some((lo, hi)) = bounded(result, c)? {
                        whole = Some(whole.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
                    }
                }
                Some(whole)
            }
            _ => None,
        }
    }
}

/// Whether `aggref` (a count(DISTINCT x)) counts the privacy unit of a
/// protected table of the level.
///
/// # Safety
/// `aggref` is a live Aggref of the level whose range table `c` holds.
unsafe fn counts_persons(aggref: *mut pg_sys::Aggref, c: &Context) -> bool {
    // SAFETY: the caller's contract.
    unsafe {
        let Some(arg) = first_argument(aggref) else {
            return false;
        };
        if (*arg).type_ != pg_sys::NodeTag::T_Var
            || list_items::<pg_sys::TargetEntry>((*aggref).args).len() != 1
        {
            return false;
        }
        let var = arg as *mut pg_sys::Var;
        let rte =
            pg_sys::list_nth(c.level.rtable, (*var).varno as i32 - 1) as *mut pg_sys::RangeTblEntry;
        (*var).varlevelsup == 0
            && (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION
            && c.protected
                .tables
                .get(&(*rte).relid)
                .is_some_and(|t| t.unit == (*var).varattno)
    }
}
