#!/usr/bin/python3
"""A seeded grammar-based fuzzer of analyst statements (issue 49, item 1).

Usage: tests/e2e/fuzz.py PORT [COUNT] [SEED]   (COUNT 10000; SEED from the clock; run as root)

Starts a throwaway server as tests/e2e/analyst.py does (its Server: $PG_BIN,
DPNOISE_E2E_LIBDIR), with a protected table of one row per person
(`people`), a protected table of several rows per person (`visits`,
max_groups_contributed 3) and two public tables (`sites`, `regions`), with
ints, int2, int8, floats, numerics, text, dates, timestamptz, booleans,
NULLs and extreme values (±Infinity, NaN, -0, huge and tiny numerics, the
ends of the date and timestamp ranges, empty, 1 KB+ and 5 000-character
texts). Then, as the analyst dp_fuzz, it sends COUNT statements drawn from
a grammar: select lists mixing dp_* aggregates (privacy parameters from
constants, query parameters, columns, NULL, negative, zero, huge, NaN;
wrong arity and types) with plain aggregates and columns; GROUP BY keys
(columns, expressions, casts, CASE, ordinals, GROUPING SETS); joins on the
privacy unit, with public tables, outer joins, listed keys, self-joins,
LATERAL, TABLESAMPLE; subqueries and CTEs; set operations; window
functions; HAVING, ORDER BY, LIMIT, DISTINCT; per-person subqueries
grouped by person_id; $n parameters through psycopg (some statements
prepared on the server, some under a forced generic plan); row reads,
DML, EXPLAIN and COPY, which must be refused; and SET statements that
steer the plan or the gate's settings (RESET ALL every 250 statements).

Half the statements are tame: only shapes, expressions and privacy
parameters the gate admits (values may still be extreme), so that they
reach the bounding rewrite, the plan check and the charge; the other half
are wild. About 37 % of all statements are answered.

Statement i is drawn from random.Random(SEED * 1000003 + i) alone; the
session's state (its SETs, its prepared statements and cursors) follows
from the statements before it, so `fuzz.py PORT i+1 SEED` replays a
failure at statement i exactly. The seed is printed at the start and with
every failure; with DPNOISE_FUZZ_LOG=FILE every statement's outcome is
written to FILE, one a line (outcome, message, SQL).

For each statement it records the outcome class (answered, or the
SQLSTATE) and checks:
(a) no statement raises an internal error: SQLSTATE class XX
    (XX000 internal_error, ...) or 58 (system errors), and no backend
    crashes (a lost connection: reconnects and counts a failure with the
    SQL; the server log is also searched for a process terminated by a
    signal);
(b) no statement refused before it ran is charged: around each failing
    statement the analyst's ledger (`max(id)` of dp_my_ledger, which
    moves with each charge as its count does, and reads the ledger's
    (role, id) index) must not move for ZB003, ZB001, 22023, 42xxx and
    0A000. Exceptions, which may come after the charge and are only
    counted: any other SQLSTATE (a division by zero or an overflow at run
    time, a statement_timeout), a 22023 or 0A000 raised by one of
    PostgreSQL's built-in functions as the statement runs (the error's
    source file is in utils/adt: extract(timezone FROM a date), say), and a
    22023 for a value read from a row that a dpnoise function refuses (a
    public column's -Infinity given to dp_laplace: its message ends "a
    value from the data (not shown)"; a constant is refused before). A
    new ledger row whose statement is an earlier one that failed after it
    may have been charged is that statement's (a statement_timeout that
    fires while the backend waits for the ledger worker ends the
    statement; the worker still records the charge): counted as late.
    Strings that run their query twice (a savepoint, a loop, EXECUTE
    twice) are not checked for charges: the first run may be charged and
    the second refused.
Prints the statements run, the count of each outcome class (with a sample
message), the share answered, and every failure with its SQL, parameters,
statement number and seed. Exits non-zero on any failure.

Speed: the analyst's fresh statements are held for a random delay that
makes their run time a DP release (dpnoise.timing_epsilon); the fuzzer
turns it off for its role (ALTER ROLE dp_fuzz SET dpnoise.timing_epsilon
= 0, as superuser) and sets a statement_timeout of 10 s. 10 000
statements take 25 to 60 s on the 2-core VM (2.5 to 6 ms each, with
other work running).
"""
import collections
import datetime
import os
import random
import re
import signal
import sys
import time
from decimal import Decimal

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from analyst import Server, psycopg  # noqa: E402

ANALYST = "dp_fuzz"
RESET_EVERY = 250  # RESET ALL before every 250th statement
BUDGET_EVERY = 200  # check the budget (and top it up) every 200 statements
MUST_NOT_CHARGE = ("ZB003", "ZB001", "22023", "0A000")  # and class 42
DATA_NOT_SHOWN = "a value from the data (not shown)"  # dpnoise-core's DATA_NOT_SHOWN
# PostgreSQL's built-in functions (src/backend/utils/adt): a 22023 or 0A000 they raise
# comes from an expression evaluated as the statement runs (extract(timezone FROM
# a date), say, not folded at plan time), after the charge, like a division by zero.
PG_RUNTIME_FILES = {
    "acl.c", "array_userfuncs.c", "arrayfuncs.c", "bool.c", "cash.c", "char.c", "date.c", "datetime.c",
    "dbsize.c", "domains.c", "encode.c", "enum.c", "float.c", "formatting.c", "genfile.c", "geo_ops.c",
    "int.c", "int8.c", "json.c", "jsonb.c", "jsonfuncs.c", "like.c", "like_match.c", "lockfuncs.c", "mac.c",
    "mac8.c", "misc.c", "name.c", "network.c", "numeric.c", "numutils.c", "oid.c", "oracle_compat.c",
    "orderedsetaggs.c", "pg_locale.c", "pgstatfuncs.c", "pseudotypes.c", "quote.c", "rangetypes.c",
    "regexp.c", "rowtypes.c", "ruleutils.c", "timestamp.c", "tsvector_op.c", "uuid.c", "varbit.c",
    "varchar.c", "varlena.c", "windowfuncs.c", "xid8funcs.c", "xml.c",
}
# A name looked up as the statement runs (text read as regclass inside a function:
# dp_query_accuracy's tables, seed 520715059) fails there, after the charge of the
# releases before it; the parser's own lookups fail in parse_*.c, before any charge.
PG_RUNTIME_LOOKUPS = {"namespace.c", "regproc.c"}

SETUP = f"""
CREATE EXTENSION dpnoise;
CREATE ROLE {ANALYST} LOGIN;
CREATE TABLE people (person_id int PRIMARY KEY, age int, income float8, score numeric, name text,
                     born date, seen timestamptz, region text, vip bool, ratio float4, tiny int2, code bigint);
INSERT INTO people
SELECT p, 18 + (p * 37) % 70, 1000.0 * ((p * 13) % 97) + 0.25, ((p * 7) % 1000) / 10.0,
       'n' || (p % 50), date '1950-01-01' + (p * 131) % 20000,
       timestamptz '2024-01-01 00:00+00' + (p * 7919 % 100000) * interval '1 minute',
       (ARRAY['north', 'south', 'east', 'west'])[1 + p % 4], p % 5 = 0, (p % 11) / 3.0, (p % 300)::int2,
       p::bigint * 1000003
FROM generate_series(1, 600) p;
INSERT INTO people VALUES
 (601, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
 (602, 2147483647, 'Infinity', 'NaN', '', 'infinity', 'infinity', '', true, 'Infinity', 32767, 9223372036854775807),
 (603, -2147483648, '-Infinity', 1e130, repeat('x', 5000), '-infinity', '-infinity', repeat('r', 2000), false,
  '-Infinity', -32768, -9223372036854775808),
 (604, 0, 'NaN', -1e130, 'é☃' || chr(128512), '4713-01-01 BC', '4713-01-01 00:00+00 BC', 'north', NULL, 'NaN', 0, 0),
 (605, -1, 1e308, 0.000000000000000000000000000001, 'N', '5874897-12-31', '294276-12-31 23:59:59+00', 'south', true,
  3.4e38, 1, 1),
 (606, 1, -1e308, 123456789012345678901234567890.123456789, 'O''Brien %_\\', '2000-02-29', '2000-02-29 12:00+00',
  'east', false, '-0', -1, -1),
 (607, 45, '-0', 9e999, 'TM', '1970-01-01', '1970-01-01 00:00+00', 'west', true, 1e-45, 2, 2),
 (608, 30, 5e-324, -9e999, ' ', '2024-12-31', '2024-12-31 23:59:59.999999+00', 'North', false, 0, 3, 3);
CREATE TABLE visits (person_id int, site text, amount float8, qty int, price numeric, day date, at timestamptz,
                     note text, big bigint);
INSERT INTO visits
SELECT p, 's' || ((p * 13 + j) % 12), 25 * ((p * 5) % 6) + ((p * 17 + j * 7) % 25), (p + j) % 9 - 2,
       ((p * 31 + j) % 1000) / 100.0, date '2024-01-01' + (p * 11) % 320 + 7 * j,
       timestamptz '2024-01-01 00:00+00' + ((p * 11) % 320 + 7 * j) * interval '1 day' + j * interval '1 hour',
       CASE WHEN j = 0 THEN NULL ELSE 'v' || (p % 7) END, p::bigint * j
FROM generate_series(1, 600) p, LATERAL generate_series(0, (p * 31) % 6) j;
INSERT INTO visits VALUES
 (601, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
 (602, 's1', 'Infinity', 2147483647, 'NaN', 'infinity', 'infinity', '', 9223372036854775807),
 (602, 's1', 'NaN', -2147483648, 1e130, '-infinity', '-infinity', repeat('y', 5000), -9223372036854775808),
 (603, 's2', '-Infinity', 0, -9e999, '4713-01-01 BC', '4713-01-01 00:00+00 BC', 'é☃', 0),
 (603, 's2', 1e308, 1, 9e999, '5874897-12-31', '294276-12-31 23:59:59+00', 'O''Brien %_\\', 1),
 (604, 's3', -1e308, -1, 0.000000000000000000000000000001, '2000-02-29', '2000-02-29 12:00+00', ' ', -1),
 (605, 's99', '-0', 5, 12345678901234567890.5, '2024-06-01', '2024-06-01 00:00+00', repeat('z', 1100), 5);
-- One person with 300 rows in every site.
INSERT INTO visits SELECT 607, 's' || (j % 12), j, j, j, date '2024-01-01' + j,
       timestamptz '2024-01-01 00:00+00' + j * interval '1 hour', 'many', j
FROM generate_series(1, 300) j;
CREATE TABLE sites (site text PRIMARY KEY, region text, capacity int, opened date, weight float8);
INSERT INTO sites SELECT 's' || i, (ARRAY['north', 'south', 'east', 'west'])[1 + i % 4], 10 * i,
       date '2020-01-01' + 30 * i, i / 4.0
FROM generate_series(0, 11) i;
INSERT INTO sites VALUES ('s_null', NULL, NULL, NULL, NULL), ('', '', 0, 'infinity', 'NaN');
CREATE TABLE regions (region text, zone text, factor numeric);
INSERT INTO regions VALUES ('north', 'z1', 1.5), ('south', 'z1', 2), ('east', 'z2', 'NaN'), ('west', 'z2', NULL),
                           ('north', 'z3', 0), (NULL, NULL, NULL);
ANALYZE;
GRANT SELECT ON sites, regions TO {ANALYST};
SELECT dp_protect('people', 'person_id'), dp_protect('visits', 'person_id', 3);
-- Domains for the plain sums and averages, a list of values for filter
-- queries (dp_policy is left at the defaults: it would track the tables).
SELECT dp_domain('people', 'income', 0, 1000), dp_domain('visits', 'amount', 0, 100),
       dp_domain('people', 'region', ARRAY['north', 'south', 'east', 'west', 'North']);
SELECT dp_analyst('{ANALYST}');
-- The statement's run time as a DP release holds each fresh statement for a
-- random delay: off for this role, to run 10 000 statements in minutes.
ALTER ROLE {ANALYST} SET dpnoise.timing_epsilon = 0;
ALTER ROLE {ANALYST} SET statement_timeout = '10s';
"""

