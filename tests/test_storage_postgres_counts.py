"""Postgres row counts and dead rows in `inspect storage` where the statistics are wrong: a copy made with
CREATE DATABASE ... TEMPLATE of a database real graphs wrote through PostgresSaver, the same after
pg_stat_reset(), and with pgstattuple installed. Rows are checked against count(*) run here, dead rows
against pgstattuple's full scan run here; advice must not rest on statistics that do not see the rows.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import psycopg
import pytest
from psycopg import sql

from deerflow_ckpt.analysis.storage import Urgency, postgres_advice
from deerflow_ckpt.store.source import postgres_target
from deerflow_ckpt.store.storage import DeadRowsSource, Relation, StorageFacts, StorageRequest
from deerflow_ckpt.store.storage_postgres import read_postgres_storage
from tests.cli import run_ckpt
from tests.conftest import create_database, drop_database, dsn_for
from tests.test_storage_postgres import TABLES, build_image_store

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

SCHEMA = "store"


@dataclass(frozen=True)
class Copies:
    """The database the graphs wrote (`source`) and copies of it (names), all dropped at the end."""

    source: str
    made: list[str]

    def copy(self) -> str:
        """A new database made with CREATE DATABASE ... TEMPLATE source: the files copied, no statistics."""
        name = f"ckpt_copy_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(dsn_for("postgres"), autocommit=True) as conn:
            conn.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(self.source))
            )
        self.made.append(name)
        return name


@pytest.fixture(scope="module")
def copies() -> Iterator[Copies]:
    source = create_database("ckpt_counts_src")
    made = Copies(source, [])
    try:
        build_image_store(dsn_for(source), SCHEMA)  # closes its connections: TEMPLATE needs none open
        yield made
    finally:
        for name in [*made.made, source]:
            drop_database(name)


def admin(dbname: str, text: str) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn_for(dbname), autocommit=True) as conn:
        cursor = conn.execute(text)
        return cursor.fetchall() if cursor.description else []


def read(dbname: str) -> StorageFacts:
    return read_postgres_storage(postgres_target(dsn_for(dbname), SCHEMA), StorageRequest(top=3, channels=False))


def counted(dbname: str) -> dict[str, int]:
    return {table: int(admin(dbname, f"SELECT count(*) FROM {SCHEMA}.{table}")[0][0]) for table in TABLES}  # type: ignore[call-overload]


def dead_advice(facts: StorageFacts) -> list[str]:
    """The advice that states a table's dead rows as a figure (VACUUM advice), not that they are unknown."""
    assert facts.postgres is not None
    advice = postgres_advice(facts.postgres, facts.relations)
    return [a.message for a in advice if a.subject in TABLES and "dead rows not known" not in a.message]


def test_a_template_copy_shows_the_real_rows_and_no_dead_rows_it_cannot_know(copies: Copies) -> None:
    copy = copies.copy()
    facts = read(copy)
    by_name = {relation.name: relation for relation in facts.relations}
    assert {name: relation.rows for name, relation in by_name.items()} == counted(copy)
    assert by_name["checkpoints"].rows > 0 and all(relation.rows_exact for relation in facts.relations)
    # The copy's statistics start empty: they say 0 rows, so nothing they say about dead rows is current.
    assert by_name["checkpoints"].statistics_rows == 0
    for relation in facts.relations:
        if relation.rows:
            assert relation.dead_rows is None and relation.dead_rows_source is None, relation
            assert f"the statistics count 0 live rows of {relation.rows:,}" == relation.dead_rows_unknown
    assert dead_advice(facts) == []
    advice = postgres_advice(facts.postgres, facts.relations)  # type: ignore[arg-type]
    assert any(a.subject == "checkpoints" and a.urgency is Urgency.WATCH and "not known" in a.message for a in advice)


