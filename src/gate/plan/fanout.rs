//! How many public rows one protected row can meet in an analyst's plan
//! (`dpnoise.max_public_fanout`), judged from the public side alone: a
//! series or list by its length, a table by its pages and a count of its
//! rows (a row weighing more for the bytes read of it), all multiplied by
//! the expression steps run for each.

use super::super::{list_items, refuse, Checked, Refusal};
use super::{children, Check};
use pgrx::pg_sys;
use pgrx::prelude::*;

/// What a public row may carry before it counts as one more: about what
/// PostgreSQL handles in the time it takes to pass a narrow row on (some
/// 50 ns: hashing, copying and comparing run near a byte a nanosecond).
/// An attack carried a 7.9 MB key through the listed-key levels at 8 kB a
/// row: 10 ms for one protected row, where 1000 narrow rows cost 0.05 ms.
const BYTES_PER_ROW: f64 = 128.0;

impl Check<'_> {
    /// Admits a function in FROM beside protected rows only if it is a
    /// series or an array of constants that cannot fail: it may run only
    /// when a protected row arrives.
    ///
    /// # Safety
    /// `plan` is a live FunctionScan.
    pub(super) unsafe fn series(&self, plan: *mut pg_sys::Plan) -> Checked {
        // SAFETY: the caller's contract.
        unsafe { self.series_rows(plan) }.map(|_| ())
    }

    /// How many rows a FunctionScan of constants returns.
    ///
    /// # Safety
    /// `plan` is a live FunctionScan.
    pub(super) unsafe fn series_rows(&self, plan: *mut pg_sys::Plan) -> Result<f64, Refusal> {
        // SAFETY: the caller's contract; casts follow the node tags and the functions' signatures.
        unsafe {
            let mut rows: f64 = 0.0;
            for function in list_items::<pg_sys::RangeTblFunction>(
                (*(plan as *mut pg_sys::FunctionScan)).functions,
            ) {
                let expr = (*function).funcexpr;
                let refused = || {
                    refuse(
                        "beside protected rows a function in FROM must be generate_series of integer constants (step not 0) or unnest of a constant array",
                        "List the values with VALUES, or read them from a public table.",
                    )
                };
                if expr.is_null() || (*expr).type_ != pg_sys::NodeTag::T_FuncExpr {
                    return Err(refused());
                }
                let call = expr as *mut pg_sys::FuncExpr;
                let args: Vec<*mut pg_sys::Const> = list_items::<pg_sys::Node>((*call).args)
                    .into_iter()
                    .map(|a| {
                        if (*a).type_ == pg_sys::NodeTag::T_Const {
                            a.cast()
                        } else {
                            std::ptr::null_mut()
                        }
                    })
                    .collect();
                if args.iter().any(|a| a.is_null() || (**a).constisnull) {
                    return Err(refused());
                }
                let funcid = u32::from((*call).funcid);
                let int = |c: *mut pg_sys::Const, wide: bool| -> i128 {
                    let d = (*c).constvalue.value() as u64;
                    if wide {
                        d as i64 as i128
                    } else {
                        d as u32 as i32 as i128
                    }
                };
                let n = match funcid {
                    pg_sys::F_GENERATE_SERIES_INT4_INT4
                    | pg_sys::F_GENERATE_SERIES_INT8_INT8
                    | pg_sys::F_GENERATE_SERIES_INT4_INT4_INT4
                    | pg_sys::F_GENERATE_SERIES_INT8_INT8_INT8 => {
                        let wide = matches!(
                            funcid,
                            pg_sys::F_GENERATE_SERIES_INT8_INT8
                                | pg_sys::F_GENERATE_SERIES_INT8_INT8_INT8
                        );
                        let (start, stop) = (int(args[0], wide), int(args[1], wide));
                        let step = if args.len() == 3 {
                            int(args[2], wide)
                        } else {
                            1
                        };
                        if step == 0 {
                            return Err(refused());
                        }
                        ((stop - start) / step + 1).max(0) as f64
                    }
                    pg_sys::F_UNNEST_ANYARRAY => {
                        let array = pg_sys::pg_detoast_datum((*args[0]).constvalue.cast_mut_ptr())
                            as *mut pg_sys::ArrayType;
                        pg_sys::ArrayGetNItems(
                            (*array).ndim,
                            array
                                .cast::<u8>()
                                .add(std::mem::size_of::<pg_sys::ArrayType>())
                                .cast(),
                        ) as f64
                    }
                    _ => return Err(refused()),
                };
                rows = rows.max(n);
            }
            Ok(rows)
        }
    }

    /// A public row is worth one row more for each 128 bytes of the values
    /// expressions among protected rows read of it (their whole length,
    /// as stored before compression): decompressing and comparing a wide
    /// value costs what many narrow rows do.
    ///
    /// # Safety
    /// Inside a transaction; `rtindex` is the table's range table index in `self.stmt`.
    unsafe fn width_factor(&self, relid: pg_sys::Oid, rtindex: u32) -> f64 {
        let read = self.read.borrow();
        // A column of a subquery that was not pulled up hides which table
        // column it is: then every column counts.
        // SAFETY: indexes into the flat range table of the live statement, checked against its length.
        let opaque = read.iter().any(|(index, _)| unsafe {
            let rtable = list_items::<pg_sys::RangeTblEntry>((*self.stmt).rtable);
            *index >= 1
                && (*index as usize) <= rtable.len()
                && (*rtable[*index as usize - 1]).rtekind == pg_sys::RTEKind::RTE_SUBQUERY
        });
        let columns: Vec<i16> = if opaque {
            vec![0]
        } else {
            read.iter()
                .filter(|(index, _)| *index == rtindex as i32)
                .map(|(_, column)| *column)
                .collect()
        };
        drop(read);
        1.0 + (table_width(relid, &columns) / BYTES_PER_ROW).floor()
    }

    /// How many rows a public part of the plan can return at most, from
    /// the public side alone: series and lists by their length, tables by
    /// their pages plus a count of their rows, joins by the product. A
    /// protected row joined to it meets all of it, whatever the join: not
    /// only the rows of one key even where a hash join looks it up by key,
    /// since a probe walks its bucket's chain, which an analyst who writes
    /// the public table can fill with distinct keys that hash alike (an
    /// attack put 60 000 such keys under person 17's hash: 118 ms against 17 ms).
    ///
    /// # Safety
    /// `plan` is a live node of `self.stmt` that reads no protected table.
    pub(super) unsafe fn public_rows(&self, plan: *mut pg_sys::Plan) -> f64 {
        // SAFETY: the caller's contract; casts follow the node tags.
        unsafe {
            use pg_sys::NodeTag::*;
            let below: Vec<f64> = children(plan)
                .into_iter()
                .map(|c| self.public_rows(c))
                .collect();
            match (*plan).type_ {
                T_FunctionScan => self.series_rows(plan).unwrap_or(f64::INFINITY),
                T_ValuesScan => {
                    list_items::<pg_sys::Node>((*(plan as *mut pg_sys::ValuesScan)).values_lists)
                        .len() as f64
                }
                T_Result if below.is_empty() => 1.0,
                // A scan does work for its pages (dead rows too) and for the
                // visible rows it returns, each worth one more for every 128 bytes
                // read of it; an index scan for its index's pages too.
                T_SeqScan | T_IndexScan | T_IndexOnlyScan | T_BitmapHeapScan | T_TidScan
                | T_TidRangeScan => {
                    let rtindex = (*(plan as *mut pg_sys::Scan)).scanrelid;
                    let index = match (*plan).type_ {
                        T_IndexScan => pages((*(plan as *mut pg_sys::IndexScan)).indexid),
                        T_IndexOnlyScan => pages((*(plan as *mut pg_sys::IndexOnlyScan)).indexid),
                        _ => below.iter().sum(),
                    };
                    self.scanned(plan)
                        .map(|relid| {
                            table_rows(relid) * self.width_factor(relid, rtindex)
                                + pages(relid)
                                + index
                        })
                        .unwrap_or(f64::INFINITY)
                }
                T_Append | T_MergeAppend => below.iter().sum(),
                T_NestLoop | T_MergeJoin | T_HashJoin => below.iter().product(),
                // What a bitmap heap scan adds for its indexes.
                T_BitmapIndexScan => pages((*(plan as *mut pg_sys::BitmapIndexScan)).indexid),
                T_BitmapAnd | T_BitmapOr => below.iter().sum(),
                _ if !below.is_empty() => below[0],
                _ => f64::INFINITY,
            }
        }
    }
}

