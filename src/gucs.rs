//! dpnoise's settings.

use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use pgrx::pg_sys;
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicU64, Ordering};

/// `dpnoise.seed`: empty (the default) seeds each backend's generator from
/// the OS; an integer makes the noise reproducible. Superusers only: a
/// known seed makes every release predictable.
static SEED: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);

/// Bumped by every assignment of `dpnoise.seed`, even to the same value, so
/// `SET dpnoise.seed = '7'` twice restarts the stream twice.
static SEED_GENERATION: AtomicU64 = AtomicU64::new(0);

/// `dpnoise.enforce_budget`: on (the default) charges every release to the
/// role's budget; off releases without charging, for curators who publish
/// results themselves. Superusers only.
static ENFORCE_BUDGET: GucSetting<bool> = GucSetting::<bool>::new(true);

/// Read for every release (a per-row function's every row): the variable
/// itself, without `GucSetting::get`'s thread check, whose thread-local
/// lookup cost about 1.5 % of a per-row release.
#[inline]
pub fn enforce_budget() -> bool {
    // SAFETY: a by-value read of the bool PostgreSQL's GUC machinery writes, on this backend's
    // one thread (the only one that runs dpnoise's code), never while this read runs.
    unsafe { *ENFORCE_BUDGET.as_ptr() }
}

/// `dpnoise.charge_ahead`: how many releases a session pays for at once
/// (src/budget/ahead.rs); 0 or 1 (the default): each as it comes.
/// Superusers only (ALTER ROLE ... SET): it trades the ledger's
/// statement-by-statement detail for throughput.
static CHARGE_AHEAD: GucSetting<i32> = GucSetting::<i32>::new(0);

pub fn charge_ahead() -> u64 {
    CHARGE_AHEAD.get().max(0) as u64
}

/// `dpnoise.drop_ledger`: off (the default) refuses `DROP EXTENSION
/// dpnoise` while the ledger holds charges. Superusers only.
static DROP_LEDGER: GucSetting<bool> = GucSetting::<bool>::new(false);

pub fn drop_ledger() -> bool {
    DROP_LEDGER.get()
}

/// `dpnoise.max_public_fanout`: how many public rows (of a table, list or
/// series joined to protected rows) one protected row may meet in an
/// analyst's statement. It bounds how much run time one person can add to
/// a statement (docs/analysts.md). Superusers only.
static MAX_PUBLIC_FANOUT: GucSetting<i32> = GucSetting::<i32>::new(1000);

pub fn max_public_fanout() -> i32 {
    MAX_PUBLIC_FANOUT.get()
}

/// `dpnoise.analyst`: on for roles the DBA marked as analysts (`ALTER ROLE
/// … IN DATABASE … SET`, which `dp_analyst` runs). Superusers only: an
/// analyst can neither SET nor RESET it, nor pass it when connecting.
static ANALYST: GucSetting<bool> = GucSetting::<bool>::new(false);

/// `dpnoise.analyst_server_messages`: lets an analyst's session see the
/// server's LOG and DEBUG messages while it queries protected tables (they
/// can describe the rows: sort sizes, plans). Superusers only; for tests
/// that read what the server did (the Citus suite reads shard queries).
static ANALYST_SERVER_MESSAGES: GucSetting<bool> = GucSetting::<bool>::new(false);

/// Whether analysts' sessions may see LOG and DEBUG messages.
pub fn analyst_server_messages() -> bool {
    ANALYST_SERVER_MESSAGES.get()
}

/// Whether this session is an analyst's (the gate applies: `gate::gated`).
pub fn analyst() -> bool {
    ANALYST.get()
}

/// `dpnoise.selection_epsilon` and `dpnoise.selection_delta`: what private
/// partition selection spends on an analyst's GROUP BY (each query pays it
/// on top of its aggregates' ε).
static SELECTION_EPSILON: GucSetting<f64> = GucSetting::<f64>::new(0.5);
static POLICY_EPSILON: GucSetting<f64> = GucSetting::<f64>::new(1.0);
static POLICY_ROWS_PER_PERSON: GucSetting<i32> = GucSetting::<i32>::new(10);

