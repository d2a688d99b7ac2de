#!/usr/bin/env bash
# ALTER EXTENSION dpnoise UPDATE from every earlier version must give the
# catalog a fresh install of the current version gives: the same objects,
# definitions, volatility, privileges and comments. Needs a running server
# with dpnoise installed (lib.sh's start_server). Usage: upgrade_test.sh PORT
set -euo pipefail
PORT=$1
PSQL=(psql -X -q -h 127.0.0.1 -p "$PORT" -U postgres -v ON_ERROR_STOP=1)
current=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$(/usr/lib/postgresql/15/bin/pg_config --sharedir)/extension/dpnoise.control")
# Every member of the extension, described by what a user or the planner sees.
FINGERPRINT=$(cat <<'SQL'
WITH members AS (
  SELECT d.classid, d.objid FROM pg_depend d JOIN pg_extension x ON x.oid = d.refobjid AND x.extname = 'dpnoise'
  WHERE d.deptype = 'e')
SELECT pg_describe_object(m.classid, m.objid, 0) || ' | ' || coalesce(obj_description(m.objid, m.classid::regclass::name), '-')
       || ' | ' || coalesce((SELECT format('%s %s %s %s %s %s', p.provolatile, p.proparallel, p.proisstrict, p.prosecdef,
                                           p.proacl, md5(coalesce(p.prosrc, '') || coalesce(p.proconfig::text, '') ||
                                           pg_get_function_arguments(p.oid) || pg_get_function_result(p.oid)))
                             FROM pg_proc p WHERE m.classid = 'pg_proc'::regclass AND p.oid = m.objid), '')
       || coalesce((SELECT format('%s %s %s %s %s', a.aggtransfn, a.aggfinalfn, a.aggcombinefn, a.aggtransspace, a.agginitval)
                    FROM pg_aggregate a WHERE m.classid = 'pg_proc'::regclass AND a.aggfnoid = m.objid), '')
       || coalesce((SELECT format('%s %s %s', c.relkind, c.relacl,
                                  (SELECT string_agg(attname || ':' || format_type(atttypid, atttypmod) || ':' || attnotnull, ',' ORDER BY attnum)
                                   FROM pg_attribute WHERE attrelid = c.oid AND attnum > 0 AND NOT attisdropped))
                    || CASE WHEN c.relkind = 'v' THEN md5(pg_get_viewdef(c.oid)) ELSE '' END
                    FROM pg_class c WHERE m.classid = 'pg_class'::regclass AND c.oid = m.objid), '')
FROM members m ORDER BY 1;
SQL
)
"${PSQL[@]}" -d postgres -c "DROP DATABASE IF EXISTS dpnoise_fresh" -c "DROP DATABASE IF EXISTS dpnoise_upgraded"
"${PSQL[@]}" -d postgres -c "CREATE DATABASE dpnoise_fresh" -c "CREATE DATABASE dpnoise_upgraded"
"${PSQL[@]}" -d dpnoise_fresh -c "CREATE EXTENSION dpnoise"
fresh=$("${PSQL[@]}" -At -d dpnoise_fresh -c "$FINGERPRINT")
status=0
for script in "$(/usr/lib/postgresql/15/bin/pg_config --sharedir)"/extension/dpnoise--*.sql; do
  from=$(basename "$script" .sql | sed -n 's/^dpnoise--\([^-]*\)$/\1/p')
  [ -n "$from" ] && [ "$from" != "$current" ] || continue
  "${PSQL[@]}" -d postgres -c "DROP DATABASE IF EXISTS dpnoise_upgraded" -c "CREATE DATABASE dpnoise_upgraded"
  "${PSQL[@]}" -d dpnoise_upgraded -c "CREATE EXTENSION dpnoise VERSION '$from'" -c "ALTER EXTENSION dpnoise UPDATE"
  upgraded=$("${PSQL[@]}" -At -d dpnoise_upgraded -c "$FINGERPRINT")
  if [ "$fresh" = "$upgraded" ]; then
    echo "upgrade: $from -> $current gives the fresh catalog ($(echo "$fresh" | wc -l) objects)"
  else
    echo "upgrade: $from -> $current differs from a fresh install:"
    diff <(echo "$fresh") <(echo "$upgraded") || true
    status=1
  fi
done
"${PSQL[@]}" -d postgres -c "DROP DATABASE dpnoise_fresh" -c "DROP DATABASE IF EXISTS dpnoise_upgraded"
exit $status