/// A relation's (table's or index's) size in pages, as it is on disk now.
fn pages(relid: pg_sys::Oid) -> f64 {
    // SAFETY: the relation is one the plan reads (a public table or its index), opened and
    // closed here under the lock the plan takes anyway.
    unsafe {
        let rel = pg_sys::relation_open(relid, pg_sys::AccessShareLock as i32);
        let blocks = pg_sys::RelationGetNumberOfBlocksInFork(rel, pg_sys::ForkNumber::MAIN_FORKNUM);
        pg_sys::relation_close(rel, pg_sys::AccessShareLock as i32);
        blocks as f64
    }
}

/// The rows of a public table, counted as the analyst (who may read it).
fn table_rows(relid: pg_sys::Oid) -> f64 {
    let Some(table) = qualified_name(relid) else {
        return f64::INFINITY;
    };
    let query = format!("SELECT pg_catalog.count(*) FROM ONLY {table}");
    super::super::catalog::without_jit(|| Spi::get_one::<i64>(&query))
        .ok()
        .flatten()
        .map(|n| n as f64)
        .unwrap_or(f64::INFINITY)
}

/// The widest a row of a public table is in the variable-length columns
/// `columns` (0: the whole row), in bytes before compression:
/// `octet_length` of text and bytea reads the stored length without
/// decompressing; other types are measured as text.
fn table_width(relid: pg_sys::Oid, columns: &[i16]) -> f64 {
    let Some(table) = qualified_name(relid) else {
        return f64::INFINITY;
    };
    let whole = columns.contains(&0);
    let mut parts = Vec::new();
    // SAFETY: catalog lookups by OID and column number inside the caller's transaction; null names are tested.
    unsafe {
        // Columns are numbered from 1 without gaps (a dropped one keeps its number).
        for column in 1..=pg_sys::MaxHeapAttributeNumber as i16 {
            if pg_sys::get_attname(relid, column, true).is_null() {
                break;
            }
            if !whole && !columns.contains(&column) {
                continue;
            }
            let (mut typid, mut typmod, mut collid) = (pg_sys::InvalidOid, -1, pg_sys::InvalidOid);
            pg_sys::get_atttypetypmodcoll(relid, column, &mut typid, &mut typmod, &mut collid);
            if typid == pg_sys::InvalidOid || pg_sys::get_typlen(typid) != -1 {
                continue;
            }
            let name = pg_sys::get_attname(relid, column, true);
            if name.is_null() {
                continue;
            }
            let name = quote(&std::ffi::CStr::from_ptr(name).to_string_lossy());
            let base = pg_sys::getBaseType(typid);
            parts.push(if [pg_sys::TEXTOID, pg_sys::VARCHAROID, pg_sys::BPCHAROID, pg_sys::BYTEAOID].contains(&base) {
                format!("COALESCE(pg_catalog.octet_length({name})::pg_catalog.int8, 0)")
            } else {
                format!("COALESCE(pg_catalog.octet_length({name}::pg_catalog.text)::pg_catalog.int8, 0)")
            });
        }
    }
    if parts.is_empty() {
        return 0.0;
    }
    let query = format!(
        "SELECT pg_catalog.max({}) FROM ONLY {table}",
        parts.join(" OPERATOR(pg_catalog.+) ")
    );
    super::super::catalog::without_jit(|| Spi::get_one::<i64>(&query))
        .ok()
        .flatten()
        .map_or(0.0, |n| n as f64)
}

fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A table's schema-qualified, quoted name.
fn qualified_name(relid: pg_sys::Oid) -> Option<String> {
    // SAFETY: catalog lookups by OID inside the caller's transaction; null names are tested.
    unsafe {
        let name = pg_sys::get_rel_name(relid);
        let schema = pg_sys::get_namespace_name(pg_sys::get_rel_namespace(relid));
        if name.is_null() || schema.is_null() {
            return None;
        }
        let text =
            |p: *mut std::ffi::c_char| std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned();
        Some(format!("{}.{}", quote(&text(schema)), quote(&text(name))))
    }
}
