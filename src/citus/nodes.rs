//! The nodes a split writes (Aggrefs, the `dp_partials` FROM item,
//! constants, the partials as SQL text) and the functions they call, by
//! name.

use super::{read_one, unsupported};
use crate::parameters::fixed_param;
use pgrx::pg_sys;
use std::ffi::{CStr, CString};

/// A copy of `node` (a Query or an expression) with every external
/// parameter whose value is fixed for this plan (a custom plan's) made a
/// constant: the partials run as SQL text of their own.
///
/// # Safety
/// `node` is a live Query or expression tree; `params` live or null.
pub(super) unsafe fn substitute_params<T>(node: *mut T, params: pg_sys::ParamListInfo) -> *mut T {
    /// # Safety
    /// Called by the tree mutators with live nodes and the ParamListInfo.
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn mutate(
        node: *mut pg_sys::Node,
        context: *mut std::ffi::c_void,
    ) -> *mut pg_sys::Node {
        // SAFETY: the caller's contract; casts follow the node tags; a ParamListInfo's params
        // array holds numParams entries (paramFetch, when set, returns one of them).
        unsafe {
            if node.is_null() {
                return node;
            }
            let params = context as pg_sys::ParamListInfo;
            match (*node).type_ {
                pg_sys::NodeTag::T_Query => {
                    return crate::versions::query_tree_mutator(node.cast(), mutate, context, 0)
                        .cast();
                }
                pg_sys::NodeTag::T_Param => {
                    let p = node as *mut pg_sys::Param;
                    if (*p).paramkind != pg_sys::ParamKind::PARAM_EXTERN {
                        return node;
                    }
                    let fixed = fixed_param(p, params);
                    let Some(data) = fixed else {
                        unsupported(
                            "a query parameter whose value is not known when the query is planned",
                            "With a prepared statement, SET plan_cache_mode = force_custom_plan.",
                        );
                    };
                    let (mut len, mut byval) = (0i16, false);
                    pg_sys::get_typlenbyval((*p).paramtype, &mut len, &mut byval);
                    let value = if (*data).isnull || byval {
                        (*data).value
                    } else {
                        copy_datum((*data).value, len)
                    };
                    return pg_sys::makeConst(
                        (*p).paramtype,
                        (*p).paramtypmod,
                        (*p).paramcollid,
                        len as i32,
                        value,
                        (*data).isnull,
                        byval,
                    )
                    .cast();
                }
                _ => {}
            }
            crate::versions::expression_tree_mutator(node, mutate, context)
        }
    }
    // SAFETY: the caller's contract.
    unsafe { mutate(node.cast(), params.cast()).cast() }
}

/// A plain (non-split) Aggref of `funcid` over `args`.
///
/// # Safety
/// Inside a transaction; `args` are live expressions.
pub(super) unsafe fn aggregate(
    funcid: pg_sys::Oid,
    result: pg_sys::Oid,
    args: &[*mut pg_sys::Node],
    filter: *mut pg_sys::Node,
) -> *mut pg_sys::Aggref {
    // SAFETY: the caller's contract; the Aggref is zeroed, then tagged and filled.
    unsafe {
        let a = pg_sys::palloc0(std::mem::size_of::<pg_sys::Aggref>()) as *mut pg_sys::Aggref;
        (*a).xpr.type_ = pg_sys::NodeTag::T_Aggref;
        (*a).aggfnoid = funcid;
        (*a).aggtype = result;
        let mut entries = std::ptr::null_mut();
        let mut types = std::ptr::null_mut();
        for (i, arg) in args.iter().enumerate() {
            entries = pg_sys::lappend(
                entries,
                pg_sys::makeTargetEntry((*arg).cast(), (i + 1) as i16, std::ptr::null_mut(), false)
                    .cast(),
            );
            types = pg_sys::lappend_oid(types, pg_sys::exprType(*arg));
            let collation = pg_sys::exprCollation(*arg);
            if collation != pg_sys::InvalidOid {
                (*a).inputcollid = collation;
            }
        }
        (*a).args = entries;
        (*a).aggargtypes = types;
        (*a).aggfilter = filter.cast();
        (*a).aggkind = b'n' as std::ffi::c_char;
        (*a).aggsplit = pg_sys::AggSplit::AGGSPLIT_SIMPLE;
        (*a).aggno = -1;
        (*a).aggtransno = -1;
        (*a).location = -1;
        a
    }
}

