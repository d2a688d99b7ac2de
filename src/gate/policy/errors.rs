//! The noise of plain aggregates, as a column a BI tool charts beside the
//! value (error bars): `dp_error(COUNT(*))` (with a confidence, 0.95 by
//! default) becomes the half-width of the interval around the count's
//! released value that holds its noiseless value with that confidence, as
//! `dp_query_accuracy` gives it: exact for the mechanism and the lattice,
//! since the noise of a count or sum does not depend on the data. It is a
//! constant of the release's parameters: nothing more is released or
//! charged. The aggregate it names must be in the statement too, and is
//! the release it describes. It says nothing of bounding's bias (a
//! person's rows beyond R, groups beyond k).
//!
//! An average's or a spread's noise depends on the noisy count drawn
//! inside its release, and an interval's ends need the value: for those the
//! level is split (`split`), and its inner level holds dp_error typed
//! float8[] around the aggregate, which `parts` replaces by the releases
//! the value and its interval are computed from (`parts::parts`).

use super::forms::{float, plain, Plain};
use super::{domain, Context};
use pgrx::pg_sys;

/// The error's value, if `node` is a call of dp_error (None: another
/// node). Notes a refusal where it cannot be answered.
///
/// # Safety
/// `node` is a live expression of the level `c` holds; inside a transaction.
pub(super) unsafe fn error(node: *mut pg_sys::Node, c: &mut Context) -> Option<*mut pg_sys::Node> {
    // SAFETY: the caller's contract; casts follow the node tags.
    unsafe {
        if (*node).type_ != pg_sys::NodeTag::T_FuncExpr {
            return None;
        }
        let call = node as *mut pg_sys::FuncExpr;
        if c.protected.policy.error == pg_sys::InvalidOid
            || (*call).funcid != c.protected.policy.error
        {
            return None;
        }
        let args = super::list_items::<pg_sys::Node>((*call).args);
        if (*call).funcresulttype == pg_sys::FLOAT8ARRAYOID {
            return parts(node, args, c);
        }
        // The confidence as written, or its default (filled in only when planned).
        let confidence = match args
            .get(1)
            .map(|a| pg_sys::eval_const_expressions(std::ptr::null_mut(), *a))
        {
            None => 0.95,
            Some(k)
                if (*k).type_ == pg_sys::NodeTag::T_Const
                    && !(*(k as *mut pg_sys::Const)).constisnull =>
            {
                f64::from_bits((*(k as *mut pg_sys::Const)).constvalue.value() as u64)
            }
            Some(_) => return refuse(c, node, "its confidence must be a constant"),
        };
        if !(confidence > 0.0 && confidence < 1.0) {
            return refuse(c, node, "its confidence must be between 0 and 1");
        }
        let mut inner = args[0];
        while (*inner).type_ == pg_sys::NodeTag::T_RelabelType {
            inner = (*(inner as *mut pg_sys::RelabelType)).arg.cast();
        }
        if (*inner).type_ != pg_sys::NodeTag::T_Aggref
            || c.level.rtable.is_null()
            || c.level.per_person
        {
            return refuse(
                c,
                node,
                "it must be written around a plain count or sum of a protected table",
            );
        }
        let aggref = inner as *mut pg_sys::Aggref;
        let kind = plain(aggref).filter(|k| {
            matches!(
                k,
                Plain::CountStar | Plain::Count | Plain::Persons | Plain::Sum
            )
        });
        let Some((kind, bounds)) = kind.and_then(|k| domain(aggref, k, c).map(|b| (k, b))) else {
            return refuse(
                c,
                node,
                "it must be written around a plain count, or a sum of a column with a domain",
            );
        };
        if !beside(aggref, c.level.targets) && !beside(aggref, c.level.having) {
            return refuse(c, node, "the aggregate it is of must be in the statement too: SELECT COUNT(*), dp_error(COUNT(*)), ...");
        }
        if c.epsilon == 0.0 {
            // Counting the shares: the value beside it holds this one's.
            return Some(node);
        }
        let (aggregate, range) = super::parts::accuracy_of(kind, c.level.several, bounds);
        let half = super::super::accuracy::half_width(
            aggregate,
            c.epsilon,
            range,
            &c.level.tables,
            c.level.leaves,
            c.level.grouped,
            confidence,
        );
        Some(
            pg_sys::makeConst(
                pg_sys::FLOAT8OID,
                -1,
                pg_sys::InvalidOid,
                8,
                pg_sys::Datum::from(half.to_bits()),
                false,
                true,
            )
            .cast(),
        )
    }
}

