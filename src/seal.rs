//! Seals on the partials of an analyst's query over a distributed protected
//! table (`citus`).
//!
//! The gate admits such a query without the analyst holding SELECT on the
//! table; on Citus, the workers would still check it, so the partials run
//! as the extension's owner, in `dp_partials_sealed(query, seal)`, a
//! SECURITY DEFINER function. It runs only the text the planner hook
//! wrote: the seal is a fresh random nonce and an HMAC-SHA256 of the nonce
//! and the text under a key this backend drew from the OS and never shows,
//! checked by `dp_check_seal` before the text runs. Each planning seals
//! with new nonces, and refuses a plan holding a seal it did not write
//! (`citus::sealing::check_sealed_calls`): a seal read from a printed plan cannot
//! be written again by planning the same query.

use crate::fmgr::v1_function;
use pgrx::pg_sys;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use std::cell::RefCell;
use std::ffi::c_void;

/// PostgreSQL's `PG_SHA256` (common/cryptohash.h).
const PG_SHA256: i32 = 3;
/// A seal's length in bytes: a 16-byte nonce, then an HMAC-SHA256 tag.
pub const SEAL_BYTES: usize = NONCE_BYTES + 32;
const NONCE_BYTES: usize = 16;

unsafe extern "C" {
    fn pg_hmac_create(kind: i32) -> *mut c_void;
    fn pg_hmac_init(ctx: *mut c_void, key: *const u8, len: usize) -> i32;
    fn pg_hmac_update(ctx: *mut c_void, data: *const u8, len: usize) -> i32;
    fn pg_hmac_final(ctx: *mut c_void, dest: *mut u8, len: usize) -> i32;
    fn pg_hmac_free(ctx: *mut c_void);
}

thread_local! {
    /// (process id, key): drawn from the OS once per backend, never from
    /// the noise generator, which a superuser can make reproducible.
    static KEY: RefCell<Option<(i32, [u8; 32])>> = const { RefCell::new(None) };
}

/// This backend's key (a forked process draws its own).
fn key() -> [u8; 32] {
    // SAFETY: a by-value read of MyProcPid, set when the process starts.
    let pid = unsafe { pg_sys::MyProcPid };
    KEY.with(|k| {
        let mut k = k.borrow_mut();
        match *k {
            Some((owner, key)) if owner == pid => key,
            _ => {
                let mut key = [0u8; 32];
                rand_chacha::ChaCha20Rng::from_os_rng().fill_bytes(&mut key);
                *k = Some((pid, key));
                key
            }
        }
    })
}

/// A new seal of `text`: a fresh nonce and its tag.
pub fn seal(text: &[u8]) -> [u8; SEAL_BYTES] {
    let mut nonce = [0u8; NONCE_BYTES];
    rand_chacha::ChaCha20Rng::from_os_rng().fill_bytes(&mut nonce);
    let mut seal = [0u8; SEAL_BYTES];
    seal[..NONCE_BYTES].copy_from_slice(&nonce);
    seal[NONCE_BYTES..].copy_from_slice(&tag(&nonce, text));
    seal
}

/// The HMAC-SHA256 of the nonce and the text under this backend's key.
fn tag(nonce: &[u8], text: &[u8]) -> [u8; 32] {
    hmac(&key(), &[nonce, text])
}

/// HMAC-SHA256 under `key` of `parts`, one after another (PostgreSQL's).
pub fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut tag = [0u8; 32];
    // SAFETY: PostgreSQL's HMAC over buffers that outlive each call; the context is freed before
    // returning, and any failure is raised after it is.
    let ok = unsafe {
        let ctx = pg_hmac_create(PG_SHA256);
        if ctx.is_null() {
            false
        } else {
            let ok = pg_hmac_init(ctx, key.as_ptr(), key.len()) == 0
                && parts
                    .iter()
                    .all(|p| pg_hmac_update(ctx, p.as_ptr(), p.len()) == 0)
                && pg_hmac_final(ctx, tag.as_mut_ptr(), tag.len()) == 0;
            pg_hmac_free(ctx);
            ok
        }
    };
    if !ok {
        pgrx::error!("dpnoise: HMAC-SHA256 is unavailable");
    }
    tag
}

/// Whether `seal` is a seal of `text` this backend wrote (compared in constant time).
pub fn sealed(text: &[u8], seal: &[u8]) -> bool {
    if seal.len() != SEAL_BYTES {
        return false;
    }
    let expected = tag(&seal[..NONCE_BYTES], text);
    expected
        .iter()
        .zip(&seal[NONCE_BYTES..])
        .fold(0u8, |d, (a, b)| d | (a ^ b))
        == 0
}

// dp_check_seal(query text, seal bytea): raises unless the seal is this
// backend's for the query. STRICT: neither argument is NULL.
v1_function!(pg_finfo_dp_check_seal, dp_check_seal, |fcinfo| {
    let bytes = |i: usize| {
        let value =
            pg_sys::pg_detoast_datum_packed(crate::fmgr::arg_datum(fcinfo, i).cast_mut_ptr());
        std::slice::from_raw_parts(
            pgrx::varlena::vardata_any(value) as *const u8,
            pgrx::varlena::varsize_any_exhdr(value),
        )
    };
    if !sealed(bytes(0), bytes(1)) {
        crate::errors::raise_sqlstate(
            "42501",
            "dpnoise: dp_partials_sealed runs only the partials the planner wrote for this session"
                .to_owned(),
            Some("Query the distributed table itself; dpnoise splits the query.".to_owned()),
        );
    }
    pg_sys::Datum::from(0)
});
