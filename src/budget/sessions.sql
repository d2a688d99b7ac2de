-- Live sessions and what each has spent (src/budget/session.rs): read from
-- shared memory, so it costs no writes. dpnoise.sessions() shows a role
-- only the sessions charged to roles whose privileges it has (a superuser:
-- all); the join with pg_stat_activity drops exited backends (pid and
-- start time both match only the live one).
CREATE FUNCTION dpnoise.sessions(
    OUT pid integer, OUT role oid, OUT backend_start timestamptz, OUT epsilon_spent numeric,
    OUT delta_spent numeric, OUT epsilon_cap numeric, OUT delta_cap numeric)
    RETURNS SETOF record AS 'MODULE_PATHNAME', 'dp_session_entries_wrapper' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
CREATE VIEW dp_sessions WITH (security_barrier) AS
SELECT s.pid, s.role::regrole AS role, a.usename AS login, a.application_name, s.backend_start,
       s.epsilon_spent, s.delta_spent, s.epsilon_cap, s.delta_cap,
       b.epsilon_remaining AS role_epsilon_remaining, b.delta_remaining AS role_delta_remaining
FROM dpnoise.sessions() s
JOIN pg_catalog.pg_stat_activity a ON a.pid = s.pid AND a.backend_start = s.backend_start
LEFT JOIN @extschema@.dp_budgets b ON b.role = s.role::regrole;
GRANT SELECT ON dp_sessions TO PUBLIC;
COMMENT ON VIEW dp_sessions IS
    'Live sessions of this database: spent epsilon and delta, the session caps, and what remains of the role''s budget. A role sees the sessions of roles it has the privileges of; a superuser, all.';
COMMENT ON FUNCTION dpnoise.sessions() IS 'The session entries in shared memory that the caller may see (dp_sessions reads it).';
COMMENT ON FUNCTION dp_session_budget(double precision, double precision) IS
    'Lowers this session''s cap on epsilon and delta (NULL: unchanged); never raises it.';