/// The rows a person adds at most to a plain count or sum over several
/// rows per person, for a table without a dp_policy of its own.
pub fn policy_rows_per_person() -> i32 {
    POLICY_ROWS_PER_PERSON.get()
}

/// The ε of an analyst's statement of plain aggregates over a protected
/// table without a dp_policy of its own (`gate::policy`).
pub fn policy_epsilon() -> f64 {
    POLICY_EPSILON.get()
}
static SELECTION_DELTA: GucSetting<f64> = GucSetting::<f64>::new(1e-6);

pub fn selection_epsilon() -> f64 {
    SELECTION_EPSILON.get()
}

pub fn selection_delta() -> f64 {
    SELECTION_DELTA.get()
}

/// `dpnoise.thresholded_counts`: whether an analyst's GROUP BY that shows a
/// pure-ε dp_count selects its groups by that count's own noise (on), or
/// by a separate selection at dpnoise.selection_epsilon (off).
static THRESHOLDED_COUNTS: GucSetting<bool> = GucSetting::<bool>::new(true);

pub fn thresholded_counts() -> bool {
    THRESHOLDED_COUNTS.get()
}

/// `dpnoise.bounding_by_person`: whether the gate bounds a level without
/// GROUP BY keys by aggregating each person's rows by the person (on), or
/// by the window over person and choice key that grouped levels use (off:
/// for tests and benchmarks to compare the two).
static BOUNDING_BY_PERSON: GucSetting<bool> = GucSetting::<bool>::new(true);

pub fn bounding_by_person() -> bool {
    BOUNDING_BY_PERSON.get()
}

/// `dpnoise.max_epsilon_per_query`: the most one analyst's statement may
/// spend (0: no limit). Superusers set it, per role.
static MAX_EPSILON_PER_QUERY: GucSetting<f64> = GucSetting::<f64>::new(0.0);

pub fn max_epsilon_per_query() -> f64 {
    MAX_EPSILON_PER_QUERY.get()
}

/// `dpnoise.max_groups_contributed`: lowers, for this session, how many
/// groups of a query one person may contribute to (0: each protected
/// table's own setting, which it can never raise).
static MAX_GROUPS_CONTRIBUTED: GucSetting<i32> = GucSetting::<i32>::new(0);

pub fn max_groups_contributed() -> i32 {
    MAX_GROUPS_CONTRIBUTED.get()
}

/// `dpnoise.role_max_groups_contributed`: the DBA's cap for a role (0: none),
/// set with ALTER ROLE … SET; superusers only, so the analyst cannot lift it.
static ROLE_MAX_GROUPS_CONTRIBUTED: GucSetting<i32> = GucSetting::<i32>::new(0);

pub fn role_max_groups_contributed() -> i32 {
    ROLE_MAX_GROUPS_CONTRIBUTED.get()
}

/// `dpnoise.max_epsilon_per_session` and `dpnoise.max_delta_per_session`:
/// the most one connection may spend (0: no cap); superusers set them, per
/// role or database (src/budget/session.rs).
static MAX_EPSILON_PER_SESSION: GucSetting<f64> = GucSetting::<f64>::new(0.0);
static MAX_DELTA_PER_SESSION: GucSetting<f64> = GucSetting::<f64>::new(0.0);

pub fn max_epsilon_per_session() -> f64 {
    MAX_EPSILON_PER_SESSION.get()
}

pub fn max_delta_per_session() -> f64 {
    MAX_DELTA_PER_SESSION.get()
}