def test_pgstattuple_reads_a_copys_dead_rows_from_the_pages(copies: Copies) -> None:
    copy = copies.copy()
    admin(copy, "CREATE EXTENSION pgstattuple")
    facts = read(copy)
    for relation in facts.relations:
        (full,) = admin(copy, f"SELECT dead_tuple_count FROM pgstattuple('{SCHEMA}.{relation.name}')")[0]
        assert (relation.dead_rows, relation.dead_rows_source) == (full, DeadRowsSource.PGSTATTUPLE), relation.name
    assert {relation.name: relation.rows for relation in facts.relations} == counted(copy)


def test_after_pg_stat_reset_rows_are_real_and_dead_rows_unknown_until_analyze(copies: Copies) -> None:
    copy = copies.copy()
    admin(copy, f"ANALYZE {SCHEMA}.checkpoints")
    wait_for_statistics(copy, lambda: read(copy).relations[0].dead_rows is not None)
    admin(copy, "SELECT pg_stat_reset()")
    wait_for_statistics(copy, lambda: read(copy).postgres.stats_reset is not None)  # type: ignore[union-attr]
    facts = read(copy)
    assert facts.postgres is not None and facts.postgres.stats_reset is not None
    assert {relation.name: relation.rows for relation in facts.relations} == counted(copy)
    checkpoints = facts.relations[0]
    assert checkpoints.name == "checkpoints" and checkpoints.rows > 0 and checkpoints.statistics_rows == 0
    assert checkpoints.dead_rows is None and f"reset at {facts.postgres.stats_reset}" in str(
        checkpoints.dead_rows_unknown
    )
    assert dead_advice(facts) == []
    # ANALYZE counts the table again: its dead rows are known, from the statistics.
    admin(copy, f"ANALYZE {SCHEMA}.checkpoints")
    wait_for_statistics(copy, lambda: read(copy).relations[0].dead_rows is not None)
    again = read(copy).relations[0]
    assert again.dead_rows_source is DeadRowsSource.STATISTICS and again.statistics_rows == again.rows


def test_writes_after_a_reset_give_stale_statistics_and_no_vacuum_advice(copies: Copies) -> None:
    """A thread deleted through the saver after pg_stat_reset(): the statistics count its rows as dead and
    none live (the old reading showed 100% dead and advised on it); the rows are counted, the dead unknown."""
    from langgraph.checkpoint.postgres import PostgresSaver

    copy = copies.copy()
    admin(copy, "SELECT pg_stat_reset()")
    conninfo = psycopg.conninfo.make_conninfo(dsn_for(copy), options=f"-c search_path={SCHEMA}")
    with PostgresSaver.from_conn_string(conninfo) as saver:
        saver.delete_thread("plain-1")
    wait_for_statistics(copy, lambda: (read(copy).relations[0].statistics_rows or 0) == 0 and stats_dead(copy) > 0)
    facts = read(copy)
    checkpoints = facts.relations[0]
    assert checkpoints.rows == counted(copy)["checkpoints"] > 0 and stats_dead(copy) > 0
    assert checkpoints.dead_rows is None and "live rows of" in str(checkpoints.dead_rows_unknown)
    assert dead_advice(facts) == []


def stats_dead(dbname: str) -> int:
    rows = admin(dbname, f"SELECT n_dead_tup FROM pg_stat_all_tables WHERE relid = '{SCHEMA}.checkpoints'::regclass")
    return int(rows[0][0])  # type: ignore[call-overload]


def wait_for_statistics(dbname: str, settled: Callable[[], bool]) -> None:
    """Statistics reach the shared view when a backend goes idle (at most once a second): wait for them."""
    deadline = time.monotonic() + 10
    while not settled():
        assert time.monotonic() < deadline, f"statistics of {dbname} did not settle"
        time.sleep(0.2)


