//! The versions of the tables a release reads, and the secret key, read
//! when a statement starts, under its snapshot, as the bootstrap superuser
//! (`read`): what completes a release's identity (`super::identify`).

use super::{Reading, KEY};
use pgrx::pg_sys;
use pgrx::spi::Spi;

/// A table's write log rows past which its statements ask the ledger
/// worker to merge them (reading them costs each statement that reads it).
const COMPACT_AT: i64 = 64;

// The write log is read once per table (one index range: its rows are
// few, the ledger worker merges them); a write by this transaction
// never reaches here (it has an xid: start()).
const VERSIONS: &str = "SELECT r.rel, t.tgenabled OPERATOR(pg_catalog.=) 'A' \
        AND t.tgfoid OPERATOR(pg_catalog.=) 'dpnoise.track_write()'::pg_catalog.regprocedure \
        AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_subscription_rel s WHERE s.srrelid OPERATOR(pg_catalog.=) r.rel) \
        AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_inherits i WHERE i.inhrelid OPERATOR(pg_catalog.=) r.rel) \
        AND NOT c.relispartition AND c.relpersistence OPERATOR(pg_catalog.=) 'p', \
        pg_catalog.concat_ws(' ', c.relfilenode, c.xmin, t.xmin, COALESCE(w.transactions, 0), COALESCE(w.newest::pg_catalog.text, '-'), \
            (SELECT pg_catalog.string_agg(a.xmin::pg_catalog.text, ',' ORDER BY a.attnum) FROM pg_catalog.pg_attribute a \
             WHERE a.attrelid OPERATOR(pg_catalog.=) r.rel)), \
        w.rows \
    FROM pg_catalog.unnest($1::pg_catalog.oid[]) r(rel) \
    JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) r.rel \
    LEFT JOIN pg_catalog.pg_trigger t ON t.tgrelid OPERATOR(pg_catalog.=) r.rel AND t.tgname OPERATOR(pg_catalog.=) 'dpnoise_track' \
    CROSS JOIN LATERAL (SELECT pg_catalog.sum(x.n) AS transactions, pg_catalog.max(x.xid) AS newest, pg_catalog.count(*) AS rows \
        FROM dpnoise.writes x WHERE x.rel OPERATOR(pg_catalog.=) r.rel) w";

/// Reads the secret key and, for each of `relations`, its version (None:
/// not tracked), under `snapshot`, as the bootstrap superuser (the key and
/// the write log are dpnoise's); `identify` makes the calls' identities of
/// them. (Whether the ledger holds one as paid no longer matters: a repeat
/// is free only when the store answers it.)
///
/// # Safety
/// `snapshot` is the live snapshot of the starting execution, whose
/// transaction has no xid (so SPI runs read-only, under the pushed
/// snapshot); inside a transaction.
pub(super) unsafe fn read(
    relations: &[pg_sys::Oid],
    snapshot: pg_sys::Snapshot,
    identify: impl FnOnce(&[u8; 32], &[(pg_sys::Oid, Option<Vec<u8>>)]) -> Vec<Option<[u8; 32]>>,
) -> Vec<Option<[u8; 32]>> {
    crate::gate::as_superuser(|| {
        // SAFETY: the caller's contract: the execution's live snapshot.
        unsafe { read_under(snapshot, identify, relations) }
    })
    .unwrap_or_else(|e| {
        crate::errors::raise_sqlstate(
            crate::errors::LEDGER_UNAVAILABLE,
            format!("dpnoise: cannot read the versions of the tables a release reads: {e}"),
            Some("The extension may need ALTER EXTENSION dpnoise UPDATE.".to_owned()),
        )
    })
}

/// `read`'s queries, under `snapshot`, with names resolved in pg_catalog.
///
/// # Safety
/// As `read`'s.
unsafe fn read_under(
    snapshot: pg_sys::Snapshot,
    identify: impl FnOnce(&[u8; 32], &[(pg_sys::Oid, Option<Vec<u8>>)]) -> Vec<Option<[u8; 32]>>,
    relations: &[pg_sys::Oid],
) -> Result<Vec<Option<[u8; 32]>>, pgrx::spi::Error> {
    // SAFETY: pushes the execution's snapshot so the read sees what it sees (popped below; an
    // error's abort pops it too).
    unsafe { pg_sys::PushActiveSnapshot(snapshot) };
    // Run as a superuser, the queries below must not resolve a name the
    // caller chose: a type in pg_temp is found before pg_catalog's unless
    // the path says otherwise (and every name is qualified besides).
    // And the write log by its index, whatever stale statistics say of a
    // table the ledger worker has just merged.
    let settings = [
        (c"search_path", c"pg_catalog, pg_temp"),
        (c"enable_seqscan", c"off"),
        (c"enable_bitmapscan", c"off"),
    ];
    let read = crate::gucs::with_settings(&settings, || {
        let reading = Reading::start();
        let read = Spi::connect(|client| {
            let key = match KEY.with(|k| *k.borrow()) {
                Some(key) => key,
                None => {
                    let bytes = client
                        .select("SELECT k.key FROM dpnoise.release_key k", Some(1), &[])?
                        .first()
                        .get_one::<Vec<u8>>()?
                        .unwrap_or_default();
                    let key: [u8; 32] = bytes
                        .try_into()
                        .map_err(|_| pgrx::spi::Error::InvalidPosition)?;
                    KEY.with(|k| *k.borrow_mut() = Some(key));
                    key
                }
            };
            let oids: Vec<pg_sys::Oid> = relations.to_vec();
            let args = [oids.into()];
            let mut versions = Vec::new();
            let mut compact = false;
            for row in client.select(VERSIONS, None, &args)? {
                let rel = row.get::<pg_sys::Oid>(1)?.unwrap_or(pg_sys::InvalidOid);
                let current = row.get::<bool>(2)?.unwrap_or(false);
                let version = row.get::<String>(3)?.unwrap_or_default();
                versions.push((rel, current.then(|| version.into_bytes())));
                compact |= row.get::<i64>(4)?.unwrap_or(0) > COMPACT_AT;
            }
            if compact {
                crate::budget::request_compaction();
            }
            let identities = identify(&key, &versions);
            Ok::<_, pgrx::spi::Error>(identities)
        });
        drop(reading);
        read
    });
    // SAFETY: pops the snapshot pushed above.
    unsafe { pg_sys::PopActiveSnapshot() };
    read
}