/// `dpnoise.timing_epsilon`, `dpnoise.timing_delta` and
/// `dpnoise.timing_row_microseconds`: an analyst's fresh statement holds
/// its answer for a random delay that makes its run time an (ε, δ)
/// release, charged with it, for run times one person changes by at most
/// the row cost times the rows the plan check lets one protected row meet
/// (`output::timing`). Superusers set them; epsilon 0 turns it off.
static TIMING_EPSILON: GucSetting<f64> = GucSetting::<f64>::new(0.1);
static TIMING_DELTA: GucSetting<f64> = GucSetting::<f64>::new(1e-7);
static TIMING_ROW_MICROSECONDS: GucSetting<f64> = GucSetting::<f64>::new(1.0);

/// The run time's (ε, δ) and the microseconds a protected row's work is
/// counted as; None when off.
pub fn timing() -> Option<(f64, f64, f64)> {
    let epsilon = TIMING_EPSILON.get();
    (epsilon > 0.0).then(|| (epsilon, TIMING_DELTA.get(), TIMING_ROW_MICROSECONDS.get()))
}

pub fn init() {
    GucRegistry::define_float_guc(
        c"dpnoise.timing_epsilon",
        c"The epsilon an analyst's fresh statement pays for its run time (0: its run time is not held).",
        c"The answer is held for a random delay (a shifted truncated Laplacian) so that its run time is (timing_epsilon, timing_delta)-DP. Only superusers can change it.",
        &TIMING_EPSILON,
        0.0,
        10.0,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"dpnoise.timing_delta",
        c"The delta an analyst's fresh statement pays for its run time.",
        c"Sets how far the delay reaches: at most about 2 ln(1/delta) / timing_epsilon times the statement's bound. Only superusers can change it.",
        &TIMING_DELTA,
        1e-15,
        0.01,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"dpnoise.timing_row_microseconds",
        c"The run time one protected row's work is counted as, per public row it meets (microseconds).",
        c"A statement's bound is this times the rows (and pages) the plan check lets one protected row meet. Only superusers can change it.",
        &TIMING_ROW_MICROSECONDS,
        0.001,
        1e6,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"dpnoise.max_epsilon_per_session",
        c"The most epsilon one connection may spend (0: no cap).",
        c"Set by a superuser, per role or database (ALTER ROLE ... SET); a session cannot raise it.",
        &MAX_EPSILON_PER_SESSION,
        0.0,
        1e9,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"dpnoise.max_delta_per_session",
        c"The most delta one connection may spend (0: no cap).",
        c"Set by a superuser, per role or database (ALTER ROLE ... SET); a session cannot raise it.",
        &MAX_DELTA_PER_SESSION,
        0.0,
        1.0,
        GucContext::Suset,
        GucFlags::default(),
    );

    GucRegistry::define_int_guc(
        c"dpnoise.max_public_fanout",
        c"How many public rows one protected row may meet in an analyst's statement.",
        c"Bounds the run time one person can add to an analyst's query. Only superusers can change it.",
        &MAX_PUBLIC_FANOUT,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"dpnoise.enforce_budget",
        c"Charges every release to the privacy budget of the role that runs it.",
        c"Off: releases are not charged (for curators who publish results themselves). Only superusers can change it.",
        &ENFORCE_BUDGET,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"dpnoise.charge_ahead",
        c"How many releases a session pays for at once (0 or 1: each as it comes).",
        c"N > 1: one charge for N releases of one role at one epsilon and delta; what the session does not release is given back as it ends. Only superusers can change it.",
        &CHARGE_AHEAD,
        0,
        1024,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"dpnoise.drop_ledger",
        c"Allows DROP EXTENSION dpnoise to delete a ledger that holds charges.",
        c"Off: DROP EXTENSION dpnoise is refused while the ledger holds charges. Only superusers can change it.",
        &DROP_LEDGER,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"dpnoise.analyst_server_messages",
        c"Lets analysts' sessions see the server's LOG and DEBUG messages while they query protected tables.",
        c"Off: an analyst's statement over protected tables is refused while client_min_messages is below NOTICE (the messages can describe the rows). For tests only; only superusers can change it.",
        &ANALYST_SERVER_MESSAGES,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"dpnoise.analyst",
        c"Gives this session only differentially private answers from protected tables.",
        c"Set per role by dp_analyst (ALTER ROLE ... IN DATABASE ... SET); only superusers can change it.",
        &ANALYST,
        GucContext::Suset,
        GucFlags::default(),
    );
    // The settings that shape an analyst's query (the gate's rewrite reads
    // them): a change re-plans cached statements (`replan_on_change`).
    GucRegistry::define_float_guc_with_hooks(
        c"dpnoise.selection_epsilon",
        c"Epsilon spent on choosing which group keys from protected data an analyst's GROUP BY shows.",
        c"Added to the query's cost; with dpnoise.selection_delta.",
        &SELECTION_EPSILON,
        1e-4,
        100.0,
        GucContext::Userset,
        GucFlags::default(),
        None,
        Some(assign_selection_epsilon),
        None,
    );
    GucRegistry::define_float_guc_with_hooks(
        c"dpnoise.policy_epsilon",
        c"Epsilon an analyst's statement spends on the plain aggregates (count, sum, avg) of a protected table without a dp_policy.",
        c"Split evenly among the statement's plain aggregates. Only a superuser can change it.",
        &POLICY_EPSILON,
        1e-4,
        100.0,
        GucContext::Suset,
        GucFlags::default(),
        None,
        Some(assign_policy_epsilon),
        None,
    );
    GucRegistry::define_float_guc_with_hooks(
        c"dpnoise.selection_delta",
        c"Delta spent on choosing which group keys from protected data an analyst's GROUP BY shows.",
        c"Must be above 0 for GROUP BY on keys from protected data.",
        &SELECTION_DELTA,
        0.0,
        0.5,
        GucContext::Userset,
        GucFlags::default(),
        None,
        Some(assign_selection_delta),
        None,
    );
    // SAFETY: as for dpnoise.seed below: the hooks are #[pg_guard] and have the int GUC assign
    // hook's signature; the settings are statics.
    unsafe {
        GucRegistry::define_bool_guc_with_hooks(
            c"dpnoise.thresholded_counts",
            c"Selects the groups of an analyst's GROUP BY by the noisy dp_count it shows, where it shows one without delta.",
            c"On: the count spends the whole epsilon and selection adds dpnoise.selection_delta only. Off: a separate selection at dpnoise.selection_epsilon and dpnoise.selection_delta. Only superusers can change it.",
            &THRESHOLDED_COUNTS,
            GucContext::Suset,
            GucFlags::default(),
            None,
            Some(assign_thresholded_counts),
            None,
        );
        GucRegistry::define_bool_guc_with_hooks(
            c"dpnoise.bounding_by_person",
            c"Bounds an analyst's level without GROUP BY keys by aggregating each person's rows by the person.",
            c"Off: the window over person and choice key that grouped levels use (the same answers, slower). Only superusers can change it.",
            &BOUNDING_BY_PERSON,
            GucContext::Suset,
            GucFlags::default(),
            None,
            Some(assign_bounding_by_person),
            None,
        );
        GucRegistry::define_int_guc_with_hooks(
            c"dpnoise.max_groups_contributed",
            c"How many groups of one query a person may contribute to, at most (0: the protected tables' setting).",
            c"Can only lower the protected tables' max_groups_contributed.",
            &MAX_GROUPS_CONTRIBUTED,
            0,
            1000,
            GucContext::Userset,
            GucFlags::default(),
            None,
            Some(assign_max_groups),
            None,
        );
        GucRegistry::define_int_guc_with_hooks(
            c"dpnoise.role_max_groups_contributed",
            c"How many groups of one query a person may contribute to, at most, for this role (0: no cap).",
            c"Set per role by a superuser (ALTER ROLE ... SET); lowers the protected tables' max_groups_contributed.",
            &ROLE_MAX_GROUPS_CONTRIBUTED,
            0,
            1000,
            GucContext::Suset,
            GucFlags::default(),
            None,
            Some(assign_role_max_groups),
            None,
        );
        GucRegistry::define_int_guc_with_hooks(
            c"dpnoise.policy_rows_per_person",
            c"Rows a person adds at most to an analyst's plain count or sum over several rows per person, for a protected table without a dp_policy.",
            c"A person's rows beyond it are not counted. Only a superuser can change it.",
            &POLICY_ROWS_PER_PERSON,
            1,
            1_000_000,
            GucContext::Suset,
            GucFlags::default(),
            None,
            Some(assign_policy_rows),
            None,
        );
    }
    GucRegistry::define_float_guc(
        c"dpnoise.max_epsilon_per_query",
        c"The most epsilon one statement of an analyst may spend (0: no limit).",
        c"Set per role by a superuser (ALTER ROLE ... SET).",
        &MAX_EPSILON_PER_QUERY,
        0.0,
        1e6,
        GucContext::Suset,
        GucFlags::default(),
    );
    // SAFETY: pgrx's condition for hooks is that no Rust panic escapes them into PostgreSQL:
    // check_seed and assign_seed are #[pg_guard]. Their signatures are the string GUC check and
    // assign hook types PostgreSQL calls them with. SEED is a static, so the setting's storage
    // lives as long as the library; this runs once, from _PG_init, on the process's only thread.
    unsafe {
        GucRegistry::define_string_guc_with_hooks(
            c"dpnoise.seed",
            c"Fixes the noise generator's seed (tests only).",
            c"Empty: every backend seeds ChaCha20 from the operating system. An integer: noise is reproducible. Only superusers can set it.",
            &SEED,
            GucContext::Suset,
            GucFlags::SUPERUSER_ONLY,
            Some(check_seed),
            Some(assign_seed),
            None,
        );
    }
}

