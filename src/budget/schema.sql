-- The privacy budget -------------------------------------------------------
-- docs/budget.md explains the design. In short: a release asks the ledger
-- worker (a background worker per database) to charge it; the worker
-- commits the charge in its own transaction, synchronously, before the
-- release is computed. The caller's ROLLBACK cannot undo that commit.
-- Amounts are numeric: the exact decimals the user wrote.
CREATE SCHEMA dpnoise;
REVOKE ALL ON SCHEMA dpnoise FROM PUBLIC;

-- Granted amounts, written by dp_budget_grant and friends only.
CREATE TABLE dpnoise.budget (
    role    regrole PRIMARY KEY,
    epsilon numeric NOT NULL CHECK (epsilon >= 0),
    delta   numeric NOT NULL CHECK (delta >= 0),
    -- How releases add up (src/budget/accountant.rs): 'additive' (the
    -- default) checks epsilon and delta above; 'zcdp' checks rho and
    -- rho_delta (the delta of releases with no finite rho), and epsilon
    -- and delta are the target the grants converted from, with
    -- conversion_delta the part of delta the conversion took.
    accountant text NOT NULL DEFAULT 'additive' CHECK (accountant IN ('additive', 'zcdp')),
    rho numeric CHECK (rho >= 0),
    rho_delta numeric CHECK (rho_delta >= 0),
    conversion_delta numeric CHECK (conversion_delta >= 0)
);
-- Spent amounts, written by the ledger worker only (never by a grant, so a
-- session that grants and then releases in one transaction cannot make the
-- worker wait for its own row lock).
CREATE TABLE dpnoise.spent (
    role    regrole PRIMARY KEY,
    epsilon numeric NOT NULL DEFAULT 0,
    delta   numeric NOT NULL DEFAULT 0,
    -- What the same charges cost under zCDP (counted for every role).
    rho numeric NOT NULL DEFAULT 0,
    rho_delta numeric NOT NULL DEFAULT 0
);
-- Budgets per table (or group of tables), and per period, beside the
-- role's (src/budget/accountant.rs): a statement that reads any of
-- `tables` is charged to the budget too, and refused if it would pass it.
-- With a period, what was spent is forgotten when the period ends (the
-- window starts again at period_start + n * period).
CREATE TABLE dpnoise.table_budgets (
    id bigserial PRIMARY KEY,
    role regrole NOT NULL,
    tables oid[] NOT NULL CHECK (cardinality(tables) > 0),
    accountant text NOT NULL DEFAULT 'additive' CHECK (accountant IN ('additive', 'zcdp')),
    -- Additive: epsilon and delta. zCDP: rho and rho_delta (epsilon and
    -- delta are then the target the grants converted from).
    epsilon numeric NOT NULL CHECK (epsilon >= 0),
    delta numeric NOT NULL CHECK (delta >= 0),
    rho numeric CHECK (rho >= 0),
    rho_delta numeric CHECK (rho_delta >= 0),
    period interval CHECK (period > interval '0'),
    period_start timestamptz NOT NULL,
    spent_epsilon numeric NOT NULL DEFAULT 0,
    spent_delta numeric NOT NULL DEFAULT 0,
    spent_rho numeric NOT NULL DEFAULT 0,
    spent_rho_delta numeric NOT NULL DEFAULT 0
);
CREATE INDEX ON dpnoise.table_budgets (role);
-- An optional cap on what all roles together may spend in this database.
CREATE TABLE dpnoise.global_cap (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    epsilon   numeric NOT NULL CHECK (epsilon >= 0),
    delta     numeric NOT NULL CHECK (delta >= 0)
);
-- Never holds a row: charge_batch locks it so that two ledger workers of one
-- database never interleave. No role but a superuser can take this lock,
-- where an advisory lock could be taken (and held) by any role.
CREATE TABLE dpnoise.charge_lock ();
-- One row per charge.
CREATE TABLE dpnoise.ledger (
    id         bigserial PRIMARY KEY,
    role       regrole NOT NULL,
    charged_at timestamptz NOT NULL,
    statement  text,
    mechanism  text NOT NULL,
    epsilon    numeric NOT NULL,
    delta      numeric NOT NULL,
    releases   bigint NOT NULL,
    pid        integer NOT NULL,
    -- With pid, the session that was charged (its backend start time).
    session_start timestamptz,
    -- The same charge under zCDP: rho, and the delta beside it (NULL
    -- before 0.20.0).
    rho numeric,
    rho_delta numeric,
    -- The tables the statement read (NULL: not known, charged to every
    -- table budget of the role; before 0.20.0).
    tables oid[]
);
CREATE INDEX ON dpnoise.ledger (role, id);
-- The releases paid for once and for all (src/repeat), by the charge that
-- paid them: asked again, by any role, they are answered identically and free.
CREATE TABLE dpnoise.paid_releases (
    identity  bytea PRIMARY KEY CHECK (pg_catalog.length(identity) = 32),
    ledger_id bigint NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('dpnoise.budget', '');
SELECT pg_catalog.pg_extension_config_dump('dpnoise.spent', '');
SELECT pg_catalog.pg_extension_config_dump('dpnoise.global_cap', '');
SELECT pg_catalog.pg_extension_config_dump('dpnoise.ledger', '');
SELECT pg_catalog.pg_extension_config_dump('dpnoise.ledger_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('dpnoise.paid_releases', '');
SELECT pg_catalog.pg_extension_config_dump('dpnoise.table_budgets', '');
SELECT pg_catalog.pg_extension_config_dump('dpnoise.table_budgets_id_seq', '');

-- Called by the ledger worker (as the bootstrap superuser) once per batch
-- of requests, in request order; it answers each only after the commit.
-- Request i asks releases[i] releases at (epsilons[i], deltas[i]) each; it
-- is granted if what remains of its role's budget (and of the global cap,
-- if any) covers it. Only the worker writes dpnoise.spent, and the lock on
-- dpnoise.charge_lock keeps even two workers of one database from interleaving,
-- so reading then updating cannot race.
-- The 32-byte identities concatenated in a charge request.
CREATE FUNCTION dpnoise.identities(packed bytea) RETURNS SETOF bytea
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT substring(packed FROM 1 + 32 * n FOR 32) FROM generate_series(0, coalesce(length(packed), 0) / 32 - 1) n
$$;

CREATE FUNCTION dpnoise.charge_batch(
    requesters oid[], epsilons numeric[], deltas numeric[], releases bigint[],
    mechanisms text[], statements text[], pids integer[], starts timestamptz[], identities bytea[], repeats boolean[],
    rhos numeric[] DEFAULT NULL, rho_deltas numeric[] DEFAULT NULL, tables text[] DEFAULT NULL)
RETURNS TABLE (granted boolean, remaining_epsilon numeric, remaining_delta numeric, is_free boolean, remaining_rho numeric,
               refused_by text)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    -- Per distinct role of the batch (usually one): its accountant, what
    -- it has left and what this batch charges it. A zCDP budget's left
    -- delta is rho_delta's.
    roles oid[] := '{}';
    zcdp boolean[] := '{}';
    left_epsilon numeric[] := '{}';
    left_delta numeric[] := '{}';
    left_rho numeric[] := '{}';
    charged_epsilon numeric[] := '{}';
    charged_delta numeric[] := '{}';
    charged_rho numeric[] := '{}';
    charged_rho_delta numeric[] := '{}';
    capped boolean := false;
    cap_epsilon numeric;
    cap_delta numeric;
    g boolean[] := '{}';
    re numeric[] := '{}';
    rd numeric[] := '{}';
    rr numeric[] := '{}';
    -- Each request's zCDP cost per release, as charged and recorded.
    one_rhos numeric[] := '{}';
    one_rho_deltas numeric[] := '{}';
    cost_epsilon numeric;
    cost_delta numeric;
    cost_rho numeric;
    cost_rho_delta numeric;
    one_zcdp boolean;
    one_epsilon numeric;
    one_delta numeric;
    one_rho numeric;
    one_cap_epsilon numeric;
    one_cap_delta numeric;
    j integer;
    -- Repeated releases (src/repeat): identities[i] holds the 32-byte
    -- identities request i pays for once and for all. With repeats[i], the
    -- request is granted free if all of them were paid before.
    paid bytea[];
    mine bytea[];
    fr boolean[] := '{}';
    ids bigint[] := '{}';
    new_identities bytea[] := '{}';
    new_ledger bigint[] := '{}';
    -- Table budgets (dpnoise.table_budgets): whether any exists, the
    -- tables request i read (NULL: all of its role's), the one that
    -- refused it, its remainders.
    any_tables boolean;
    read_tables oid[];
    blocked record;
    rb text[] := '{}';
BEGIN
    LOCK TABLE dpnoise.charge_lock IN EXCLUSIVE MODE;
    any_tables := EXISTS (SELECT 1 FROM dpnoise.table_budgets);
    IF any_tables THEN
        -- A period that ended starts again, from its last window's start.
        UPDATE dpnoise.table_budgets t
        SET period_start = (SELECT max(w) FROM generate_series(t.period_start, clock_timestamp(), t.period) w),
            spent_epsilon = 0, spent_delta = 0, spent_rho = 0, spent_rho_delta = 0
        WHERE t.period IS NOT NULL AND t.role = ANY (requesters) AND clock_timestamp() >= t.period_start + t.period;
    END IF;
    -- Most requests carry no identity: then nothing is looked up (a call
    -- of dpnoise.identities is parsed again at every execution).
    IF cardinality(array_remove(identities, NULL)) > 0 THEN
        SELECT coalesce(array_agg(p.identity), '{}') INTO paid FROM dpnoise.paid_releases p
        WHERE p.identity = ANY (ARRAY(SELECT dpnoise.identities(b) FROM unnest(identities) b));
    ELSE
        paid := '{}';
    END IF;
    -- One index lookup per role: each statement here runs for every batch,
    -- so each is kept to a plan that starts cheaply.
    FOR i IN 1 .. cardinality(requesters) LOOP
        CONTINUE WHEN requesters[i] = ANY (roles);
        -- The global cap, if any, comes along (a batch without a role with
        -- a budget grants nothing, so never needs it).
        SELECT b.accountant = 'zcdp', b.epsilon - p.epsilon,
               CASE WHEN b.accountant = 'zcdp' THEN b.rho_delta - p.rho_delta ELSE b.delta - p.delta END,
               b.rho - p.rho, c.epsilon, c.delta
        INTO one_zcdp, one_epsilon, one_delta, one_rho, one_cap_epsilon, one_cap_delta
        FROM dpnoise.budget b JOIN dpnoise.spent p ON p.role = b.role
        LEFT JOIN dpnoise.global_cap c ON true WHERE b.role = requesters[i];
        IF one_cap_epsilon IS NOT NULL THEN
            capped := true;
            cap_epsilon := one_cap_epsilon;
            cap_delta := one_cap_delta;
        END IF;
        roles := roles || requesters[i];
        zcdp := zcdp || coalesce(one_zcdp, false);
        left_epsilon := left_epsilon || one_epsilon;
        left_delta := left_delta || one_delta;
        left_rho := left_rho || one_rho;
        charged_epsilon := charged_epsilon || 0::numeric;
        charged_delta := charged_delta || 0::numeric;
        charged_rho := charged_rho || 0::numeric;
        charged_rho_delta := charged_rho_delta || 0::numeric;
    END LOOP;
    IF capped THEN
        SELECT cap_epsilon - coalesce(sum(s.epsilon), 0), cap_delta - coalesce(sum(s.delta), 0)
        INTO cap_epsilon, cap_delta FROM dpnoise.spent s;
    END IF;
    FOR i IN 1 .. cardinality(requesters) LOOP
        j := array_position(roles, requesters[i]);
        -- A request without a zCDP cost (a direct call; never from the
        -- library) costs its epsilon squared over two and its delta.
        one_rhos[i] := coalesce(rhos[i], epsilons[i] * epsilons[i] / 2);
        one_rho_deltas[i] := coalesce(rho_deltas[i], deltas[i]);
        IF identities[i] IS NULL THEN
            mine := '{}';
        ELSE
            mine := ARRAY(SELECT dpnoise.identities(identities[i]));
        END IF;
        fr[i] := coalesce(repeats[i], false) AND cardinality(mine) > 0 AND mine <@ paid;
        ids[i] := NULL;
        rb[i] := NULL;
        rr[i] := CASE WHEN zcdp[j] THEN left_rho[j] END;
        IF fr[i] THEN
            -- Asked again: answered as before, by any role, and free.
            g[i] := true;
            re[i] := coalesce(CASE WHEN capped THEN least(left_epsilon[j], cap_epsilon) ELSE left_epsilon[j] END, 0);
            rd[i] := coalesce(CASE WHEN capped AND NOT zcdp[j] THEN least(left_delta[j], cap_delta) ELSE left_delta[j] END, 0);
            CONTINUE;
        END IF;
        IF left_epsilon[j] IS NULL THEN
            -- No budget (never granted, or revoked).
            g[i] := false; re[i] := 0; rd[i] := 0; rr[i] := NULL;
            CONTINUE;
        END IF;
        cost_epsilon := epsilons[i] * releases[i];
        cost_delta := deltas[i] * releases[i];
        cost_rho := one_rhos[i] * releases[i];
        cost_rho_delta := one_rho_deltas[i] * releases[i];
        IF zcdp[j] THEN
            g[i] := cost_rho <= left_rho[j] AND cost_rho_delta <= left_delta[j];
        ELSE
            g[i] := cost_epsilon <= left_epsilon[j] AND cost_delta <= left_delta[j];
        END IF;
        g[i] := g[i] AND (NOT capped OR (cost_epsilon <= cap_epsilon AND cost_delta <= cap_delta));
        IF g[i] AND any_tables THEN
            -- Every table budget of the role over a table it read (all of
            -- them where the tables are not known) must cover it too.
            read_tables := CASE WHEN tables[i] IS NULL THEN NULL ELSE tables[i]::oid[] END;
            SELECT t.id, t.tables, t.period, t.accountant,
                   CASE WHEN t.accountant = 'zcdp' THEN NULL ELSE t.epsilon - t.spent_epsilon END AS e,
                   CASE WHEN t.accountant = 'zcdp' THEN t.rho_delta - t.spent_rho_delta ELSE t.delta - t.spent_delta END AS d,
                   CASE WHEN t.accountant = 'zcdp' THEN t.rho - t.spent_rho END AS r
            INTO blocked FROM dpnoise.table_budgets t
            WHERE t.role = requesters[i] AND (read_tables IS NULL OR t.tables && read_tables)
              AND NOT CASE WHEN t.accountant = 'zcdp'
                           THEN t.spent_rho + cost_rho <= t.rho AND t.spent_rho_delta + cost_rho_delta <= t.rho_delta
                           ELSE t.spent_epsilon + cost_epsilon <= t.epsilon AND t.spent_delta + cost_delta <= t.delta END
            ORDER BY t.id LIMIT 1;
            IF FOUND THEN
                g[i] := false;
                rb[i] := format('the budget on %s%s', array_to_string(blocked.tables::regclass[], ', '),
                                CASE WHEN blocked.period IS NULL THEN '' ELSE format(' (per %s)', blocked.period) END);
                re[i] := blocked.e; rd[i] := blocked.d; rr[i] := blocked.r;
                CONTINUE;
            END IF;
            -- Given back (a negative cost) never below nothing: a period
            -- that started again keeps no credit from the last.
            UPDATE dpnoise.table_budgets t
            SET spent_epsilon = greatest(t.spent_epsilon + cost_epsilon, 0),
                spent_delta = greatest(t.spent_delta + cost_delta, 0),
                spent_rho = greatest(t.spent_rho + cost_rho, 0),
                spent_rho_delta = greatest(t.spent_rho_delta + cost_rho_delta, 0)
            WHERE t.role = requesters[i] AND (read_tables IS NULL OR t.tables && read_tables);
        END IF;
        IF g[i] THEN
            left_epsilon[j] := left_epsilon[j] - cost_epsilon;
            left_rho[j] := left_rho[j] - cost_rho;
            left_delta[j] := left_delta[j] - CASE WHEN zcdp[j] THEN cost_rho_delta ELSE cost_delta END;
            charged_epsilon[j] := charged_epsilon[j] + cost_epsilon;
            charged_delta[j] := charged_delta[j] + cost_delta;
            charged_rho[j] := charged_rho[j] + cost_rho;
            charged_rho_delta[j] := charged_rho_delta[j] + cost_rho_delta;
            cap_epsilon := cap_epsilon - cost_epsilon;
            cap_delta := cap_delta - cost_delta;
            ids[i] := nextval('dpnoise.ledger_id_seq');
            FOR k IN 1 .. cardinality(mine) LOOP
                CONTINUE WHEN mine[k] = ANY (paid);
                paid := paid || mine[k];
                new_identities := new_identities || mine[k];
                new_ledger := new_ledger || ids[i];
            END LOOP;
        END IF;
        re[i] := CASE WHEN capped THEN least(left_epsilon[j], cap_epsilon) ELSE left_epsilon[j] END;
        rd[i] := CASE WHEN capped AND NOT zcdp[j] THEN least(left_delta[j], cap_delta) ELSE left_delta[j] END;
        rr[i] := CASE WHEN zcdp[j] THEN left_rho[j] END;
    END LOOP;
    -- One statement writes what was spent and the ledger rows (in request
    -- order: unnest's ordinality) and answers.
    RETURN QUERY
    WITH spend AS (
        UPDATE dpnoise.spent p SET epsilon = p.epsilon + c.e, delta = p.delta + c.d,
                                   rho = p.rho + c.r, rho_delta = p.rho_delta + c.rd
        FROM unnest(roles, charged_epsilon, charged_delta, charged_rho, charged_rho_delta) AS c(r0, e, d, r, rd)
        WHERE p.role = c.r0 AND (c.e <> 0 OR c.d <> 0 OR c.r <> 0 OR c.rd <> 0)
    ), charges AS (
        INSERT INTO dpnoise.ledger (id, role, charged_at, statement, mechanism, epsilon, delta, releases, pid, session_start,
                                    rho, rho_delta, tables)
        SELECT u.id, u.r, clock_timestamp(), u.s, u.m, u.e, u.d, u.n, u.p, u.t, u.rho, u.rd, u.tb::oid[]
        FROM unnest(ids, requesters, statements, mechanisms, epsilons, deltas, releases, pids, starts, one_rhos, one_rho_deltas,
                    tables)
             WITH ORDINALITY AS u(id, r, s, m, e, d, n, p, t, rho, rd, tb, k)
        WHERE u.id IS NOT NULL ORDER BY u.k
    ), recorded AS (
        INSERT INTO dpnoise.paid_releases (identity, ledger_id)
        SELECT * FROM unnest(new_identities, new_ledger)
    )
    SELECT u.ok, u.e, u.d, u.free, u.r, u.b FROM unnest(g, re, rd, fr, rr, rb) WITH ORDINALITY AS u(ok, e, d, free, r, b, k)
    ORDER BY u.k;
END $$;

-- Checks a granted amount: finite, not negative, not NULL (SQLSTATE 22023).
CREATE FUNCTION dpnoise.amount(name text, value double precision, upper double precision) RETURNS numeric
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp SET extra_float_digits = 1 AS $$
BEGIN
    IF value IS NULL OR value = 'NaN'::float8 OR value = 'Infinity'::float8 OR value < 0 OR value > upper THEN
        RAISE EXCEPTION '% must be %, got %', name,
            CASE WHEN upper IS NULL THEN 'a finite number >= 0' ELSE format('a number in [0, %s]', upper) END,
            coalesce(value::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- float8 text is the shortest decimal that reads back: 0.1, not 0.1000000000000000055.
    RETURN value::text::numeric;
END $$;

CREATE FUNCTION dpnoise.existing_role(role regrole) RETURNS regrole
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF role IS NULL THEN
        RAISE EXCEPTION 'role must not be NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.oid = role) THEN
        RAISE EXCEPTION 'role with OID % does not exist', role::oid USING ERRCODE = 'undefined_object';
    END IF;
    RETURN role;
END $$;

CREATE FUNCTION dp_budget_grant(role regrole, epsilon double precision, delta double precision DEFAULT 0)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r regrole := dpnoise.existing_role($1);
    e numeric := dpnoise.amount('epsilon', $2, NULL);
    d numeric := dpnoise.amount('delta', $3, 1);
BEGIN
    IF EXISTS (SELECT 1 FROM dpnoise.budget b WHERE b.role = r AND b.accountant <> 'additive') THEN
        RAISE EXCEPTION 'role % has a zCDP budget: grant it more with dp_budget_grant_zcdp', r
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'To change its accountant, dp_budget_revoke(role) first: what it spent stays in the ledger.';
    END IF;
    INSERT INTO dpnoise.spent AS p (role) VALUES (r) ON CONFLICT DO NOTHING;
    -- A new budget starts at what was already spent: it adds e to what remains.
    INSERT INTO dpnoise.budget AS b (role, epsilon, delta)
    SELECT r, p.epsilon + e, p.delta + d FROM dpnoise.spent p WHERE p.role = r
    ON CONFLICT ON CONSTRAINT budget_pkey DO UPDATE SET epsilon = b.epsilon + e, delta = b.delta + d;
    PERFORM @extschema@.dp_budget_changed();
END $$;
COMMENT ON FUNCTION dp_budget_grant(regrole, double precision, double precision) IS
    'Adds epsilon and delta to what a role may still spend. Superusers, and roles granted EXECUTE on it.';

-- A zCDP budget (src/budget/accountant.rs): releases add up their rho,
-- and the delta of releases with no finite rho. Granted as the (epsilon,
-- delta) guarantee it must keep: release_delta (half of delta unless
-- given) pays the releases' delta, the rest the conversion from rho to
-- (epsilon, delta); rho is the largest whose conversion is within epsilon.
CREATE FUNCTION dp_budget_grant_zcdp(role regrole, epsilon double precision, delta double precision,
                                     release_delta double precision DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r regrole := dpnoise.existing_role($1);
    e numeric := dpnoise.amount('epsilon', $2, NULL);
    d numeric := dpnoise.amount('delta', $3, 1);
    rd numeric := dpnoise.amount('release_delta', coalesce($4, $3 / 2), $3);
    conversion numeric := d - rd;
    granted numeric;
BEGIN
    IF e > 0 AND (conversion <= 0 OR conversion >= 1) THEN
        RAISE EXCEPTION 'a zCDP budget of epsilon > 0 needs delta above release_delta (got delta %, release_delta %)', d, rd
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'The conversion from rho to (epsilon, delta) takes delta - release_delta: give a larger delta, or a smaller release_delta.';
    END IF;
    IF EXISTS (SELECT 1 FROM dpnoise.budget b WHERE b.role = r AND b.accountant <> 'zcdp') THEN
        RAISE EXCEPTION 'role % has an additive budget: grant it more with dp_budget_grant', r
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'To change its accountant, dp_budget_revoke(role) first: what it spent stays in the ledger.';
    END IF;
    granted := CASE WHEN e = 0 THEN 0 ELSE @extschema@.dp_zcdp_rho(e::float8, conversion::float8)::text::numeric END;
    INSERT INTO dpnoise.spent AS p (role) VALUES (r) ON CONFLICT DO NOTHING;
    -- Like an additive one, a new budget starts at what was already spent.
    INSERT INTO dpnoise.budget AS b (role, epsilon, delta, accountant, rho, rho_delta, conversion_delta)
    SELECT r, e, d, 'zcdp', p.rho + granted, p.rho_delta + rd, conversion FROM dpnoise.spent p WHERE p.role = r
    ON CONFLICT ON CONSTRAINT budget_pkey DO UPDATE SET epsilon = b.epsilon + e, delta = b.delta + d,
        rho = b.rho + granted, rho_delta = b.rho_delta + rd, conversion_delta = b.conversion_delta + conversion;
    PERFORM @extschema@.dp_budget_changed();
END $$;
COMMENT ON FUNCTION dp_budget_grant_zcdp(regrole, double precision, double precision, double precision) IS
    'Adds to a role''s zCDP budget: the rho whose conversion gives (epsilon, delta - release_delta), and release_delta (half of delta unless given) for releases with no finite rho. Superusers, and roles granted EXECUTE on it.';

-- A zCDP budget given as rho directly (exact: numeric), and delta for
-- releases with no finite rho; its (epsilon, delta) guarantee is the
-- conversion the DBA chooses (dp_zcdp_epsilon).
CREATE FUNCTION dp_budget_grant_rho(role regrole, rho numeric, delta double precision DEFAULT 0)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r regrole := dpnoise.existing_role($1);
    d numeric := dpnoise.amount('delta', $3, 1);
BEGIN
    IF $2 IS NULL OR $2 < 0 OR $2 = 'NaN'::numeric OR $2 = 'Infinity'::numeric THEN
        RAISE EXCEPTION 'rho must be a finite number >= 0, got %', coalesce($2::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT 1 FROM dpnoise.budget b WHERE b.role = r AND b.accountant <> 'zcdp') THEN
        RAISE EXCEPTION 'role % has an additive budget: grant it more with dp_budget_grant', r
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'To change its accountant, dp_budget_revoke(role) first: what it spent stays in the ledger.';
    END IF;
    INSERT INTO dpnoise.spent AS p (role) VALUES (r) ON CONFLICT DO NOTHING;
    INSERT INTO dpnoise.budget AS b (role, epsilon, delta, accountant, rho, rho_delta, conversion_delta)
    SELECT r, 0, d, 'zcdp', p.rho + $2, p.rho_delta + d, 0 FROM dpnoise.spent p WHERE p.role = r
    ON CONFLICT ON CONSTRAINT budget_pkey DO UPDATE SET delta = b.delta + d,
        rho = b.rho + $2, rho_delta = b.rho_delta + d;
    PERFORM @extschema@.dp_budget_changed();
END $$;
COMMENT ON FUNCTION dp_budget_grant_rho(regrole, numeric, double precision) IS
    'Adds rho (exactly, as numeric) and delta for releases with no finite rho to a role''s zCDP budget. Superusers, and roles granted EXECUTE on it.';

-- A budget on tables, beside the role's: every statement of the role that
-- reads any of them is charged to it too. Granting again for the same
-- role, set of tables and period adds to it; a period refreshes it.
CREATE FUNCTION dp_budget_grant_tables(role regrole, tables regclass[], epsilon double precision,
                                       delta double precision DEFAULT 0, period interval DEFAULT NULL,
                                       accountant text DEFAULT 'additive')
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r regrole := dpnoise.existing_role($1);
    e numeric := dpnoise.amount('epsilon', $3, NULL);
    d numeric := dpnoise.amount('delta', $4, 1);
    sorted oid[];
    granted_rho numeric;
    granted_rho_delta numeric;
BEGIN
    IF $2 IS NULL OR cardinality($2) = 0 OR array_position($2, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'tables must name at least one table, and no NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF $5 IS NOT NULL AND $5 <= interval '0' THEN
        RAISE EXCEPTION 'period must be positive, got %', $5 USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF $6 IS NULL OR $6 NOT IN ('additive', 'zcdp') THEN
        RAISE EXCEPTION 'accountant must be ''additive'' or ''zcdp'', got %', coalesce($6, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF $6 = 'zcdp' AND e > 0 AND d <= 0 THEN
        RAISE EXCEPTION 'a zCDP budget of epsilon > 0 needs delta > 0 (half of it converts rho)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    sorted := ARRAY(SELECT DISTINCT x::oid FROM unnest($2) x ORDER BY 1);
    granted_rho := CASE WHEN $6 = 'zcdp' THEN
        CASE WHEN e = 0 THEN 0 ELSE @extschema@.dp_zcdp_rho(e::float8, (d / 2)::float8)::text::numeric END END;
    granted_rho_delta := CASE WHEN $6 = 'zcdp' THEN d / 2 END;
    UPDATE dpnoise.table_budgets t SET epsilon = t.epsilon + e, delta = t.delta + d,
        rho = t.rho + granted_rho, rho_delta = t.rho_delta + granted_rho_delta
    WHERE t.role = r AND t.tables = sorted AND t.period IS NOT DISTINCT FROM $5 AND t.accountant = $6;
    IF NOT FOUND THEN
        INSERT INTO dpnoise.table_budgets (role, tables, accountant, epsilon, delta, rho, rho_delta, period, period_start)
        VALUES (r, sorted, $6, e, d, granted_rho, granted_rho_delta, $5, clock_timestamp());
    END IF;
    PERFORM @extschema@.dp_budget_changed();
END $$;
COMMENT ON FUNCTION dp_budget_grant_tables(regrole, regclass[], double precision, double precision, interval, text) IS
    'Adds a budget on these tables beside the role''s: every statement of the role that reads any of them is charged to it too, and refused if it would pass it; with a period, what was spent is forgotten when each period ends. Superusers, and roles granted EXECUTE on it.';

CREATE FUNCTION dp_budget_revoke_tables(role regrole, tables regclass[] DEFAULT NULL) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM dpnoise.table_budgets t WHERE t.role = dpnoise.existing_role($1)
        AND ($2 IS NULL OR t.tables = ARRAY(SELECT DISTINCT x::oid FROM unnest($2) x ORDER BY 1));
    PERFORM @extschema@.dp_budget_changed();
END $$;
COMMENT ON FUNCTION dp_budget_revoke_tables(regrole, regclass[]) IS
    'Removes a role''s budgets on these tables (NULL: all of its table budgets); what was spent stays in the ledger.';

CREATE FUNCTION dp_budget_revoke(role regrole) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM dpnoise.budget b WHERE b.role = dpnoise.existing_role($1);
    PERFORM @extschema@.dp_budget_changed();
END $$;
COMMENT ON FUNCTION dp_budget_revoke(regrole) IS
    'Removes a role''s budget: every later release by it is refused. What it spent stays in the ledger.';

CREATE FUNCTION dp_budget_set_global(epsilon double precision, delta double precision DEFAULT 0) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF $1 IS NULL THEN
        DELETE FROM dpnoise.global_cap;
    ELSE
        INSERT INTO dpnoise.global_cap AS g (epsilon, delta)
        VALUES (dpnoise.amount('epsilon', $1, NULL), dpnoise.amount('delta', $2, 1))
        ON CONFLICT (singleton) DO UPDATE SET epsilon = excluded.epsilon, delta = excluded.delta;
    END IF;
    PERFORM @extschema@.dp_budget_changed();
END $$;
COMMENT ON FUNCTION dp_budget_set_global(double precision, double precision) IS
    'Caps what all roles together may spend in this database (NULL removes the cap).';

REVOKE EXECUTE ON FUNCTION dp_budget_changed() FROM PUBLIC;
COMMENT ON FUNCTION dp_budget_changed() IS 'Tells every session that a budget changed (at commit): sessions paying ahead give back what they hold and ask again; called by dp_budget_grant and friends.';
REVOKE EXECUTE ON FUNCTION dpnoise.charge_batch(oid[], numeric[], numeric[], bigint[], text[], text[], integer[], timestamptz[], bytea[], boolean[], numeric[], numeric[], text[]),
    dpnoise.amount(text, double precision, double precision),
    dpnoise.identities(bytea),
    dpnoise.existing_role(regrole),
    dp_budget_grant(regrole, double precision, double precision),
    dp_budget_grant_zcdp(regrole, double precision, double precision, double precision),
    dp_budget_grant_rho(regrole, numeric, double precision),
    dp_budget_grant_tables(regrole, regclass[], double precision, double precision, interval, text),
    dp_budget_revoke_tables(regrole, regclass[]),
    dp_budget_revoke(regrole),
    dp_budget_set_global(double precision, double precision)
FROM PUBLIC;

-- What the DBA sees: every role's budget.
CREATE VIEW dp_budgets AS
SELECT b.role,
       b.epsilon AS epsilon_granted, coalesce(p.epsilon, 0) AS epsilon_spent,
       b.epsilon - coalesce(p.epsilon, 0) AS epsilon_remaining,
       b.delta AS delta_granted, coalesce(p.delta, 0) AS delta_spent,
       b.delta - coalesce(p.delta, 0) AS delta_remaining,
       -- A dropped role's budget and charges stay; its name does not.
       coalesce(r.rolname::text, 'dropped role ' || b.role::oid) AS role_name,
       -- A zCDP budget's rho; the delta of its releases with no finite rho;
       -- and the (epsilon, delta) guarantee of all it was granted.
       b.accountant,
       b.rho AS rho_granted, CASE WHEN b.accountant = 'zcdp' THEN coalesce(p.rho, 0) END AS rho_spent,
       b.rho - coalesce(p.rho, 0) AS rho_remaining,
       b.rho_delta AS release_delta_granted,
       CASE WHEN b.accountant = 'zcdp' THEN coalesce(p.rho_delta, 0) END AS release_delta_spent,
       b.rho_delta - coalesce(p.rho_delta, 0) AS release_delta_remaining
FROM dpnoise.budget b LEFT JOIN dpnoise.spent p ON p.role = b.role
LEFT JOIN pg_catalog.pg_roles r ON r.oid = b.role;

-- Every budget on tables: granted, spent in the current period, remaining.
CREATE VIEW dp_table_budgets AS
SELECT t.id, t.role, coalesce(r.rolname::text, 'dropped role ' || t.role::oid) AS role_name,
       t.tables::regclass[] AS tables, t.accountant, t.period, t.period_start,
       t.period_start + t.period AS refreshes_at,
       t.epsilon AS epsilon_granted, t.spent_epsilon AS epsilon_spent,
       CASE WHEN t.accountant = 'additive' THEN t.epsilon - t.spent_epsilon END AS epsilon_remaining,
       CASE WHEN t.accountant = 'additive' THEN t.delta ELSE t.rho_delta END AS delta_granted,
       CASE WHEN t.accountant = 'additive' THEN t.spent_delta ELSE t.spent_rho_delta END AS delta_spent,
       CASE WHEN t.accountant = 'additive' THEN t.delta - t.spent_delta ELSE t.rho_delta - t.spent_rho_delta END
           AS delta_remaining,
       t.rho AS rho_granted, CASE WHEN t.accountant = 'zcdp' THEN t.spent_rho END AS rho_spent,
       t.rho - t.spent_rho AS rho_remaining
FROM dpnoise.table_budgets t LEFT JOIN pg_catalog.pg_roles r ON r.oid = t.role;

-- What an analyst sees: their own row and their own charges. Charges go to
-- current_user (the role SET ROLE chose; SECURITY DEFINER functions do not
-- change who pays). security_barrier keeps leaky functions in a caller's
-- WHERE clause from seeing other roles' rows.
CREATE VIEW dp_my_budget WITH (security_barrier) AS
SELECT * FROM dp_budgets WHERE role = (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = current_user)::regrole;
CREATE VIEW dp_my_ledger WITH (security_barrier) AS
SELECT l.id, l.charged_at, l.statement, l.mechanism, l.epsilon, l.delta, l.releases, l.pid, l.session_start,
       l.rho, l.rho_delta, l.tables::regclass[] AS tables
FROM dpnoise.ledger l
WHERE l.role = (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = current_user)::regrole;
CREATE VIEW dp_my_table_budgets WITH (security_barrier) AS
SELECT * FROM dp_table_budgets WHERE role = (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = current_user)::regrole;
GRANT SELECT ON dp_my_budget, dp_my_ledger, dp_my_table_budgets TO PUBLIC;

CREATE FUNCTION dp_budget_remaining(OUT epsilon double precision, OUT delta double precision,
                                    OUT rho double precision, OUT accountant text)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(CASE WHEN m.accountant = 'zcdp' THEN NULL ELSE m.epsilon_remaining END, 0)::float8,
           coalesce(CASE WHEN m.accountant = 'zcdp' THEN m.release_delta_remaining ELSE m.delta_remaining END, 0)::float8,
           m.rho_remaining::float8, coalesce(m.accountant, 'additive')
    FROM (SELECT 1) one LEFT JOIN @extschema@.dp_my_budget m ON true
$$;
COMMENT ON FUNCTION dp_budget_remaining() IS 'What the calling role may still spend: epsilon and delta under the additive accountant; rho and the delta of releases with no finite rho under zCDP (epsilon 0). Zeros without a budget.';


COMMENT ON SCHEMA dpnoise IS 'dpnoise''s budget and ledger: superusers only.';
COMMENT ON TABLE dpnoise.budget IS 'What each role was granted (epsilon, delta); written by the dp_budget_* functions.';
COMMENT ON TABLE dpnoise.spent IS 'What each role has spent; written by the ledger worker only.';
COMMENT ON TABLE dpnoise.global_cap IS 'An optional cap on what all roles together may spend in this database.';
COMMENT ON TABLE dpnoise.ledger IS 'One row per charge, committed before the release it pays for.';
COMMENT ON SEQUENCE dpnoise.ledger_id_seq IS 'Numbers the ledger''s charges.';
COMMENT ON TABLE dpnoise.charge_lock IS 'Never holds a row: the ledger workers lock it to charge one batch at a time.';
COMMENT ON FUNCTION dpnoise.charge_batch(oid[], numeric[], numeric[], bigint[], text[], text[], integer[], timestamptz[], bytea[], boolean[], numeric[], numeric[], text[]) IS
    'Charges a batch of releases; called by the ledger worker only.';
COMMENT ON FUNCTION dp_zcdp_rho(double precision, double precision) IS
    'The largest rho whose zCDP guarantee converts to (epsilon, delta)-DP (Canonne, Kamath & Steinke 2020, Corollary 13): what a zCDP budget granted as (epsilon, delta) may spend.';
COMMENT ON FUNCTION dp_zcdp_epsilon(double precision, double precision) IS
    'The epsilon of the (epsilon, delta)-DP guarantee that rho-zCDP gives at this delta (Canonne, Kamath & Steinke 2020, Corollary 13).';
COMMENT ON FUNCTION dp_zcdp_gaussian_epsilon(double precision, double precision, double precision, double precision) IS
    'The epsilon at which dp_sum(value, epsilon, lower, upper, delta, ''gaussian'') costs at most rho under zCDP: how to ask a Gaussian release for a share of a zCDP budget.';
COMMENT ON FUNCTION dpnoise.amount(text, double precision, double precision) IS 'Checks a granted amount and returns it as the exact decimal written.';
COMMENT ON FUNCTION dpnoise.identities(bytea) IS 'The 32-byte release identities concatenated in a charge request.';
COMMENT ON TABLE dpnoise.paid_releases IS 'The releases paid for once and for all, by the ledger row that paid them: asked again, they are free.';
COMMENT ON FUNCTION dpnoise.existing_role(regrole) IS 'Checks that a role exists (42704 otherwise).';
COMMENT ON VIEW dp_budgets IS 'Every role''s budget: granted, spent and remaining epsilon and delta (additive), or rho and the releases'' delta (zCDP). Superusers only.';
COMMENT ON VIEW dp_my_budget IS 'The calling role''s own budget row.';
COMMENT ON VIEW dp_my_ledger IS 'The calling role''s own charges.';
COMMENT ON TABLE dpnoise.table_budgets IS 'Budgets on tables (and per period) beside each role''s budget, written by dp_budget_grant_tables and the ledger worker.';
COMMENT ON SEQUENCE dpnoise.table_budgets_id_seq IS 'Numbers the budgets on tables.';
COMMENT ON VIEW dp_table_budgets IS 'Every budget on tables: its role, tables, accountant, period, and what was granted, spent in the current period and remains. Superusers only.';
COMMENT ON VIEW dp_my_table_budgets IS 'The calling role''s own budgets on tables.';