TABLES = {
    "people": {"person_id": "int", "age": "int", "income": "float", "score": "num", "name": "text",
               "born": "date", "seen": "ts", "region": "text", "vip": "bool", "ratio": "float4",
               "tiny": "int2", "code": "int8"},
    "visits": {"person_id": "int", "site": "text", "amount": "float", "qty": "int", "price": "num",
               "day": "date", "at": "ts", "note": "text", "big": "int8"},
    "sites": {"site": "text", "region": "text", "capacity": "int", "opened": "date", "weight": "float"},
    "regions": {"region": "text", "zone": "text", "factor": "num"},
}
# The expression types the grammar asks for, and the column types each accepts.
KIND = {"int": "int", "int2": "int", "int8": "int", "float": "float", "float4": "float", "num": "num",
        "text": "text", "date": "date", "ts": "ts", "bool": "bool"}
NUMERIC = ("int", "float", "num")
TOKEN = re.compile("\x00P([0-9]+)\x00")  # a query parameter's place, until the SQL is finished
COLLATIONS = ['"C"', '"POSIX"', '"default"']
EXTRACT_UNITS = ["year", "month", "dow", "isodow", "doy", "day", "hour", "epoch", "week", "century", "timezone"]
TRUNC_UNITS = ["month", "day", "year", "week", "hour", "quarter", "millennium", "bogus", "Month", "DAYS"]
TO_CHAR_FORMATS = ["YYYY-MM", "TMMonth", "Day", "YYYY-MM-DD HH24:MI", "IYYY-IW", "tmday", "Q"]
PLAN_SWITCHES = ["enable_hashagg", "enable_sort", "enable_hashjoin", "enable_mergejoin", "enable_nestloop",
                 "enable_seqscan", "enable_indexscan", "enable_bitmapscan", "enable_material", "enable_memoize",
                 "enable_indexonlyscan"]