/// Runs `f` with each setting (name, value) in force, at a GUC nest level
/// of its own (as a function's SET clause makes one): restored after `f`,
/// or by the (sub)transaction abort if it raises.
pub(crate) fn with_settings<T>(settings: &[(&CStr, &CStr)], f: impl FnOnce() -> T) -> T {
    // SAFETY: a nest level pushed here and popped below; names and values are NUL-terminated.
    let level = unsafe {
        let level = pg_sys::NewGUCNestLevel();
        for (name, value) in settings {
            pg_sys::set_config_option(
                name.as_ptr(),
                value.as_ptr(),
                pg_sys::GucContext::PGC_USERSET,
                pg_sys::GucSource::PGC_S_SESSION,
                pg_sys::GucAction::GUC_ACTION_SAVE,
                true,
                0,
                false,
            );
        }
        level
    };
    let out = f();
    // SAFETY: pops the level pushed above.
    unsafe { pg_sys::AtEOXact_GUC(true, level) };
    out
}

/// The seed in force, if any, and the assignment generation.
pub fn seed() -> (Option<u64>, u64) {
    let generation = SEED_GENERATION.load(Ordering::Relaxed);
    let seed = SEED
        .get()
        .and_then(|s| parse_seed(s.as_c_str()).ok().flatten());
    (seed, generation)
}

