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
    // SAFETY: the caller's contract.
    unsafe {
        while let Some(inner) = implicit_cast(node) {
            node = inner;
        }
        (*node).type_ == pg_sys::NodeTag::T_Var
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
        while let Some(inner) = implicit_cast(arg) {
            arg = inner;
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
                if (*var).varlevelsup != 0 || !numeric.contains(&(*var).vartype) {
                    return None;
                }
                if (*rte).rtekind == pg_sys::RTEKind::RTE_SUBQUERY && c.level.per_person {
                    return person_value(rte, (*var).varattno, c).map(Some);
                }
                if (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION {
                    return None;
                }
                // The DBA's domain, narrowed by the analyst's setting.
                c.protected
                    .policy
                    .domains
                    .get(&((*rte).relid, (*var).varattno))
                    .map(|&d| Some(super::narrowed::narrow((*rte).relid, (*var).varattno, d)))
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

/// The bounds of a per-person subquery's output (`attno` of `rte`, a level
/// grouped by the privacy unit), derived from the policy: a person's count
/// of rows, [0, R]; their sum of a bounded value, R times its bounds (each
/// widened to hold 0); their average, minimum or maximum of one, its
/// bounds. R is the policy's rows a person adds (1 for a table of one row
/// per person), the R a count or sum over their rows takes directly: the
/// release clamps a person's value into these bounds as it would their
/// rows. None for anything else (a key, a date, an expression of values).
///
/// # Safety
/// `rte` is a live subquery entry of the level `c` holds, before planning;
/// inside a transaction.
unsafe fn person_value(
    rte: *mut pg_sys::RangeTblEntry,
    attno: i16,
    c: &Context,
) -> Option<(f64, f64)> {
    // SAFETY: the caller's contract; casts follow the node tags and RTE kinds.
    unsafe {
        let sub = (*rte).subquery;
        if sub.is_null() || !(*sub).groupingSets.is_null() || !(*sub).setOperations.is_null() {
            return None;
        }
        let entry = list_items::<pg_sys::TargetEntry>((*sub).targetList)
            .into_iter()
            .find(|e| (**e).resno == attno)?;
        let mut expr = (*entry).expr as *mut pg_sys::Node;
        while let Some(inner) = implicit_cast(expr) {
            expr = inner;
        }
        if (*expr).type_ != pg_sys::NodeTag::T_Aggref {
            return None;
        }
        let aggref = expr as *mut pg_sys::Aggref;
        // The persons' rows: the protected tables of its own FROM, and the
        // fewest rows a person adds among them.
        let rows = list_items::<pg_sys::RangeTblEntry>((*sub).rtable)
            .into_iter()
            .filter(|r| (**r).rtekind == pg_sys::RTEKind::RTE_RELATION)
            .filter_map(|r| {
                c.protected
                    .tables
                    .get(&(*r).relid)
                    .map(|t| ((*r).relid, *t))
            })
            .map(|(relid, table)| {
                if table.one_row {
                    1
                } else {
                    *c.protected
                        .policy
                        .rows
                        .get(&relid)
                        .unwrap_or(&crate::gucs::policy_rows_per_person())
                }
            })
            .min()? as f64;
        let inner = Context {
            protected: c.protected,
            epsilon: 0.0,
            found: 0,
            statement: f64::INFINITY,
            level: super::Level {
                rtable: (*sub).rtable,
                ..super::Level::none()
            },
            below: false,
            refusal: None,
        };
        let value = |aggref: *mut pg_sys::Aggref| -> Option<(f64, f64)> {
            bounded(first_argument(aggref)?, &inner)?
        };
        match super::forms::plain(aggref)? {
            Plain::CountStar | Plain::Count => Some((0.0, rows)),
            Plain::Sum => value(aggref).map(|(lo, hi)| (rows * lo.min(0.0), rows * hi.max(0.0))),
            Plain::Avg | Plain::Min | Plain::Max => value(aggref),
            _ => None,
        }
    }
}

/// The argument of an implicit cast of one argument (a RelabelType or a
/// cast function), or None.
///
/// # Safety
/// `node` is a live expression.
unsafe fn implicit_cast(node: *mut pg_sys::Node) -> Option<*mut pg_sys::Node> {
    // SAFETY: the caller's contract; casts follow the node tags.
    unsafe {
        match (*node).type_ {
            pg_sys::NodeTag::T_RelabelType => {
                Some((*(node as *mut pg_sys::RelabelType)).arg.cast())
            }
            pg_sys::NodeTag::T_FuncExpr => {
                let call = node as *mut pg_sys::FuncExpr;
                let args = list_items::<pg_sys::Node>((*call).args);
                match args[..] {
                    [arg] if (*call).funcformat == pg_sys::CoercionForm::COERCE_IMPLICIT_CAST => {
                        Some(arg)
                    }
                    _ => None,
                }
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