class Gen:
    """One statement: gen.sql, gen.params, gen.mode (execute, prepare, copy)."""

    def __init__(self, rng):
        self.r = rng
        self.params = []
        # Half the statements are tame: admitted shapes, expressions and
        # privacy parameters only (the values may still be extreme), to reach
        # the rewrite, the plan check and the charge; the others are wild.
        self.tame = rng.random() < 0.5

    # ------------------------------------------------------------ basics
    def p(self, prob):
        return self.r.random() < prob

    def pick(self, seq):
        return seq[self.r.randrange(len(seq))]

    def wpick(self, pairs):
        total = sum(w for w, _ in pairs)
        x = self.r.random() * total
        for w, v in pairs:
            x -= w
            if x < 0:
                return v
        return pairs[-1][1]

    def param(self, value):
        """A query parameter ($n) of this value (kept only if the SQL drawn keeps its place)."""
        self.params.append(value)
        return f"\x00P{len(self.params) - 1}\x00"

    # ------------------------------------------------------------ literals
    def literal(self, kind):
        r = self.r
        if self.p(0.05):
            return "NULL" if self.p(0.5) else {"int": "NULL::int", "float": "NULL::float8", "num": "NULL::numeric",
                                               "text": "NULL::text", "date": "NULL::date", "ts": "NULL::timestamptz",
                                               "bool": "NULL::boolean"}[kind]
        if kind == "int":
            return self.pick(["0", "1", "-1", "2", "3", "7", "10", "25", "100", str(r.randint(-50, 200)),
                              "2147483647", "-2147483648", "9223372036854775807", "32767::int2", "1000000"])
        if kind == "float":
            return self.pick(["0.5", "1.5", "25.0", "100.0", "-2.5", "1e308", "-1e308", "5e-324", "'-0'::float8",
                              "'Infinity'::float8", "'-Infinity'::float8", "'NaN'::float8", "1e-300::float8",
                              "2.0::float8", f"{r.uniform(-100, 1000):.3f}::float8", "3.4e38::float4"])
        if kind == "num":
            return self.pick(["1.5", "0.1", "10", "1e100", "'NaN'::numeric", "9e999", "-9e999", "0.000001",
                              "1e-100", "123456789012345678901234567890.5", "'Infinity'::numeric", "2.50",
                              f"{r.randint(-100, 1000)}.{r.randint(0, 99)}"])
        if kind == "text":
            return self.pick(["''", "'north'", "'south'", "'s1'", "'s10'", "'n1'", "'v3'", "'x'", "' '",
                              "'é☃'", "'O''Brien %_\\'", "repeat('a', 2000)", "'TM'", "'North'", "'NaN'", "'1'",
                              "'2024-01-01'", "'z'"])
        if kind == "date":
            return self.pick(["date '2024-03-01'", "date '2000-02-29'", "'infinity'::date", "'-infinity'::date",
                              "date '4713-01-01 BC'", "date '5874897-12-31'", "current_date", "date '1970-01-01'",
                              "'2024-06-15'::date"])
        if kind == "ts":
            return self.pick(["timestamptz '2024-01-01 00:00+00'", "'infinity'::timestamptz",
                              "'-infinity'::timestamptz", "timestamptz '294276-12-31 23:59:59+00'",
                              "now()", "timestamptz '2024-06-30 12:34:56.789+02'", "timestamp '2024-02-01'"])
        return self.pick(["true", "false", "NULL::boolean"])

    def param_value(self, kind):
        r = self.r
        if self.p(0.05):
            return None
        if kind == "int":
            return self.pick([0, 1, -1, 5, 40, 100, 2147483647, -2147483648, 9223372036854775807, 10 ** 30,
                              r.randint(-10, 100)])
        if kind == "float":
            return self.pick([0.5, 1.0, 25.0, -3.5, 1e308, float("inf"), float("-inf"), float("nan"), -0.0,
                              5e-324, r.uniform(0, 100)])
        if kind == "num":
            return self.pick([Decimal("1.5"), Decimal("1e100"), Decimal("NaN"), Decimal("0.000001"),
                              Decimal("123456789012345678901234567890.5"), Decimal(r.randint(0, 100))])
        if kind == "text":
            return self.pick(["", "north", "s1", "n1", "x" * 3000, "é☃", "%", "s%", "\\", "v3"])
        if kind == "date":
            return self.pick([datetime.date(2024, 3, 1), datetime.date(1, 1, 1), datetime.date(9999, 12, 31),
                              datetime.date(2000, 2, 29)])
        if kind == "ts":
            return self.pick([datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc),
                              datetime.datetime(9999, 12, 31, 23, 59, tzinfo=datetime.timezone.utc),
                              datetime.datetime(1, 1, 1, tzinfo=datetime.timezone.utc)])
        return self.pick([True, False])

    # ------------------------------------------------------------ expressions
    def column(self, cols, kind):
        fit = [c for c, t in cols if KIND[t] == kind]
        return self.pick(fit) if fit else None

    def expr(self, kind, cols, depth=2):
        """An expression of kind (int, float, num, text, date, ts, bool) over cols [(sql, type)].

        Each form is marked T when the gate admits it over protected columns
        (a tame statement draws only those) or W (wild: refused, or an error)."""
        roll = self.r.random()
        if kind == "bool":
            return self.cond(cols, depth)
        col = self.column(cols, kind)
        if col and (roll < 0.45 or depth <= 0):
            return col
        if depth <= 0 or roll < 0.55:
            if self.p(0.2):
                return self.param(self.param_value(kind)) + self.pick(["", "", f"::{self.sqltype(kind)}"])
            return self.literal(kind)
        d = depth - 1
        e = lambda k=kind: self.expr(k, cols, d)  # noqa: E731
        num = lambda: self.expr(self.pick(NUMERIC), cols, d)  # noqa: E731
        case = ("T", lambda: f"CASE WHEN {self.cond(cols, d)} THEN {e()} ELSE {e()} END")
        coalesce = ("T", lambda: f"coalesce({e()}, {e()})")
        extreme = ("T", lambda: f"{self.pick(['greatest', 'least'])}({e()}, {e()})")
        if kind == "int":
            forms = [
                ("T", lambda: f"({e()} {self.pick(['+', '-', '*', '/', '%'])} {e()})"),
                ("T", lambda: f"abs({e()})"), ("T", lambda: f"(-{e()})"), ("T", lambda: f"length({e('text')})"),
                ("T", lambda: f"extract({self.pick(EXTRACT_UNITS)} FROM "
                              f"{self.expr(self.pick(['date', 'ts']), cols, d)})::int"),
                ("T", lambda: f"width_bucket({e('float')}, {self.literal('float')}, {self.literal('float')}, "
                              f"{self.pick(['1', '10', '0', '-1', '2147483647'])})"),
                ("T", lambda: f"({num()})::{self.pick(['int', 'int4', 'bigint', 'int2', 'smallint'])}"),
                case, coalesce, extreme, ("T", lambda: f"mod({e()}, {e()})"),
                ("W", lambda: f"({e('date')} - {e('date')})"), ("W", lambda: f"(({e('text')})::int)"),
                ("W", lambda: f"ascii({e('text')})"), ("W", lambda: f"strpos({e('text')}, {self.literal('text')})"),
                ("W", lambda: f"({self.pick([c for c, t in cols if t == 'int2'] or ['1::int2'])} "
                              f"{self.pick(['+', '*', '-'])} {e()})"),
                ("T", lambda: f"(date_part('{self.pick(['year', 'month', 'bogus'])}', {e('ts')}))::int"),
                ("W", lambda: f"array_length(ARRAY[{e()}, {e()}], 1)"),
            ]
        elif kind == "float":
            forms = [
                ("T", lambda: f"({e()} {self.pick(['+', '-', '*', '/'])} {e()})"),
                ("T", lambda: f"{self.pick(['floor', 'round', 'ceil', 'trunc', 'abs'])}({e()})"),
                ("W", lambda: f"{self.pick(['sqrt', 'ln', 'exp', 'sin', 'cbrt'])}({e()})"),
                ("T", lambda: f"({num()})::{self.pick(['float8', 'float4', 'double precision', 'real'])}"),
                ("W", lambda: f"power({e()}, {self.pick(['2', '0.5', '-1', '1000'])})"),
                ("T", lambda: f"extract(epoch FROM {e('ts')})::float8"),
                case, coalesce, extreme,
                ("W", lambda: "random()"), ("W", lambda: f"dp_laplace({e()}, 1.0, 1.0)"),
                ("W", lambda: f"(({e('text')})::float8)"), ("T", lambda: f"round({e()}::numeric, 2)::float8"),
            ]
        elif kind == "num":
            forms = [
                ("T", lambda: f"({e()} {self.pick(['+', '-', '*', '/', '%'])} {e()})"),
                ("T", lambda: f"{self.pick(['round', 'trunc', 'floor', 'ceil', 'abs'])}({e()})"),
                ("W", lambda: f"{self.pick(['sqrt', 'exp', 'ln', 'scale'])}({e()})"),
                ("T", lambda: f"round({e()}, {self.pick(['0', '2', '-1', '1000', '-2147483648'])})"),
                ("T", lambda: f"({num()})::{self.pick(['numeric', 'decimal'])}"),
                ("W", lambda: f"({num()})::numeric(10, 2)"),
                case, coalesce, ("T", lambda: f"mod({e()}, {e()})"),
                ("W", lambda: f"(({e('text')})::numeric)"),
                ("W", lambda: f"power({e()}, {self.pick(['2', '0.5', '100'])})"),
            ]
        elif kind == "text":
            forms = [
                ("T", lambda: f"{self.pick(['lower', 'upper'])}({e()})"),
                ("W", lambda: f"{self.pick(['btrim', 'md5', 'initcap', 'reverse'])}({e()})"),
                ("T", lambda: f"substr({e()}, {self.pick(['1', '2', '0', '-5'])}, {self.pick(['1', '3', '-1', '0'])})"),
                ("T", lambda: f"substr({e()}, {self.pick(['1', '2', '10000'])})"),
                ("W", lambda: f"({e()} || {e()})"), ("W", lambda: f"left({e()}, {self.pick(['1', '2', '-1'])})"),
                ("T", lambda: f"to_char({self.expr(self.pick(['ts', 'date']), cols, d)}, "
                              f"{self.pick(TO_CHAR_FORMATS)!r})"),
                ("W", lambda: f"to_char({num()}, '999D99')"),
                ("W", lambda: f"({self.expr(self.pick(['int', 'date', 'num', 'float', 'bool']), cols, d)})::text"),
                case, coalesce, ("W", lambda: f"({e()} COLLATE {self.pick(COLLATIONS)})"),
                ("W", lambda: f"replace({e()}, 'n', 'm')"), ("W", lambda: f"concat({e()}, {num()})"),
                ("W", lambda: f"repeat({e()}, {self.pick(['2', '1000', '-1'])})"),
            ]
        elif kind == "date":
            forms = [
                ("W", lambda: f"({e('ts')})::date"),
                ("T", lambda: f"make_date({self.pick(['2024', '0', '-44', '10000000'])}, {e('int')}, "
                              f"{self.pick(['1', '29', '31'])})"),
                ("W", lambda: f"date_trunc('month', {e()})::date"), ("W", lambda: f"({e()} + {e('int')})"),
                ("W", lambda: f"({e()} - {self.pick(['1', '7', '2147483647'])})"),
                case, coalesce, extreme, ("W", lambda: f"(({e('text')})::date)"),
            ]
        else:  # ts
            forms = [
                ("T", lambda: f"date_trunc({self.pick(TRUNC_UNITS)!r}, {e()})"),
                ("T", lambda: f"({e('date')})::{self.pick(['timestamptz', 'timestamp'])}"),
                ("W", lambda: f"({e()} + interval '{self.pick(['1 hour', '1 day', '-1 month', '1000000 years'])}')"),
                ("W", lambda: f"({e()} AT TIME ZONE 'UTC')::timestamptz"),
                ("W", lambda: f"date_trunc('month', {e()} AT TIME ZONE "
                              f"{self.pick([repr('America/New_York'), repr('EST'), repr('no such zone'), e('text')])})"
                              f"::timestamptz"),
                case, coalesce, ("W", lambda: f"(({e('text')})::timestamptz)"),
                ("W", lambda: f"to_timestamp({e('float')})"),
            ]
        if self.tame:
            forms = [f for f in forms if f[0] == "T"]
        return self.pick(forms)[1]()

    def sqltype(self, kind):
        return {"int": "int", "float": "float8", "num": "numeric", "text": "text", "date": "date",
                "ts": "timestamptz", "bool": "boolean"}[kind]

    def cond(self, cols, depth=2):
        d = depth - 1
        kinds = ["int", "float", "num", "text", "date", "ts"]
        roll = self.r.random()
        bcol = self.column(cols, "bool")
        if bcol and roll < 0.08:
            return self.pick([bcol, f"NOT {bcol}", f"{bcol} IS NOT TRUE"])
        if depth > 0 and roll < 0.2:
            op = self.pick(["AND", "OR", "AND"])
            return f"({self.cond(cols, d)} {op} {self.cond(cols, d)})"
        if depth > 0 and roll < 0.24:
            return f"NOT ({self.cond(cols, d)})"
        k = self.pick(kinds)
        a = self.expr(k, cols, max(d, 0))
        form = self.r.random() * (0.84 if self.tame else 1)
        if form < 0.5:
            b = self.expr(k, cols, 0) if self.p(0.8) else self.literal(k)
            op = self.pick(["=", "<>", "<", "<=", ">", ">=", "IS DISTINCT FROM", "IS NOT DISTINCT FROM"])
            return f"{a} {op} {b}"
        if form < 0.6:
            return f"{a} IS {self.pick(['', 'NOT '])}NULL"
        if form < 0.68:
            return f"{a} BETWEEN {self.literal(k)} AND {self.literal(k)}"
        if form < 0.76:
            items = ", ".join(self.literal(k) for _ in range(self.r.randint(1, 4)))
            return f"{a} {self.pick(['IN', 'NOT IN'])} ({items})"
        if form < 0.84:
            t = self.expr("text", cols, max(d, 0))
            pat = self.pick(["'s1%'", "'%n%'", "'_'", "'%\\'", "'%'", "''", "'N%'", "'%%%%%%%%a'",
                             self.param(self.param_value("text"))])
            ops = ['LIKE', 'NOT LIKE', 'ILIKE', 'NOT ILIKE'] + ([] if self.tame else ['SIMILAR TO', '~', '~*'])
            return f"{t} {self.pick(ops)} {pat}"
        if form < 0.88:
            sub = self.pick([
                "SELECT site FROM sites", "SELECT region FROM regions WHERE zone = 'z1'",
                "SELECT name FROM people", "SELECT site FROM visits WHERE amount > 10",
                "SELECT 's1' UNION SELECT 's2'"])
            t = self.expr("text", cols, 0)
            return f"{t} {self.pick(['IN', 'NOT IN', '= ANY', '<> ALL'])} ({sub})"
        if form < 0.91:
            # Uncorrelated, or correlated with this level on one equality
            # (read as a public IN list), or on more.
            t = self.expr("text", cols, 0)
            sub = self.pick([
                "SELECT 1 FROM sites WHERE capacity > 50", "SELECT 1 FROM visits WHERE amount > 1000",
                "SELECT 1 FROM regions r2 WHERE r2.zone = 'z2'", "SELECT dp_count(1.0) FROM people",
                f"SELECT 1 FROM sites s9 WHERE s9.site = {t} AND s9.capacity > 50",
                f"SELECT * FROM sites s9 WHERE {t} = s9.site",
                f"SELECT 1 FROM sites s9 WHERE s9.site = {t} AND s9.site > {t}",
                f"SELECT 1 FROM visits v9 WHERE v9.site = {t} LIMIT 1"])
            return f"{self.pick(['EXISTS', 'NOT EXISTS'])} ({sub})"
        if form < 0.95:
            n = self.pick([2, 3, 5, 2000])
            arr = "ARRAY[" + ", ".join(self.literal("int") for _ in range(min(n, 5))) + "]"
            if n == 2000:
                arr = "(SELECT array_agg(g) FROM generate_series(1, 2000) g)" if self.p(0.5) else \
                    "ARRAY(SELECT generate_series(1, 2000))"
            elif self.p(0.3):
                arr = self.param([self.r.randint(0, 100) for _ in range(n)])
            return f"{self.expr('int', cols, 0)} {self.pick(['= ANY', '<> ALL', '< ALL'])} ({arr})"
        if form < 0.98:
            return f"starts_with({self.expr('text', cols, 0)}, {self.literal('text')})"
        return self.pick(["true", "false", "NULL", "1 = 1", f"{self.param(self.param_value('bool'))}::boolean"])

    # ------------------------------------------------------------ privacy parameters
    def eps(self, cols):
        if self.p(0.78):
            return self.pick(["1.0", "0.5", "1", "0.1", "2", "1e-3", "3.5"])
        if self.tame:  # valid, some at the ends of [2^-30, 1000]
            return self.pick(["2^-30", "1000", "9.313225746154785e-10", "999.9999", "(0.5 + 0.5)", "1.0::numeric",
                              "1::int2", self.param(self.pick([1.0, 0.5, 2, Decimal("0.25"), 1e-9, 1000, "1.0"]))])
        return self.wpick([
            (3, lambda: self.pick(["0", "-1", "-0.5", "1000", "1000.0001", "1e308", "1e-300", "9.313225746154785e-10",
                                   "2^-30", "2^-31", "'NaN'::float8", "'Infinity'", "'-Infinity'::float8"])),
            (2, lambda: "NULL"),
            (4, lambda: self.param(self.pick([1.0, 0.5, 2, Decimal("0.25"), None, -1.0, 0.0, float("nan"),
                                              float("inf"), 1e-12, 1001.0, "1.0", "abc"]))),
            (2, lambda: self.pick(["(0.5 + 0.5)", "CAST('1' AS float8)", "1.0::numeric", "sqrt(4)", "'1.0'",
                                   "abs(-1.0)", "1::int2", "greatest(0.5, 1)", "(1.0 / 0)", "ln(0)",
                                   "1e400::numeric::float8"])),
            (3, lambda: self.pick(["random()", "(SELECT 1.0)", "(SELECT max(weight) FROM sites)",
                                   "now()::date - current_date + 1.0", "'abc'", "true", "ARRAY[1.0]"])),
            (4, lambda: self.expr(self.pick(NUMERIC), cols, 1)),
        ])()

    def delta(self):
        if self.p(0.7):
            return self.pick(["1e-6", "1e-5", "0.001", "1e-9"])
        if self.tame:
            return self.pick(["0.5", "0.999999", "1e-300", "5e-324", "0.1", self.param(self.pick([1e-6, 0.25]))])
        return self.pick(["0", "0.5", "0.999999", "1", "1.5", "-1e-6", "NULL", "'NaN'::float8", "1e-300", "5e-324",
                          "'Infinity'::float8", self.param(self.pick([1e-6, 0.0, None, 1.0, -1.0]))])

    def mech(self, delta=True):
        if self.tame:
            m = self.pick(["'gaussian'", "'truncated_laplace'", "'uniform'", "'auto'"] if delta else
                          ["'laplace'", "'staircase'", "'auto'"])
        else:
            m = self.pick(["'laplace'", "'staircase'", "'gaussian'", "'truncated_laplace'", "'uniform'", "'auto'",
                           "'auto'", "'bogus'", "NULL", "''", "'GAUSSIAN'"])
        return self.param(m.strip("'")) if self.p(0.1) and m != "NULL" else m

    def loss(self):
        return self.pick(["'l2'", "'l1'", "'ci'", "'ci=0.99'", "'gamma=0.3'"] +
                         ([] if self.tame else ["'gamma=2'", "'ci=1'", "NULL", "'x'"]))

    def bounds(self, cols, integer=False):
        if self.p(0.75):
            return self.pick([("0", "100"), ("0", "1000"), ("-50", "50"), ("0", "1"), ("10", "20"), ("0", "150"),
                              ("0", "100000")])
        if self.tame:  # valid, some extreme
            return self.pick([("-1e15", "1e15"), ("0", "1e300"), ("-0.5", "0.5"), ("5", "5"), ("-100", "-10"),
                              ("0", "9223372036854775807" if integer else "1e-300"), ("-2147483648", "2147483647")])
        if integer and self.p(0.5):
            return self.pick([("0", "9223372036854775807"), ("-9223372036854775808", "0"), ("5", "5"),
                              ("10", "1"), ("0", "NULL")])
        lo = self.pick(["0", "-1e308", "'-Infinity'::float8", "'NaN'::float8", "NULL", "100", "1e300", "-1e-300",
                        "5e-324", self.param(self.param_value("float")), self.expr(self.pick(NUMERIC), cols, 1)])
        hi = self.pick(["100", "1e308", "'Infinity'::float8", "'NaN'::float8", "NULL", "0", "1e300", "-1",
                        self.param(self.param_value("float")), self.expr(self.pick(NUMERIC), cols, 1)])
        return lo, hi

    # ------------------------------------------------------------ aggregates
    def value(self, cols, kind=None):
        if not self.tame and self.p(0.06):  # a wrong type
            return self.expr(self.pick(["text", "date", "ts", "bool"]), cols, 1)
        return self.expr(kind or self.pick(NUMERIC), cols, self.pick([0, 0, 1, 2]))

    def dp_agg(self, cols):
        eps = lambda: self.eps(cols)  # noqa: E731
        wild = 0 if self.tame else 1
        which = self.wpick([(6, "count"), (1, "count_value"), (1, "count_mech"), (1, "count_delta"), (5, "sum"),
                            (1, "sum_int"), (2, "sum_delta"), (1, "laplace"), (1, "staircase"), (3, "avg"),
                            (1, "var"), (1, "stddev"), (1, "quantile"), (1, "median"), (1, "min"), (1, "max"),
                            (1, "partition"), (wild, "multi"), (wild, "arity")])
        if which == "count":
            return f"dp_count({eps()})"
        if which == "count_value":
            return f"dp_count({self.expr(self.pick(['int', 'text', 'date', 'float']), cols, 1)}, {eps()})"
        if which == "count_mech":
            return f"dp_count({eps()}, {self.mech(delta=False)})"
        if which == "count_delta":
            return f"dp_count({eps()}, {self.delta()}, {self.mech()})"
        lo, hi = self.bounds(cols, integer=which == "sum_int")
        if which == "sum":
            return f"dp_sum({self.value(cols)}, {eps()}, {lo}, {hi})"
        if which == "sum_int":
            return f"dp_sum(({self.value(cols, 'int')})::bigint, {eps()}, {lo}::bigint, {hi}::bigint)"
        if which == "sum_delta":
            extra = [self.delta()]
            if self.p(0.7) or self.tame:
                extra.append(self.mech())
                if self.p(0.4):
                    extra.append(self.loss())
            return f"dp_sum({self.value(cols)}, {eps()}, {lo}, {hi}, {', '.join(extra)})"
        if which == "laplace":
            return f"dp_sum_laplace({self.value(cols)}, {eps()}, {lo}, {hi})"
        if which == "staircase":
            extra = f", {self.loss()}" if self.p(0.3) else ""
            return f"dp_sum_staircase({self.value(cols)}, {eps()}, {hi}{extra})"
        if which in ("avg", "var", "stddev", "median", "min", "max"):
            return f"dp_{which}({self.value(cols)}, {eps()}, {lo}, {hi})"
        if which == "quantile":
            q = self.pick(["0.5", "0.1", "0.9", "0", "1", "-0.1", "1.1", "'NaN'::float8", "NULL",
                           self.param(self.r.random())])
            return f"dp_quantile({self.value(cols)}, {eps()}, {lo}, {hi}, {q})"
        if which == "partition":
            return f"dp_partition_selected({eps()}, {self.delta()})"
        if which == "multi":
            v = self.value(cols, "float")
            return f"dp_sum_multi(ARRAY[{v}, 2 * {v}], {eps()}, ARRAY[{hi}, {hi}])"
        # wrong arity
        return self.pick([
            "dp_count()", f"dp_sum({self.value(cols)}, {eps()})", f"dp_avg({self.value(cols)}, {eps()}, 0)",
            f"dp_sum({self.value(cols)}, {eps()}, 0, 1, 1e-6, 'gaussian', 'l2', 'extra')",
            f"dp_count({eps()}, {eps()}, {eps()}, {eps()})", f"dp_quantile({self.value(cols)}, {eps()}, 0, 1)",
            f"dp_median({self.value(cols)})", f"dp_count(*)", f"dp_count(DISTINCT {self.value(cols)}, 1.0)",
            f"dp_count({eps()} ORDER BY 1)", f"dp_sum(ALL {self.value(cols)}, {eps()}, 0, 100)",
            f"dp_count({eps()}) FILTER (WHERE {self.cond(cols, 1)})",
            f"dp_sum({self.value(cols)}, {eps()}, 0, 100) FILTER (WHERE {self.cond(cols, 1)})",
            f"dp_count({eps()}) WITHIN GROUP (ORDER BY 1)", f"dp_count({eps()}) OVER ()",
            f"dp_laplace({self.value(cols)}, {eps()}, 1)", f"dp_noise({self.value(cols)}, {eps()}, 1)",
        ])

    def plain_agg(self, cols):
        v = self.expr(self.pick(NUMERIC), cols, 1)
        return self.pick([
            "count(*)", f"sum({v})", f"max({v})", f"avg({v})", f"count(DISTINCT {v})",
            f"string_agg({self.expr('text', cols, 0)}, ',')", f"bool_or({self.cond(cols, 0)})", f"array_agg({v})",
            f"percentile_cont(0.5) WITHIN GROUP (ORDER BY {v})", f"min({self.expr('date', cols, 0)})",
            f"count(*) FILTER (WHERE {self.cond(cols, 1)})", f"sum({v}) FILTER (WHERE {self.cond(cols, 1)})",
            f"avg({v}) FILTER (WHERE {self.cond(cols, 0)})",
            f"sum(CASE WHEN {self.cond(cols, 1)} THEN {v} ELSE {self.pick(['0', '0.0', 'NULL', '1e308', '-1'])} END)",
            f"SUM(CASE WHEN {self.cond(cols, 1)} THEN 1 ELSE 0.0 END)",
        ])

    def on_answers(self, aggs):
        """Arithmetic on the answers of dp aggregates (post-processing)."""
        a = self.pick(aggs)
        return self.pick([
            f"{a} * 2", f"{a} + 1", f"round(({a})::numeric, 1)", f"({a}) > 100", f"{a} / nullif({self.pick(aggs)}, 0)",
            f"coalesce({a}, 0)", f"({a})::text", f"abs({a})", f"{a} - {self.pick(aggs)}", f"greatest({a}, 0)",
            f"{a} / 0", f"({a})::int", f"sqrt({a})", f"CASE WHEN ({a}) > 10 THEN 'many' ELSE 'few' END",
        ])

    # ------------------------------------------------------------ FROM
    def cols_of(self, table, alias):
        return [(f"{alias}.{c}", t) for c, t in TABLES[table].items()]

    def source(self):
        """(FROM text, columns, public key columns for a listed-key join or None, one row per person)."""
        w = 0 if self.tame else 1
        kind = self.wpick([(10, "people"), (10, "visits"), (5, "pv"), (4, "vs"), (3, "pr"), (2, "pvs"),
                           (1, "cross"), (1, "selfp"), (w, "selfv"), (w, "notunit"), (w, "outer"), (w, "sample"),
                           (w, "lateral"), (w, "subq"), (w, "union"), (w, "public"), (w, "comma"), (1, "only"),
                           (1, "func")])
        if kind == "people":
            return "people p", self.cols_of("people", "p"), None, True
        if kind == "visits":
            return "visits v", self.cols_of("visits", "v"), None, False
        if kind == "pv":
            how = self.pick(["JOIN visits v ON v.person_id = p.person_id", "JOIN visits v USING (person_id)",
                             "INNER JOIN visits v ON p.person_id = v.person_id AND v.amount > 10"]
                            + ([] if self.tame else ["JOIN visits v ON v.person_id = p.person_id + 0"]))
            cols = self.cols_of("people", "p") + self.cols_of("visits", "v")
            if "USING" in how:
                cols = [c for c in cols if not c[0].endswith("person_id")] + [("person_id", "int")]
            return f"people p {how}", cols, None, False
        if kind == "vs":
            how = self.pick(["JOIN sites s ON s.site = v.site", "JOIN sites s USING (site)",
                             "JOIN sites s ON s.site = v.site AND s.capacity > 20", "JOIN sites s ON s.capacity > v.qty"])
            cols = self.cols_of("visits", "v") + self.cols_of("sites", "s")
            return f"visits v {how}", cols, None, False
        if kind == "pr":
            return "people p JOIN regions r ON r.region = p.region", \
                self.cols_of("people", "p") + self.cols_of("regions", "r"), None, False
        if kind == "pvs":
            return "people p JOIN visits v ON v.person_id = p.person_id JOIN sites s ON s.site = v.site", \
                self.cols_of("people", "p") + self.cols_of("visits", "v") + self.cols_of("sites", "s"), None, False
        if kind == "cross":
            n = self.pick(["3", "12", "500"] + ([] if self.tame else ["2000", "300000", "0"]))
            return f"people p CROSS JOIN generate_series(1, {n}) g", \
                self.cols_of("people", "p") + [("g", "int")], None, False
        if kind == "selfp":
            return "people p JOIN people q ON q.person_id = p.person_id", \
                self.cols_of("people", "p") + self.cols_of("people", "q"), None, False
        if kind == "selfv":
            return "visits v JOIN visits w USING (person_id)", \
                [c for c in self.cols_of("visits", "v") if not c[0].endswith("person_id")], None, False
        if kind == "notunit":
            return self.pick(["people p JOIN people q ON q.age = p.age", "people p JOIN visits v ON v.qty = p.age",
                              "people p, visits v"]), \
                self.cols_of("people", "p") + self.cols_of("visits", "v"), None, False
        if kind == "outer":
            j = self.pick(["LEFT", "RIGHT", "FULL"])
            return f"people p {j} JOIN visits v ON v.person_id = p.person_id", \
                self.cols_of("people", "p") + self.cols_of("visits", "v"), None, False
        if kind == "sample":
            return f"people p TABLESAMPLE {self.pick(['SYSTEM', 'BERNOULLI'])} (50)", \
                self.cols_of("people", "p"), None, True
        if kind == "lateral":
            return "people p, LATERAL (SELECT v.amount FROM visits v WHERE v.person_id = p.person_id) x", \
                self.cols_of("people", "p") + [("x.amount", "float")], None, False
        if kind == "subq":
            return self.pick(["(SELECT * FROM people) p", "(SELECT * FROM people WHERE age > 30 OFFSET 0) p",
                              "(SELECT * FROM people ORDER BY income LIMIT 100) p"]), \
                self.cols_of("people", "p"), None, True
        if kind == "union":
            return "(SELECT * FROM people UNION ALL SELECT * FROM people) p", self.cols_of("people", "p"), None, True
        if kind == "public":
            return "sites s", self.cols_of("sites", "s"), None, True
        if kind == "comma":
            return "people p, visits v", self.cols_of("people", "p") + self.cols_of("visits", "v"), None, False
        if kind == "only":
            return "ONLY people p", self.cols_of("people", "p"), None, True
        return self.pick(["people p, generate_series(1, 3) g", "people p, unnest(ARRAY[1, 2]) g",
                          "people p JOIN (VALUES (1), (2)) g(g) ON true"]), \
            self.cols_of("people", "p") + [("g", "int")], None, False

    def listed_source(self):
        """A public key list on the outer side of a join with a protected table."""
        form = self.r.randrange(7)
        on_extra = f" AND {self.cond(self.cols_of('visits', 'v'), 1)}" if self.p(0.3) else ""
        if form == 0:
            return (f"sites s LEFT JOIN visits v ON v.site = s.site{on_extra}",
                    self.cols_of("sites", "s") + self.cols_of("visits", "v"), ["s.site", "s.region"])
        if form == 1:
            n = self.pick(["12", "3", "2000", "0"])
            return (f"generate_series(1, {n}) m LEFT JOIN visits v ON extract(month FROM v.day) = m{on_extra}",
                    [("m", "int")] + self.cols_of("visits", "v"), ["m"])
        if form == 2:
            return ("(VALUES ('north'), ('south'), (NULL), ('')) k(region) LEFT JOIN people p USING (region)",
                    [("k.region", "text")] + [c for c in self.cols_of("people", "p") if c[0] != "p.region"],
                    ["k.region"])
        if form == 3:
            return ("people p RIGHT JOIN regions r ON r.region = p.region",
                    self.cols_of("people", "p") + self.cols_of("regions", "r"), ["r.region", "r.zone"])
        if form == 4:
            return ("regions r LEFT JOIN people p ON p.region = r.region",
                    self.cols_of("regions", "r") + self.cols_of("people", "p"), ["r.zone", "r.region", "r.factor"])
        if form == 5:
            return ("sites s LEFT JOIN (visits v JOIN people p USING (person_id)) ON v.site = s.site",
                    self.cols_of("sites", "s") + [c for c in self.cols_of("visits", "v") if c[0] != "v.person_id"]
                    + [c for c in self.cols_of("people", "p") if c[0] != "p.person_id"], ["s.site", "s.capacity"])
        return ("generate_series(date '2024-01-01', date '2024-12-01', interval '1 month') d(m) "
                "LEFT JOIN visits v ON date_trunc('month', v.day) = d.m",
                [("d.m", "ts")] + self.cols_of("visits", "v"), ["d.m"])

    # ------------------------------------------------------------ a query level
    def level(self, n_aggs=None, grouped=None, listed=None):
        """A SELECT over protected rows: returns its SQL and the number of its output columns."""
        if listed is None:
            listed = self.p(0.12)
        if listed:
            frm, cols, key_cols = self.listed_source()
            one_per_person = False
            keys = self.r.sample(key_cols, self.r.randint(1, len(key_cols))) if self.p(0.9) else \
                [self.expr(self.pick(["text", "int"]), cols, 1)]
        else:
            frm, cols, _, one_per_person = self.source()
            if grouped is None:
                grouped = self.p(0.55)
            keys = [self.group_key(cols) for _ in range(self.r.choice([1, 1, 1, 2, 3]))] if grouped else []
        aggs = [self.dp_agg(cols) for _ in range(n_aggs or self.r.choice([1, 1, 1, 2, 2, 3]))]
        items = list(keys) + aggs
        if n_aggs is None and self.tame:
            if self.p(0.15):
                items.append(self.on_answers(aggs))
        elif n_aggs is None:
            if self.p(0.05):
                items.append(self.plain_agg(cols))
            if self.p(0.05):
                items.append(self.expr(self.pick(["int", "text", "float"]), cols, 0))  # a bare column
            if self.p(0.08):
                items.append(self.on_answers(aggs))
            if self.p(0.04):
                items.append(self.pick(["1", "NULL", "'const'", "now()", self.param(self.param_value("int")),
                                        "current_user", "random()", "pg_backend_pid()"]))
            if self.p(0.04):
                items.append(self.window(aggs, keys))
            if self.p(0.02):
                items.append(f"(SELECT dp_count(1.0) FROM {self.pick(['people', 'visits v WHERE v.site = s.site'])})")
            self.r.shuffle(items) if self.p(0.1) else None
        named = [f"{it} AS c{i}" if self.p(0.3) else it for i, it in enumerate(items)]
        distinct = ""
        if n_aggs is None and not self.tame and self.p(0.03):
            distinct = self.pick(["DISTINCT ", "DISTINCT ON (1) ", "ALL "])
        sql = f"SELECT {distinct}{', '.join(named)} FROM {frm}"
        if self.p(0.5):
            if listed:
                pub = [c for c in cols if c[0].split(".")[0] in ("s", "r", "k", "m", "d") or "." not in c[0]]
                sql += f" WHERE {self.cond(pub if self.p(0.85) else cols, 2)}"
            else:
                sql += f" WHERE {self.cond(cols, 2)}"
        if keys:
            if self.p(0.3):
                idx = [str(items.index(k) + 1) for k in keys if k in items]
                gb = ", ".join(idx) if len(idx) == len(keys) else ", ".join(keys)
            else:
                gb = ", ".join(keys)
            if not self.tame and self.p(0.04):
                gb = self.pick([f"ROLLUP ({gb})", f"CUBE ({gb})", f"GROUPING SETS (({gb}), ())", f"{gb}, ()"])
            sql += f" GROUP BY {gb}"
        elif self.p(0.03):
            sql += " GROUP BY ()"
        if self.p(0.12):
            sql += " HAVING " + self.pick([
                f"{self.dp_agg(cols)} > {self.pick(['10', '0', '100.5', '-1'])}",
                f"dp_partition_selected({self.eps(cols)}, {self.delta()})",
                f"{keys[0] if keys else '1'} IS NOT NULL", f"{self.pick(aggs)} > 0"]
                + ([] if self.tame else [f"{self.cond(cols, 1)}", "count(*) > 1",
                                         f"max({self.expr('float', cols, 0)}) > 10"]))
        if self.p(0.15):
            sql += " ORDER BY " + self.pick(["1", f"{len(items)} DESC", self.pick(items), "random()",
                                             f"{self.expr('int', cols, 0)}", "1 NULLS FIRST"])
        if self.p(0.08):
            sql += f" LIMIT {self.pick(['1', '3', '0', 'ALL', 'NULL', self.param(self.pick([1, 5, None]))])}"
            if self.p(0.3):
                sql += f" OFFSET {self.pick(['1', '0'])}"
        if not self.tame and self.p(0.01):
            sql += self.pick([" FOR UPDATE", " FOR SHARE", " FOR KEY SHARE OF p"])
        return sql, len(items)

    def group_key(self, cols):
        roll = self.r.random()
        if roll < 0.35:
            k = self.pick(["text", "int", "date", "bool", "text"])
            return self.column(cols, k) or self.pick(cols)[0]
        if roll < 0.42:
            return self.pick([c for c, _ in cols if c.endswith("person_id")] or [cols[0][0]]) + \
                self.pick([" % 10", " / 100"] if self.tame else ["", " % 10", "::text", " / 100", "::bigint"])
        if roll < 0.55:
            return self.pick([
                "floor(" + (self.column(cols, "float") or "1.5") + " / 25) * 25",
                "date_trunc('month', " + (self.column(cols, "ts") or "now()") + ")",
                "extract(dow FROM " + (self.column(cols, "date") or "current_date") + ")",
                "width_bucket(" + (self.column(cols, "float") or "1.0") + ", 0, 150, 6)",
                "(" + (self.column(cols, "int") or "1") + ") / 10",
            ])
        if roll < 0.65:
            c = self.cond(cols, 1)
            return f"CASE WHEN {c} THEN {self.literal('text')} ELSE {self.literal('text')} END"
        if roll < 0.75:
            if self.tame:
                return f"({self.expr(self.pick(NUMERIC), cols, 0)})::{self.pick(['int', 'float8', 'numeric', 'bigint'])}"
            return f"({self.expr(self.pick(['int', 'float', 'date', 'num', 'text']), cols, 0)})::" + \
                self.pick(["text", "int", "float8", "numeric", "date", "varchar(3)", "char(2)", "bigint", "real"])
        return self.expr(self.pick(["int", "float", "num", "text", "date", "ts", "bool"]), cols, 1)

    def window(self, aggs, keys):
        a = self.pick(aggs)
        over = self.pick(["()", f"(ORDER BY {a})", f"(PARTITION BY {keys[0] if keys else '1'})",
                          f"(ORDER BY {a} ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)"])
        return self.pick([f"rank() OVER {over}", f"sum({a}) OVER {over}", f"row_number() OVER {over}",
                          f"lag({a}) OVER {over}", f"count(*) OVER {over}", f"{a.split('(')[0]}(1.0) OVER {over}"])

    # ------------------------------------------------------------ per-person subqueries
    def per_person(self):
        base = self.pick(["visits v", "visits v", "visits v JOIN sites s USING (site)",
                          "visits v JOIN people p USING (person_id)", "people p", "visits v, generate_series(1, 3) g"]
                         + ([] if self.tame else ["visits v LEFT JOIN sites s ON s.site = v.site",
                                                  "visits v JOIN visits w USING (person_id)"]))
        vcols = self.cols_of("visits", "v") if "visits v" in base else []
        if "sites s" in base:
            vcols += self.cols_of("sites", "s")
        if "people p" in base:
            vcols += self.cols_of("people", "p")
        if "USING (person_id)" in base:
            vcols = [c for c in vcols if not c[0].endswith("person_id")]
        pid = self.pick(["person_id", "v.person_id" if "visits v" in base else "p.person_id"])
        feats, fcols = [], []
        for i in range(self.r.randint(1, 4)):
            num = self.expr(self.pick(NUMERIC), vcols, self.pick([0, 0, 1]))
            f, t = self.pick([
                ("count(*)", "int"), (f"sum({num})", "num"), (f"avg({num})", "num"), (f"min({num})", "num"),
                (f"max({num})", "num"), (f"min({self.expr('date', vcols, 0)})", "date"),
                (f"max({self.expr('ts', vcols, 0)})", "ts"), (f"max({self.expr('text', vcols, 0)})", "text"),
                (f"bool_or({self.cond(vcols, 0)})", "bool"), (f"every({self.cond(vcols, 0)})", "bool"),
                (f"count({self.expr('text', vcols, 0)})", "int"), (f"sum({num})::float8", "float"),
                (f"sum({num}) / count(*)", "num"), (f"count(*) * 2 + 1", "int"), (f"max({num}) - min({num})", "num"),
            ] + ([] if self.tame else [
                (f"count(DISTINCT {num})", "int"), (f"string_agg({self.expr('text', vcols, 0)}, ',')", "text"),
                (f"stddev({num})", "num"), (f"array_agg({num})", "text"), ("dp_count(1.0)", "int"), (f"{num}", "num"),
            ]))
            feats.append(f"{f} AS f{i}")
            fcols.append((f"f{i}", t))
        inner = f"SELECT {pid}{', ' + ', '.join(feats)} FROM {base}"
        if self.p(0.4):
            inner += f" WHERE {self.cond(vcols, 1)}"
        inner += " GROUP BY " + (pid if self.tame else self.pick([pid, pid, pid, f"{pid}, site", "1", f"{pid} % 10"]))
        if self.p(0.2):
            inner += " HAVING " + self.pick(["count(*) >= 3", f"sum({self.expr(self.pick(NUMERIC), vcols, 0)}) > 10",
                                             f"max({self.expr('date', vcols, 0)}) > date '2024-03-01'"])
        if not self.tame and self.p(0.03):
            inner += self.pick([" ORDER BY 2 LIMIT 10", " LIMIT 100", " OFFSET 1"])
        cols = fcols + [("pp.person_id", "int")] if not self.tame and self.p(0.1) else fcols
        # Outer level over the per-person rows.
        # dpnoise aggregates, or plain ones of the person's values (bounded by the policy).
        aggs = [self.plain_agg(cols) if self.p(0.3) else self.dp_agg(cols)
                for _ in range(self.r.choice([1, 1, 2, 3]))]
        keys = [self.expr(self.pick(["int", "text", "bool", "date"]), cols, 0)] if self.p(0.3) else []
        if not self.tame and self.p(0.05):
            keys = ["person_id"]
        sql = f"SELECT {', '.join(keys + aggs)} FROM ({inner}) pp"
        if not self.tame and self.p(0.05):
            sql = self.pick([f"SELECT * FROM ({inner}) pp", f"SELECT count(*) FROM ({inner}) pp",
                             f"WITH pp AS ({inner}) SELECT {', '.join(aggs)} FROM pp",
                             f"SELECT {', '.join(aggs)} FROM ({inner}) pp JOIN sites s ON true"])
            return sql
        if self.p(0.4):
            sql += f" WHERE {self.cond(cols, 1)}"
        if keys:
            sql += f" GROUP BY {', '.join(keys)}"
        if self.p(0.1):
            sql += f" HAVING {self.dp_agg(cols)} > 5"
        return sql

    def setting(self, session):
        """A setting an analyst may try: plan steering and the gate's own (and, for one statement only,
        those that make every later statement refused, or that an analyst may not set)."""
        steer = [
            f"{self.pick(PLAN_SWITCHES)} = off",
            f"plan_cache_mode = {self.pick(['force_generic_plan', 'force_custom_plan', 'auto'])}",
            f"work_mem = '{self.pick(['64kB', '4MB', '1GB'])}'",
            f"dpnoise.selection_epsilon = {self.pick(['0.5', '1', '0', '-1', '1000', '2000', '1e-9'])}",
            f"dpnoise.selection_delta = {self.pick(['1e-6', '1e-9', '0.5', '1', '0.1'])}",
            f"dpnoise.max_groups_contributed = {self.pick(['0', '1', '2', '5', '1000', '-1'])}",
            "max_parallel_workers_per_gather = 2", "parallel_setup_cost = 0", "parallel_tuple_cost = 0",
            "min_parallel_table_scan_size = 0", "jit_above_cost = 0", "extra_float_digits = 3",
            "DateStyle = 'SQL, DMY'", "TimeZone = 'Pacific/Kiritimati'", "search_path = pg_temp, public",
            "IntervalStyle = 'sql_standard'", "lc_monetary = 'C'", "geqo_threshold = 2", "from_collapse_limit = 1",
            "join_collapse_limit = 1", "cursor_tuple_fraction = 1", "constraint_exclusion = on",
        ]
        poison = [
            "dpnoise.selection_delta = 0", "transaction_isolation = serializable",
            "transaction_isolation = 'repeatable read'", "client_min_messages = debug1", "trace_sort = on",
            "dpnoise.analyst = off", "dpnoise.timing_epsilon = 0.5", "dpnoise.max_public_fanout = 1000000000",
            "dpnoise.enforce_budget = off", "dpnoise.seed = '1'", "session_replication_role = replica",
            "row_security = off", "lc_messages = 'C'", "statement_timeout = '1ms'", "dpnoise.max_epsilon_per_query = 1",
            "debug_print_plan = on", "force_parallel_mode = on", "transform_null_equals = on",
            "standard_conforming_strings = off",
        ]
        return self.pick(steer) if session or self.p(0.4) else self.pick(poison)

    # ------------------------------------------------------------ statements
    def statement(self):
        w = 0 if self.tame else 1
        kind = self.wpick([(36, "level"), (14, "per_person"), (12, "wrapper"), (8, "listed"), (4, "setop"),
                           (6, "raw wrapper"),
                           (4, "scalar"), (9 * w, "refused"), (4 * w, "public"), (2, "set"), (3, "local"),
                           (2, "procedural"), (2 * w, "misc")])
        mode = "execute"
        if kind == "level":
            sql = self.level()[0]
        elif kind == "listed":
            sql = self.level(listed=True)[0]
        elif kind == "per_person":
            sql = self.per_person()
        elif kind == "wrapper":
            inner, n = self.level()
            sql = self.wpick([
                (4, f"SELECT * FROM ({inner}) AS virtual_table LIMIT {self.pick(['1000', '1', '0'])}"),
                (2, f"SELECT count(*) FROM ({inner}) t"),
                (2, f"WITH c AS {self.pick(['', 'MATERIALIZED ', 'NOT MATERIALIZED '])}({inner}) SELECT * FROM c"),
                (1, f"SELECT * FROM ({inner}) t ORDER BY 1 DESC NULLS LAST"),
                (1, f"SELECT * FROM ({inner}) t WHERE t IS NOT NULL"),
                (1, f"SELECT t.*, s.site FROM ({inner}) t CROSS JOIN sites s"),
                (1, f"WITH c AS MATERIALIZED ({inner}) SELECT * FROM c a, c b"),
                (w, f"WITH c AS ({inner}) SELECT * FROM c a, c b"),
                (w, f"SELECT * FROM sites s WHERE EXISTS ({inner})"),
                (w, f"SELECT (SELECT count(*) FROM ({inner}) t) AS n"),
                (w, f"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) "
                    f"SELECT * FROM r, ({inner}) t"),
                (w, f"SELECT * FROM ({inner}) t, LATERAL (SELECT t.*) u"),
                (1, f"SELECT json_agg(t) FROM ({inner}) t"),
            ])
        elif kind == "raw wrapper":  # raw rows through a subquery or CTE, taken into the aggregating level
            t = self.pick(["people", "visits"])
            cols = self.cols_of(t, "t")
            inner = f"SELECT * FROM {t} t WHERE {self.cond(cols, 1)}"
            outer = [(f"w.{c.split('.')[1]}", k) for c, k in cols]
            aggs = ", ".join(self.plain_agg(outer) if self.p(0.6) else self.dp_agg(outer) for _ in range(2))
            sql = self.pick([
                f"SELECT {aggs} FROM ({inner}) AS w",
                f"WITH w AS ({inner}) SELECT {aggs} FROM w",
                f"SELECT w.{'region' if t == 'people' else 'site'}, {aggs} FROM ({inner}) AS w GROUP BY 1",
                f"SELECT {aggs} FROM ({inner}{self.pick([' LIMIT 5', ' ORDER BY 1', ' OFFSET 1', ''])}) AS w",
                "SELECT DISTINCT region FROM people ORDER BY 1",
                "SELECT w.region FROM (SELECT * FROM people) w GROUP BY w.region ORDER BY w.region LIMIT 1000",
            ])
        elif kind == "setop":
            a = self.level(n_aggs=1, grouped=False)[0]
            b = self.level(n_aggs=1, grouped=False)[0] if self.tame or self.p(0.8) else self.pick(
                ["SELECT 1", "SELECT count(*) FROM people", "SELECT capacity FROM sites", "SELECT age FROM people"])
            op = self.pick(["UNION", "UNION ALL"] if self.tame else ["UNION", "UNION ALL", "INTERSECT", "EXCEPT"])
            sql = f"({a}) {op} ({b})" if self.p(0.5) else f"SELECT * FROM (({a}) {op} ({b})) u"
        elif kind == "scalar":
            agg = self.dp_agg(self.cols_of("people", "p"))
            sql = self.pick([
                f"SELECT s.site, (SELECT {agg} FROM people p) FROM sites s",
                f"SELECT (SELECT {agg} FROM people p) AS a, (SELECT dp_count(1.0) FROM visits) AS b",
                f"SELECT * FROM sites s WHERE s.capacity < (SELECT {agg} FROM people p)",
            ]) if self.tame else self.pick([
                f"SELECT s.site, (SELECT {agg} FROM people p) FROM sites s",
                f"SELECT s.site, (SELECT dp_count(1.0) FROM visits v WHERE v.site = s.site) FROM sites s",
                f"SELECT * FROM sites s WHERE s.capacity < (SELECT {agg} FROM people p)",
                f"SELECT (SELECT {agg} FROM people p) AS a, (SELECT dp_count(1.0) FROM visits) AS b",
                f"SELECT * FROM generate_series(1, 3) g, LATERAL (SELECT {agg} FROM people p WHERE p.age > g) x",
                f"SELECT {agg} FROM people p WHERE p.age > (SELECT avg(capacity) FROM sites)",
                f"SELECT {agg} FROM people p WHERE p.region IN (SELECT region FROM regions WHERE zone = 'z1')",
                f"SELECT {agg} FROM people p WHERE p.person_id IN (SELECT person_id FROM visits WHERE amount > 50)",
            ])
        elif kind == "refused":
            c = self.pick(["people", "visits"])
            cols = self.cols_of(c, "t")
            sql = self.pick([
                f"SELECT * FROM {c}", f"TABLE {c}", f"SELECT count(*) FROM {c}",
                f"SELECT {self.expr('float', cols, 1)} FROM {c} t LIMIT 5",
                f"SELECT max({self.expr('int', cols, 0)}) FROM {c} t", f"SELECT * FROM {c} t WHERE {self.cond(cols, 1)}",
                f"SELECT t.person_id FROM {c} t GROUP BY t.person_id", f"SELECT DISTINCT region FROM people",
                f"SELECT 1 FROM {c} LIMIT 1", f"SELECT * FROM {c} FOR UPDATE",
                f"UPDATE people SET age = age + 1 WHERE person_id = 1 RETURNING age",
                f"DELETE FROM visits WHERE person_id = 1", f"INSERT INTO people (person_id) VALUES (1000)",
                f"INSERT INTO sites VALUES ('sx', 'north', 1, current_date, 1)",
                f"EXPLAIN {self.level()[0]}", f"EXPLAIN (ANALYZE) SELECT dp_count(1.0) FROM people",
                f"SELECT dp_laplace(income, 1.0, 1.0) FROM people",
                f"SELECT * FROM sites s JOIN people p ON p.region = s.region",
                f"SELECT pg_stat_get_live_tuples('people'::regclass)", "SELECT * FROM pg_stat_user_tables",
                "SELECT * FROM dpnoise.ledger", "SELECT * FROM dp_budgets", "SELECT dp_unprotect('people')",
                "SELECT dp_budget_grant('dp_fuzz', 1, 0)", "SELECT * FROM dpnoise.release_key",
                f"SELECT row_to_json(t) FROM {c} t", f"SELECT {c} FROM {c}",
                f"SELECT count(*) FROM {c} HAVING count(*) > 100",
            ])
            if self.p(0.1):
                sql = self.pick([f"COPY {c} TO STDOUT", f"COPY (SELECT dp_count(1.0) FROM {c}) TO STDOUT",
                                 f"COPY (SELECT * FROM {c}) TO STDOUT", "COPY sites TO STDOUT"])
                mode = "copy"
        elif kind == "public":
            cols = self.cols_of("sites", "s")
            sql = self.pick([
                f"SELECT * FROM sites s WHERE {self.cond(cols, 2)}",
                f"SELECT s.region, count(*), max(s.weight) FROM sites s GROUP BY 1",
                f"SELECT {self.expr(self.pick(['int', 'float', 'num', 'text', 'date', 'ts']), cols, 2)} FROM sites s",
                "SELECT r.zone, count(*) FROM regions r LEFT JOIN sites s USING (region) GROUP BY ROLLUP (1)",
                f"SELECT {self.expr(self.pick(['int', 'float', 'num']), [], 2)}",
                "SELECT * FROM dp_my_budget", "SELECT * FROM dp_budget_remaining()",
                f"SELECT * FROM dp_query_accuracy('{self.pick(['count', 'sum', 'avg'])}', {self.eps([])}, "
                f"'{{{self.pick(['visits', 'people', 'visits,sites', 'nothing'])}}}', 0, 100)",
                f"SELECT * FROM dp_accuracy('auto', {self.eps([])}, 100)",
                f"SELECT dp_count({self.eps([])}) FROM sites",
                f"SELECT dp_sum(weight, {self.eps([])}, 0, 10) FROM sites GROUP BY region",
                f"SELECT dp_share({self.eps([])}, {self.pick(['3', '0', '-1', '1000'])})",
            ])
        elif kind == "procedural":  # cursors, PL/pgSQL, SQL-level PREPARE (no $n: simple-query strings)
            inner = self.level()[0] if self.p(0.7) else self.per_person()
            if TOKEN.search(inner):
                sql = inner
            else:
                q = inner.replace("'", "''")
                sql = self.pick([
                    f"BEGIN; DECLARE fz_c {self.pick(['', 'SCROLL ', 'NO SCROLL '])}CURSOR FOR {inner}; "
                    f"FETCH {self.pick(['1', '2', 'ALL', 'LAST', 'ABSOLUTE 2'])} FROM fz_c; "
                    f"FETCH {self.pick(['ALL', 'PRIOR', 'FIRST', 'BACKWARD 1'])} FROM fz_c; COMMIT",
                    f"BEGIN; DECLARE fz_h CURSOR WITH HOLD FOR {inner}; COMMIT; FETCH ALL FROM fz_h; CLOSE fz_h",
                    f"BEGIN; DECLARE fz_c CURSOR FOR {inner}; FETCH 1 FROM fz_c; ROLLBACK",
                    f"BEGIN; SAVEPOINT a; {inner}; ROLLBACK TO SAVEPOINT a; {inner}; COMMIT",
                    f"DO $fz$ DECLARE r record; BEGIN FOR r IN {inner} LOOP END LOOP; END $fz$",
                    f"DO $fz$ BEGIN PERFORM * FROM ({inner}) t; END $fz$",
                    f"DO $fz$ BEGIN EXECUTE '{q}'; END $fz$",
                    f"DO $fz$ BEGIN FOR i IN 1..{self.pick(['2', '3'])} LOOP PERFORM * FROM ({inner}) t; END LOOP; END $fz$",
                    f"PREPARE fz_q AS {inner}; EXECUTE fz_q; EXECUTE fz_q; DEALLOCATE fz_q",
                    f"CREATE TEMP VIEW fz_view AS {inner}; SELECT * FROM fz_view; DROP VIEW fz_view",
                    f"CREATE FUNCTION pg_temp.fz_f() RETURNS SETOF record LANGUAGE sql AS '{q}'; "
                    f"SELECT pg_temp.fz_f(); DROP FUNCTION pg_temp.fz_f()",
                ])
                # Strings that run the query twice: a first run charged, a second refused (ZB001 once
                # the budget is spent, or a cursor's repeat) cannot be told apart in the ledger.
                if any(m in sql for m in ("SAVEPOINT a", "FOR i IN 1..", "EXECUTE fz_q; EXECUTE")):
                    mode = "twice"
        elif kind == "set":  # for the session, until RESET ALL (every 250 statements)
            sql = "SET " + self.setting(session=True) if self.p(0.95) else "RESET ALL"
        elif kind == "local":  # for one statement: SET LOCAL in the same simple-query string
            inner = self.level()[0]
            sql = f"SET LOCAL {self.setting(session=False)}; {inner}" if not TOKEN.search(inner) else inner
        else:
            sql = self.pick([
                "SELECT 1 / 0", "SELECT 'abc'::int", "SELECT pg_sleep(0.01)", "SELECT dp_laplace(10, 1.0, 1.0)",
                f"SELECT dp_noise(10, {self.eps([])}, 1, {self.delta()}, {self.mech()})",
                "SELECT dp_count(1.0) FROM generate_series(1, 100)",
                f"SELECT dp_sum(g, {self.eps([])}, 0, 10) FROM generate_series(1, 100) g",
                "SELECT nextval('nosuch')", "DO $$ BEGIN PERFORM dp_count(1.0) FROM people; END $$",
                "DO $$ BEGIN PERFORM * FROM people; END $$",
                "CREATE TEMP TABLE IF NOT EXISTS tmp_fz AS SELECT dp_count(1.0) AS n FROM people",
                "CREATE TEMP VIEW tmp_v AS SELECT * FROM people", "SELECT * FROM tmp_v",
                "PREPARE fz_p(float8) AS SELECT dp_count($1) FROM people",
                f"EXECUTE fz_p({self.eps([])})", "DEALLOCATE fz_p",
                "CREATE FUNCTION pg_temp.f(float8) RETURNS float8 LANGUAGE sql AS 'SELECT $1'",
                "SELECT dp_count(1.0) FROM people WHERE pg_temp.f(income) > 1",
                "LISTEN fz", "NOTIFY fz", "SELECT pg_advisory_lock(1)", "SELECT pg_advisory_unlock_all()",
                "CREATE TEMP TABLE IF NOT EXISTS mine (x int PRIMARY KEY); SELECT dp_count(1.0) FROM people",
                "SELECT dp_count(1.0) FROM people; SELECT 1",
            ])
        if mode == "execute" and self.p(0.3):
            mode = "prepare"  # on the server, when it has parameters
        sql = re.sub(r"\s+", " ", sql).strip()
        return sql, self.params, mode


