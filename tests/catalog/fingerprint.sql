-- Every member of the extension dpnoise, described by what a user or the
-- planner sees: identity, comment, volatility, parallel safety, strictness,
-- SECURITY DEFINER, privileges, a digest of body and signature, aggregate
-- support functions and state size, relation kind, privileges and columns.
WITH members AS (
  SELECT d.classid, d.objid FROM pg_depend d JOIN pg_extension x ON x.oid = d.refobjid AND x.extname = 'dpnoise'
  WHERE d.deptype = 'e'
    -- PostgreSQL 18 records the row types of the tables and views, and the
    -- array types, as members too; they are made with their table or type.
    AND NOT EXISTS (SELECT FROM pg_type t WHERE d.classid = 'pg_type'::regclass AND t.oid = d.objid
                    AND (t.typrelid <> 0 OR EXISTS (SELECT FROM pg_type e WHERE e.typarray = t.oid))))
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