/// The FROM item `function(<args>) AS dp_partials(k1, ..., p1, ...)`.
///
/// # Safety
/// Inside a transaction; `args` are live constants; `outputs` are the partials' live target entries.
pub(super) unsafe fn function_rte(
    schema: &str,
    function: &str,
    args: &[*mut pg_sys::Node],
    outputs: &[*mut pg_sys::TargetEntry],
) -> *mut pg_sys::RangeTblEntry {
    // SAFETY: the caller's contract; nodes are zeroed, then tagged and filled.
    unsafe {
        let types: Vec<pg_sys::Oid> = args.iter().map(|a| pg_sys::exprType(*a)).collect();
        let call = pg_sys::makeFuncExpr(
            lookup(schema, function, &types),
            pg_sys::RECORDOID,
            node_list(args),
            pg_sys::InvalidOid,
            pg_sys::DEFAULT_COLLATION_OID,
            pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
        );
        (*call).funcretset = true;
        let function = pg_sys::palloc0(std::mem::size_of::<pg_sys::RangeTblFunction>())
            as *mut pg_sys::RangeTblFunction;
        (*function).type_ = pg_sys::NodeTag::T_RangeTblFunction;
        (*function).funcexpr = call.cast();
        (*function).funccolcount = outputs.len() as i32;
        let mut names = std::ptr::null_mut();
        for entry in outputs {
            let expr = (**entry).expr.cast::<pg_sys::Node>();
            names = pg_sys::lappend(
                names,
                pg_sys::makeString(pg_sys::pstrdup((**entry).resname)).cast(),
            );
            (*function).funccoltypes =
                pg_sys::lappend_oid((*function).funccoltypes, pg_sys::exprType(expr));
            (*function).funccoltypmods =
                pg_sys::lappend_int((*function).funccoltypmods, pg_sys::exprTypmod(expr));
            (*function).funccolcollations =
                pg_sys::lappend_oid((*function).funccolcollations, pg_sys::exprCollation(expr));
        }
        (*function).funccolnames = names;
        let rte = pg_sys::palloc0(std::mem::size_of::<pg_sys::RangeTblEntry>())
            as *mut pg_sys::RangeTblEntry;
        (*rte).type_ = pg_sys::NodeTag::T_RangeTblEntry;
        (*rte).rtekind = pg_sys::RTEKind::RTE_FUNCTION;
        (*rte).functions = pg_sys::lappend(std::ptr::null_mut(), function.cast());
        (*rte).eref = pg_sys::makeAlias(
            c"dp_partials".as_ptr(),
            pg_sys::copyObjectImpl(names.cast()).cast(),
        );
        (*rte).inFromCl = true;
        rte
    }
}

/// The OID of function `schema.name(types)`; an error if it does not exist.
///
/// # Safety
/// Inside a transaction.
pub(super) unsafe fn lookup(schema: &str, name: &str, types: &[pg_sys::Oid]) -> pg_sys::Oid {
    // SAFETY: the caller's contract.
    unsafe { find(schema, name, types, false) }
}

/// The OID of function `schema.name(types)`; InvalidOid if it does not exist and `missing_ok`.
///
/// # Safety
/// Inside a transaction.
pub(super) unsafe fn find(
    schema: &str,
    name: &str,
    types: &[pg_sys::Oid],
    missing_ok: bool,
) -> pg_sys::Oid {
    // SAFETY: the caller's contract; the name list holds palloc'd String nodes.
    unsafe {
        let part = |s: &str| {
            pg_sys::makeString(pg_sys::pstrdup(CString::new(s).expect("no NUL").as_ptr())).cast()
        };
        let names = pg_sys::lappend(
            pg_sys::lappend(std::ptr::null_mut(), part(schema)),
            part(name),
        );
        let mut types = types.to_vec();
        pg_sys::LookupFuncName(names, types.len() as i32, types.as_mut_ptr(), missing_ok)
    }
}

/// The schema dpnoise is installed in.
pub(super) fn extension_schema() -> String {
    read_one::<String>(
        "SELECT n.nspname::pg_catalog.text FROM pg_catalog.pg_extension e \
         JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace \
         WHERE e.extname OPERATOR(pg_catalog.=) 'dpnoise'",
    )
    .unwrap_or_else(|| pgrx::error!("dpnoise: its schema is missing (internal error)"))
}

/// A copy of a by-reference datum of a type `len` long (-1: varlena, -2: C string).
///
/// # Safety
/// `value` points to a live datum of that type.
unsafe fn copy_datum(value: pg_sys::Datum, len: i16) -> pg_sys::Datum {
    // SAFETY: the caller's contract; the copy is palloc'd as long as the original.
    unsafe {
        let source = value.cast_mut_ptr::<u8>();
        let size = match len {
            -1 => pgrx::varlena::varsize_any(source.cast()),
            -2 => CStr::from_ptr(source.cast()).to_bytes_with_nul().len(),
            n => n as usize,
        };
        let copy = pg_sys::palloc(size) as *mut u8;
        std::ptr::copy_nonoverlapping(source, copy, size);
        pg_sys::Datum::from(copy)
    }
}