pub fn seed_generation() -> u64 {
    SEED_GENERATION.load(Ordering::Relaxed)
}

fn parse_seed(s: &CStr) -> Result<Option<u64>, ()> {
    let text = s.to_str().map_err(|_| ())?.trim();
    if text.is_empty() {
        return Ok(None);
    }
    text.parse::<u64>().map(Some).map_err(|_| ())
}

/// # Safety
/// Only for PostgreSQL, as dpnoise.seed's check hook: `newval` is non-null
/// and points to the proposed value, null or a NUL-terminated string.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn check_seed(
    newval: *mut *mut std::ffi::c_char,
    _extra: *mut *mut std::ffi::c_void,
    _source: pg_sys::GucSource::Type,
) -> bool {
    // SAFETY: `newval` is the non-null `char **` PostgreSQL passes a string check hook (the
    // caller's contract), pointing to the proposed value.
    let value = unsafe { *newval };
    // SAFETY: `value` is non-null here (the `||` tested it first), and a proposed string value is
    // NUL-terminated and allocated for the whole hook call.
    if value.is_null() || parse_seed(unsafe { CStr::from_ptr(value) }).is_ok() {
        return true;
    }
    // SAFETY: the check-hook protocol (utils/guc.h): a hook returning false may set these two
    // globals of this process (on its only thread), which PostgreSQL reads right after the hook
    // returns, to report the error. The message is pstrdup'd from a NUL-terminated literal into
    // the current memory context, which outlives that report.
    unsafe {
        pg_sys::GUC_check_errcode(pgrx::PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE as i32);
        pg_sys::GUC_check_errmsg_string =
            pg_sys::pstrdup(c"dpnoise.seed must be empty or an integer in [0, 2^64)".as_ptr());
    }
    false
}