def one_line(e):
    return " ".join(str(e).split())


def finish(sql, drawn):
    """The SQL for psycopg (%s placeholders), its parameters, and the SQL as a person reads it ($n).

    Parameters are drawn with the alternatives the grammar did not keep
    too: only those whose place is in the SQL are sent."""
    params = [drawn[int(m.group(1))] for m in TOKEN.finditer(sql)]
    if not params:
        return sql, [], sql
    n = iter(range(1, len(params) + 1))
    shown = TOKEN.sub(lambda m: f"${next(n)}", sql)
    return TOKEN.sub("%s", sql.replace("%", "%%")), params, shown


# ---------------------------------------------------------------- the run

class Run:
    def __init__(self, server, seed):
        self.server = server
        self.seed = seed
        self.outcomes = {}  # class -> [count, sample message, sample SQL]
        self.failures = []  # (index, what, sql, params, settings)
        self.charged_after_error = {}  # SQLSTATE -> count (errors that may follow the charge)
        self.settings = []  # the SETs in force
        self.an = None
        self.su = None
        self.ledger = None  # the analyst's last known max(id) of dp_my_ledger, or None
        self.crashes = 0
        self.may_charge = collections.deque(maxlen=100)  # recent statements failed after they may have been charged
        self.late_charges = 0
        # Every statement's outcome, one a line, when DPNOISE_FUZZ_LOG names a file.
        self.log = open(os.environ["DPNOISE_FUZZ_LOG"], "w") if os.environ.get("DPNOISE_FUZZ_LOG") else None

    def connect(self, deadline=60):
        t0 = time.time()
        while True:
            try:
                an = self.server.connect(ANALYST)
                su = self.server.connect("postgres")
                break
            except psycopg.OperationalError:
                if time.time() - t0 > deadline:
                    raise
                time.sleep(0.5)
        for c in (self.an, self.su):
            if c is not None:
                try:
                    c.close()
                except Exception:
                    pass
        self.an, self.su = an, su
        # Dates and timestamps out of Python's range (infinity, BC, year 294276) are read as text.
        for name in ("date", "timestamp", "timestamptz", "interval", "time", "timetz"):
            self.an.adapters.register_loader(name, psycopg.types.string.TextLoader)
        self.ledger = None
        self.settings = []

    def ledger_now(self):
        return self.an.execute("SELECT coalesce(max(id), 0) FROM dp_my_ledger").fetchone()[0]

    def top_up(self):
        eps, delta = self.an.execute("SELECT epsilon, delta FROM dp_budget_remaining()").fetchone()
        if eps < 1e8:
            self.su.execute("SELECT dp_budget_grant(%s, 1e9, 0)", (ANALYST,))
        while delta < 10:  # a grant adds at most delta 1
            self.su.execute("SELECT dp_budget_grant(%s, 0, 1)", (ANALYST,))
            delta += 1

    def outcome(self, cls, message, shown):
        o = self.outcomes.setdefault(cls, [0, message, shown])
        o[0] += 1
        if self.log:
            self.log.write(f"{cls}\t{message}\t{shown}\n")

    def fail(self, index, what, shown, params):
        self.failures.append((index, what, shown, params, list(self.settings)))
        print(f"FAIL  statement {index} (seed {self.seed}): {what}\n      SQL: {shown}"
              + (f"\n      parameters: {params!r}" if params else "")
              + (f"\n      session settings: {'; '.join(self.settings)}" if self.settings else ""), flush=True)

    def run_one(self, index, sql, drawn, mode):
        query, params, shown = finish(sql, drawn)
        if not params and mode == "prepare":
            mode = "execute"
        if self.ledger is None:
            self.ledger = self.ledger_now()
        before = self.ledger
        try:
            if mode == "copy":
                with self.an.cursor() as cur:
                    with cur.copy(query) as copy:
                        for _ in copy:
                            pass
            else:
                cur = self.an.execute(query, params or None, prepare=True if mode == "prepare" else None)
                while True:  # every result of a multi-statement string
                    if cur.pgresult is not None and cur.description is not None:
                        cur.fetchall()
                    if not cur.nextset():
                        break
        except psycopg.Error as e:
            if self.an.closed or e.sqlstate is None and isinstance(e, psycopg.OperationalError):
                self.crashes += 1
                self.outcome("connection lost", one_line(e), shown)
                self.fail(index, f"connection lost (backend crash?): {one_line(e)}", shown, params)
                self.connect()
                return
            state = e.sqlstate or "client"
            message = e.diag.message_primary if e.sqlstate else f"{type(e).__name__}: {e}"
            source = f"{e.diag.source_file}: {e.diag.source_function}" if e.diag.source_file else "?"
            self.outcome(state, message, shown)
            if state[:2] in ("XX", "58"):
                self.fail(index, f"{state} {message} [raised in {source}]", shown, params)
            if state.startswith("57P"):  # the server is shutting down or restarting: reconnect
                self.fail(index, f"{state} {message}", shown, params)
                self.connect()
                return
            if self.an.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                self.an.rollback()
            # A value the statement read from a row (a public table's: dp_laplace(weight) over
            # ±Infinity), refused by its function as it runs, is known only after the charge;
            # its message says so and never shows it.
            from_a_row = state == "22023" and message.endswith(DATA_NOT_SHOWN)
            must = (state in MUST_NOT_CHARGE or state.startswith("42")) and not (
                state in ("22023", "0A000") and e.diag.source_file in PG_RUNTIME_FILES) and not from_a_row \
                and not (state.startswith("42") and e.diag.source_file in PG_RUNTIME_LOOKUPS) \
                and mode != "twice"
            self.ledger = self.ledger_now()
            if self.ledger != before:
                rows = self.an.execute("SELECT id, statement FROM dp_my_ledger WHERE id > %s ORDER BY id",
                                       (before,)).fetchall()
                # A statement cancelled (statement_timeout) while it waited for the ledger worker to
                # record its charge fails at once; the worker still records it, later.
                late = [r for r in rows if r[1] in self.may_charge and r[1] != shown]
                self.late_charges += len(late)
                own = [r for r in rows if r not in late]
                if own and must:
                    self.fail(index, f"{state} {message} [raised in {source}]: refused, yet charged (ledger "
                                     f"rows {', '.join(str(r[0]) for r in own)})", shown, params)
                elif own:
                    key = f"{state} ({e.diag.source_file or '?'})"
                    self.charged_after_error[key] = self.charged_after_error.get(key, 0) + 1
            if not must:
                self.may_charge.append(shown)
            return
        self.outcome("answered", "", shown)
        self.ledger = None
        low = sql.lower()
        if low.startswith(("set ", "reset")) and ";" not in low:
            self.settings = [] if low.startswith("reset all") else self.settings + [sql]

    def run(self, count):
        self.connect()
        self.top_up()
        t0 = time.time()
        for i in range(count):
            if i and i % RESET_EVERY == 0:
                self.an.execute("RESET ALL")
                self.settings = []
            if i and i % BUDGET_EVERY == 0:
                self.top_up()
            sql, drawn, mode = Gen(random.Random(self.seed * 1000003 + i)).statement()
            try:
                self.run_one(i, sql, drawn, mode)
            except psycopg.Error as e:  # the fuzzer's own query (the ledger's) failed
                _, params, shown = finish(sql, drawn)
                if self.an.closed:
                    self.crashes += 1
                    self.outcome("connection lost", one_line(e), shown)
                    what = f"connection lost (backend crash?) around this statement: {one_line(e)}"
                else:
                    what = f"the fuzzer's own query failed: {type(e).__name__}: {e}"
                self.fail(i, what, shown, params)
                self.connect()
            if (i + 1) % 1000 == 0:
                print(f"  {i + 1} statements, {time.time() - t0:.0f} s, {self.outcomes.get('answered', [0])[0]} "
                      f"answered, {len(self.failures)} failures", flush=True)
        return time.time() - t0