/// Whether an expression tree holds a SubLink.
///
/// # Safety
/// `node` is null or a live expression tree.
pub(super) unsafe fn has_sublink(node: *mut pg_sys::Node) -> bool {
    /// # Safety
    /// Called by `expression_tree_walker` with live nodes.
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walk(
        node: *mut pg_sys::Node,
        context: *mut std::ffi::c_void,
    ) -> bool {
        // SAFETY: the caller's contract.
        unsafe {
            if node.is_null() {
                return false;
            }
            (*node).type_ == pg_sys::NodeTag::T_SubLink
                || pg_sys::expression_tree_walker(node, Some(walk), context)
        }
    }
    // SAFETY: the caller's contract.
    unsafe { walk(node, std::ptr::null_mut()) }
}

/// # Safety
/// Inside a transaction; the nodes are live.
pub(super) unsafe fn node_list(nodes: &[*mut pg_sys::Node]) -> *mut pg_sys::List {
    // SAFETY: the caller's contract.
    unsafe {
        nodes.iter().fold(std::ptr::null_mut(), |list, n| {
            pg_sys::lappend(list, (*n).cast())
        })
    }
}

/// A by-value constant of `type_` (int4, int8 or float8).
pub(super) fn datum_const(type_: pg_sys::Oid, value: pg_sys::Datum) -> *mut pg_sys::Node {
    let len = if type_ == pg_sys::INT4OID { 4 } else { 8 };
    // SAFETY: makeConst pallocs a Const node; by-value types need no copy.
    unsafe { pg_sys::makeConst(type_, -1, pg_sys::InvalidOid, len, value, false, true).cast() }
}

pub(super) fn int4_const(value: i32) -> *mut pg_sys::Node {
    datum_const(pg_sys::INT4OID, pg_sys::Datum::from(value))
}

pub(super) fn float8_const(value: f64) -> *mut pg_sys::Node {
    datum_const(pg_sys::FLOAT8OID, crate::fmgr::f64_datum(value))
}

pub(super) fn null_const(type_: pg_sys::Oid) -> *mut pg_sys::Node {
    // SAFETY: makeNullConst pallocs a Const node of the type.
    unsafe {
        pg_sys::makeNullConst(
            type_,
            -1,
            if type_ == pg_sys::TEXTOID {
                pg_sys::DEFAULT_COLLATION_OID
            } else {
                pg_sys::InvalidOid
            },
        )
        .cast()
    }
}

pub(super) fn bytea_const(value: &[u8]) -> *mut pg_sys::Node {
    // SAFETY: the varlena is palloc'd with its header and filled; the Const points to it.
    unsafe {
        let size = pg_sys::VARHDRSZ + value.len();
        let bytes = pg_sys::palloc(size) as *mut u8;
        pgrx::set_varsize_4b(bytes.cast(), size as i32);
        std::ptr::copy_nonoverlapping(value.as_ptr(), bytes.add(pg_sys::VARHDRSZ), value.len());
        pg_sys::makeConst(
            pg_sys::BYTEAOID,
            -1,
            pg_sys::InvalidOid,
            -1,
            pg_sys::Datum::from(bytes),
            false,
            false,
        )
        .cast()
    }
}

/// The partials as SQL, every name outside pg_catalog qualified: written
/// with the search_path `dp_partials_sealed` runs with, so the text reads
/// the same objects whatever search_path the session has when it runs.
///
/// # Safety
/// `partials` is a live Query; inside a transaction.
pub(super) unsafe fn deparse(partials: *mut pg_sys::Query) -> String {
    crate::gucs::with_settings(&[(c"search_path", c"pg_catalog, pg_temp")], || {
        // SAFETY: the caller's contract; pg_get_querydef returns a palloc'd NUL-terminated string.
        unsafe {
            CStr::from_ptr(pg_sys::pg_get_querydef(partials, false))
                .to_string_lossy()
                .into_owned()
        }
    })
}

pub(super) fn text_const(value: &str) -> *mut pg_sys::Node {
    let value = CString::new(value).expect("no NUL in a parameter or SQL text");
    // SAFETY: cstring_to_text pallocs a text copy, which the Const points to.
    unsafe {
        let text = pg_sys::cstring_to_text(value.as_ptr());
        pg_sys::makeConst(
            pg_sys::TEXTOID,
            -1,
            pg_sys::DEFAULT_COLLATION_OID,
            -1,
            pg_sys::Datum::from(text),
            false,
            false,
        )
        .cast()
    }
}