/// The releases an interval of a split level is computed from
/// (`super::split`): the aggregate's parts (`parts::parts`) and each one's
/// half-width, as `dp_estimate` reads them, `[code, lower, upper,
/// releases…, half-widths…]`; while counting, the aggregate's shares.
///
/// # Safety
/// As `error`; `node` is the split's dp_error call typed float8[].
unsafe fn parts(
    node: *mut pg_sys::Node,
    args: Vec<*mut pg_sys::Node>,
    c: &mut Context,
) -> Option<*mut pg_sys::Node> {
    // SAFETY: the caller's contract; the split wrote an Aggref and a float8 constant.
    unsafe {
        let aggref = args[0] as *mut pg_sys::Aggref;
        let confidence = f64::from_bits((*(args[1] as *mut pg_sys::Const)).constvalue.value() as u64);
        if c.level.per_person {
            return refuse(c, node, "it must be written around a plain aggregate of a protected table");
        }
        let Some((kind, bounds)) = plain(aggref).and_then(|k| domain(aggref, k, c).map(|b| (k, b)))
        else {
            return refuse(
                c,
                node,
                "it must be written around a plain count, or a sum, avg, variance or stddev of a column with a domain",
            );
        };
        if let Err(what) = super::parts::no_interval(kind, c.level.several) {
            return refuse(c, node, what);
        }
        if c.epsilon == 0.0 {
            c.found += super::forms::shares(kind, c.level.several);
            return Some(node);
        }
        let (code, parts) = match super::parts::parts(
            aggref,
            kind,
            bounds,
            c.epsilon,
            c.level.several,
            &c.protected.policy,
        ) {
            Ok(found) => found,
            Err(what) => return refuse(c, node, what),
        };
        // Each release within its half-width, together with the confidence.
        let each = 1.0 - (1.0 - confidence) / parts.len() as f64;
        let mut elements = vec![
            float(f64::from(code as i32)),
            float(bounds.0),
            float(bounds.1),
        ];
        let mut halves = Vec::new();
        for part in &parts {
            elements.push(part.release);
            halves.push(float(super::super::accuracy::half_width(
                part.aggregate,
                part.epsilon,
                part.range,
                &c.level.tables,
                c.level.leaves,
                c.level.grouped,
                each,
            )));
        }
        elements.extend(halves);
        let array =
            pg_sys::palloc0(std::mem::size_of::<pg_sys::ArrayExpr>()) as *mut pg_sys::ArrayExpr;
        (*array).xpr.type_ = pg_sys::NodeTag::T_ArrayExpr;
        (*array).array_typeid = pg_sys::FLOAT8ARRAYOID;
        (*array).element_typeid = pg_sys::FLOAT8OID;
        (*array).multidims = false;
        (*array).location = -1;
        for element in elements {
            (*array).elements = pg_sys::lappend((*array).elements, element.cast());
        }
        Some(array.cast())
    }
}

fn refuse(c: &mut Context, node: *mut pg_sys::Node, what: &str) -> Option<*mut pg_sys::Node> {
    c.refusal.get_or_insert((
        format!("dp_error: {what}"),
        "SELECT site, COUNT(*) AS n, dp_error(COUNT(*)) AS error FROM visits GROUP BY site \
         (docs/bi.md, \"Errors and intervals\")."
            .into(),
    ));
    Some(node)
}

/// Whether an aggregate equal to `aggref` is in `node` outside the
/// dp_error calls (the value the error is of).
///
/// # Safety
/// `node` is null or a live expression.
unsafe fn beside(aggref: *mut pg_sys::Aggref, node: *mut pg_sys::Node) -> bool {
    struct Search {
        aggref: *mut pg_sys::Aggref,
        error: pg_sys::Oid,
    }
    /// # Safety
    /// Called by `expression_tree_walker` with live nodes and the `Search`.
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn find(
        node: *mut pg_sys::Node,
        context: *mut std::ffi::c_void,
    ) -> bool {
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            let search = &*(context as *const Search);
            if node.is_null() || (*node).type_ == pg_sys::NodeTag::T_Query {
                return false;
            }
            if (*node).type_ == pg_sys::NodeTag::T_FuncExpr {
                let funcid = (*(node as *mut pg_sys::FuncExpr)).funcid;
                if funcid == search.error {
                    return false;
                }
            }
            if (*node).type_ == pg_sys::NodeTag::T_Aggref
                && pg_sys::equal(node.cast(), search.aggref.cast())
            {
                return true;
            }
            pg_sys::expression_tree_walker(node, Some(find), context)
        }
    }
    // SAFETY: the caller's contract; dp_error is looked up in the catalog the gate read.
    unsafe {
        let Some(protected) = super::super::catalog::protected() else {
            return false;
        };
        let mut search = Search {
            aggref,
            error: protected.policy.error,
        };
        find(node, (&raw mut search).cast())
    }
}
