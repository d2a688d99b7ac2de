//! PostgreSQL's pointer Lists, read as Rust vectors: one place for every
//! stage (the gate, the parameter check, Citus, repeat) to walk them.

use pgrx::pg_sys;

/// The items of a pointer List, as pointers to `T`.
///
/// # Safety
/// `list` is null or a live pointer List whose items are `T`s.
pub(crate) unsafe fn list_items<T>(list: *mut pg_sys::List) -> Vec<*mut T> {
    // SAFETY: the caller's contract; indices stay below the length.
    unsafe {
        let n = if list.is_null() {
            0
        } else {
            (*list).length as usize
        };
        (0..n)
            .map(|i| (*(*list).elements.add(i)).ptr_value as *mut T)
            .collect()
    }
}

/// The nodes of a List of expressions.
///
/// # Safety
/// `list` is null or a live pointer List of nodes.
pub(crate) unsafe fn list_nodes(list: *mut pg_sys::List) -> Vec<*mut pg_sys::Node> {
    // SAFETY: the caller's contract.
    unsafe { list_items(list) }
}

/// The OIDs of an OID List.
///
/// # Safety
/// `list` is null (length 0) or a live OID List.
pub(crate) unsafe fn oid_list(list: *mut pg_sys::List) -> Vec<pg_sys::Oid> {
    // SAFETY: the caller's contract: `elements` hold `length` cells with `oid_value` set; every
    // index read is below `length`.
    unsafe {
        let n = if list.is_null() {
            0
        } else {
            (*list).length as usize
        };
        (0..n)
            .map(|i| (*(*list).elements.add(i)).oid_value)
            .collect()
    }
}