def server_log_crashes(server):
    path = os.path.join(server.dir or "", "server.log")
    if not os.path.exists(path):
        return []
    with open(path, errors="replace") as f:
        return [line.strip() for line in f if "terminated by signal" in line or "PANIC" in line]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    port = int(sys.argv[1])
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else int(time.time() * 1000) % 1_000_000_007
    print(f"fuzz.py: {count} analyst statements, seed {seed} (replay: tests/e2e/fuzz.py PORT {count} {seed})",
          flush=True)
    server = Server(port)

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    run = Run(server, seed)
    log_lines = []
    try:
        server.start()
        with server.connect("postgres") as su:
            su.execute(SETUP)
        secs = run.run(count)
        log_lines = server_log_crashes(server)
    finally:
        for c in (run.an, run.su):
            if c is not None:
                c.close()
        server.stop()
    total = sum(o[0] for o in run.outcomes.values())
    answered = run.outcomes.get("answered", [0])[0]
    print(f"\n{total} statements in {secs:.1f} s ({1000 * secs / max(total, 1):.1f} ms each), seed {seed}")
    print(f"answered: {answered} ({100 * answered / max(total, 1):.1f} %)")
    for cls, (n, message, shown) in sorted(run.outcomes.items(), key=lambda kv: -kv[1][0]):
        if cls != "answered":
            print(f"  {cls:16s} {n:6d}  e.g. {message[:110]}")
    if run.charged_after_error:
        print("errors raised after the charge (allowed): "
              + ", ".join(f"{k} {v}" for k, v in sorted(run.charged_after_error.items())))
    if run.late_charges:
        print(f"charges the ledger recorded after their statement had failed (a cancel while it waited): "
              f"{run.late_charges}")
    if log_lines and not run.crashes:
        run.failures.append((None, "server log: " + " | ".join(log_lines[:5]), "", None, []))
    elif log_lines:
        print("server log: " + " | ".join(log_lines[:5]))
    if run.failures:
        print(f"\n{len(run.failures)} FAILURES (seed {seed}):")
        for index, what, shown, params, settings in run.failures:
            print(f"- statement {index}: {what}\n    {shown}" + (f"\n    parameters: {params!r}" if params else "")
                  + (f"\n    after: {'; '.join(settings)}" if settings else ""))
        print(f"replay: tests/e2e/fuzz.py PORT <statement + 1> {seed}")
        sys.exit(1)
    print(f"PASS  no internal error, no crash, no charge for a refusal ({total} statements, seed {seed})")


if __name__ == "__main__":
    main()