def test_statistics_that_disagree_with_the_count_give_no_dead_rows() -> None:
    """Stale statistics on the reader's rule: 184 live and 24 dead said of a table of 208 rows."""
    from deerflow_ckpt.store.storage_postgres import _dead_rows, _Statistics

    stale = _Statistics(live=184, dead=24, inserted=208, recounted=None)
    assert _dead_rows(None, stale, 208, 8192, None) == (None, None, "the statistics count 184 live rows of 208")
    current = _Statistics(live=208, dead=3, inserted=232, recounted=None)
    assert _dead_rows(None, current, 208, 8192, None) == (3, DeadRowsSource.STATISTICS, None)
    # Within 5% of the count (a busy writer's counters lag): still current.
    assert _dead_rows(None, _Statistics(200, 3, 232, None), 208, 8192, None)[0] == 3
    assert _dead_rows(7, stale, 208, 8192, None) == (7, DeadRowsSource.PGSTATTUPLE, None)
    assert Relation("t", 0, 0).dead_rows is None


def test_the_report_says_what_is_counted_and_what_is_not_known(copies: Copies) -> None:
    copy = copies.copy()
    db = ["--db", dsn_for(copy), "--schema", SCHEMA, "--no-channels"]
    text = run_ckpt("inspect", "storage", *db, "--color", "never")
    assert text.exit_code == 0, text.output
    rows = counted(copy)
    line = next(line for line in text.stdout.splitlines() if line.startswith("checkpoints "))
    assert f" {rows['checkpoints']:,} " in line and "not known" in line
    assert "(rows: count(*) in this read's transaction)" in text.stdout
    assert f"the statistics count 0 live rows of {rows['checkpoints']:,}" in text.stdout
    result = run_ckpt("inspect", "storage", *db, "--format", "json")
    document = json.loads(result.stdout)
    assert document["schema_version"] == 4 and document["postgres"]["stats_reset"] is None
    first = document["relations"][0]
    assert (first["rows"], first["rows_exact"], first["statistics_rows"]) == (rows["checkpoints"], True, 0)
    assert (
        first["dead_rows"] is None and first["dead_rows_source"] is None and "0 live rows" in first["dead_rows_unknown"]
    )


def test_a_table_the_role_cannot_read_shows_the_statistics_estimate_marked(
    copies: Copies, pg_readonly_role: Callable[..., str]
) -> None:
    """The `~` of the text report: rows not readable (no SELECT on checkpoint_writes) are the statistics'
    n_live_tup, marked, and the note under the table names the table; the readable ones stay count(*)."""
    copy = copies.copy()
    admin(copy, f"ANALYZE {SCHEMA}.checkpoint_writes")
    wait_for_statistics(copy, lambda: live_in_statistics(copy, "checkpoint_writes") > 0)
    estimate = live_in_statistics(copy, "checkpoint_writes")
    dsn = pg_readonly_role(dsn_for(copy), SCHEMA)
    role = psycopg.conninfo.conninfo_to_dict(dsn)["user"]
    admin(copy, f'REVOKE SELECT ON {SCHEMA}.checkpoint_writes FROM "{role}"')
    text = run_ckpt("inspect", "storage", "--db", dsn, "--schema", SCHEMA, "--no-channels", "--color", "never")
    assert text.exit_code == 0, text.output
    rows = counted(copy)
    lines = {line.split()[0]: line for line in text.stdout.splitlines() if line.startswith(TABLES)}
    assert f" ~{estimate:,} " in lines["checkpoint_writes"], lines
    for table in ("checkpoints", "checkpoint_blobs"):
        assert f" {rows[table]:,} " in lines[table] and "~" not in lines[table], lines
    assert (
        "(rows: count(*) in this read's transaction, except ~ (the statistics' estimate, the rows not readable): "
        "checkpoint_writes)" in text.stdout
    ), text.stdout
    document = json.loads(
        run_ckpt("inspect", "storage", "--db", dsn, "--schema", SCHEMA, "--no-channels", "--format", "json").stdout
    )
    writes = next(relation for relation in document["relations"] if relation["name"] == "checkpoint_writes")
    assert (writes["rows"], writes["rows_exact"]) == (estimate, False)


def live_in_statistics(dbname: str, table: str) -> int:
    rows = admin(dbname, f"SELECT n_live_tup FROM pg_stat_all_tables WHERE relid = '{SCHEMA}.{table}'::regclass")
    return int(rows[0][0])  # type: ignore[call-overload]