/// # Safety
/// Only for PostgreSQL, as dpnoise.seed's assign hook; neither argument is read.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn assign_seed(
    _newval: *const std::ffi::c_char,
    _extra: *mut std::ffi::c_void,
) {
    SEED_GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// A setting that shapes an analyst's query changed: this backend's cached
/// plans (prepared statements, psycopg's automatic preparation, PL/pgSQL)
/// are analysed and planned again at their next execution, so they run
/// with the new k or selection (ε, δ), as a fresh statement would. Only a
/// real change resets: a SET to the same value, or the restore at the end
/// of a transaction, costs nothing; statements never re-plan otherwise.
fn replan_on_change(changed: bool) {
    if changed {
        // SAFETY: ResetPlanCache only marks this backend's cached plan sources invalid (no catalog
        // access, no error), which is what an assign hook may do.
        unsafe { pg_sys::ResetPlanCache() };
    }
}

/// # Safety
/// Only for PostgreSQL, as an int setting's assign hook (the static still holds the old value).
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn assign_max_groups(newval: i32, _extra: *mut std::ffi::c_void) {
    replan_on_change(newval != MAX_GROUPS_CONTRIBUTED.get());
}

/// # Safety
/// As `assign_max_groups`.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn assign_role_max_groups(newval: i32, _extra: *mut std::ffi::c_void) {
    replan_on_change(newval != ROLE_MAX_GROUPS_CONTRIBUTED.get());
}

/// # Safety
/// As `assign_max_groups`, for a float setting.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn assign_selection_epsilon(newval: f64, _extra: *mut std::ffi::c_void) {
    replan_on_change(newval.to_bits() != SELECTION_EPSILON.get().to_bits());
}

/// # Safety
/// As `assign_max_groups`, for a float setting.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn assign_policy_epsilon(newval: f64, _extra: *mut std::ffi::c_void) {
    replan_on_change(newval.to_bits() != POLICY_EPSILON.get().to_bits());
}

/// # Safety
/// As `assign_max_groups`.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn assign_policy_rows(newval: i32, _extra: *mut std::ffi::c_void) {
    replan_on_change(newval != POLICY_ROWS_PER_PERSON.get());
}

/// # Safety
/// As `assign_max_groups`, for a bool setting.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn assign_thresholded_counts(newval: bool, _extra: *mut std::ffi::c_void) {
    replan_on_change(newval != THRESHOLDED_COUNTS.get());
}

/// # Safety
/// As `assign_selection_epsilon`.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn assign_bounding_by_person(newval: bool, _extra: *mut std::ffi::c_void) {
    replan_on_change(newval != BOUNDING_BY_PERSON.get());
}

/// # Safety
/// As `assign_selection_epsilon`.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn assign_selection_delta(newval: f64, _extra: *mut std::ffi::c_void) {
    replan_on_change(newval.to_bits() != SELECTION_DELTA.get().to_bits());
}
