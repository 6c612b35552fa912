"""The reviewed switch of a Postgres conversion, and the way back: psql scripts ckpt writes and never runs.

DeerFlow finds its checkpoint tables (and its app tables) through `database.postgres_schema`, so the switch
moves tables, not the schema: under an exclusive lock on the live saver tables, it refuses (changing nothing)
if the source's rows are no longer the ones that were converted, then moves the live saver tables into a
backup schema and the converted ones into the live schema, in one transaction.
"""

from __future__ import annotations

from collections.abc import Iterator

from deerflow_ckpt.commands.convert import ConversionReport
from deerflow_ckpt.report.printable import printable
from deerflow_ckpt.store.convert_postgres import (
    DIGEST_SETTINGS,
    RECORD_TABLE,
    backup_schema_name,
    fingerprint_sql,
    quoted,
)

# Waiting behind DeerFlow's own sessions for the exclusive lock: give up rather than stall them for long.
LOCK_TIMEOUT = "10s"


def backup_schema(report: ConversionReport) -> str:
    """Where the switch keeps the tables it replaces."""
    return backup_schema_name(report.output)


def _dollar_quoted(body: str) -> str:
    """`body` between dollar quotes whose tag it does not contain (a schema name may hold any text)."""
    tag, n = "$ckpt$", 0
    while tag in body:
        n += 1
        tag = f"$ckpt{n}$"
    return f"{tag}\n{body}\n{tag}"


def _comment(text: str) -> str:
    return "\n".join(f"-- {printable(line)}" for line in text.splitlines())


def _header(report: ConversionReport, path: str, what: str) -> Iterator[str]:
    yield _comment(
        f"ckpt convert: {what}\n"
        f"database: {report.database}\n"
        f"Review it, stop every DeerFlow process, then run: psql <DSN> -v ON_ERROR_STOP=1 -f {path}"
    )
    yield "\\set ON_ERROR_STOP on"
    yield "BEGIN;"
    yield f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}';"


def _move(tables: tuple[str, ...], source: str, destination: str) -> Iterator[str]:
    for table in tables:
        yield f"ALTER TABLE {quoted(source)}.{quoted(table)} SET SCHEMA {quoted(destination)};"


def swap_script_text(report: ConversionReport, path: str) -> str:
    """Move the converted tables in, guarded by the fingerprint the conversion took of the source."""
    fingerprint = report.fingerprint
    assert fingerprint is not None
    live, tables = fingerprint.schema, fingerprint.tables
    lines = list(
        _header(report, path, f"switch schema {live} to the {report.mode} tables converted into schema {report.output}")
    )
    lines.append(f"LOCK TABLE {', '.join(f'{quoted(live)}.{quoted(t)}' for t in tables)} IN ACCESS EXCLUSIVE MODE;")
    lines.append(f"{DIGEST_SETTINGS};")
    queries = fingerprint_sql(live, tables)
    checks = "\n    OR ".join(
        f"({query}) IS DISTINCT FROM {_literal(fingerprint.digests[table])}"
        for query, table in zip(queries, tables, strict=True)
    )
    record = f"{quoted(report.output)}.{quoted(RECORD_TABLE)}"
    body = (
        f"BEGIN\n  IF NOT EXISTS (SELECT 1 FROM {record} WHERE complete) THEN\n"
        "    RAISE EXCEPTION 'ckpt: the conversion in the target schema did not finish: run ckpt convert --catch-up, "
        "then write the switch again (nothing was changed)';\n  END IF;\n"
        f"  IF {checks} THEN\n"
        "    RAISE EXCEPTION 'ckpt: the source tables changed since they were converted: run ckpt convert "
        "--catch-up, then write the switch again (nothing was changed)';\n  END IF;\nEND"
    )
    lines.append(f"DO {_dollar_quoted(body)};")
    lines.append(f"CREATE SCHEMA {quoted(backup_schema(report))};")
    lines.extend(_move(tables, live, backup_schema(report)))
    lines.extend(_move(tables, report.output, live))
    lines.append("COMMIT;")
    return "\n".join(lines) + "\n"


def swap_back_script(report: ConversionReport, path: str) -> str:
    """Put the replaced tables back, keeping the converted ones in their schema again."""
    fingerprint = report.fingerprint
    assert fingerprint is not None
    live, tables = fingerprint.schema, fingerprint.tables
    lines = list(_header(report, path, f"put back the tables the switch moved to {backup_schema(report)}"))
    lines.append(f"LOCK TABLE {', '.join(f'{quoted(live)}.{quoted(t)}' for t in tables)} IN ACCESS EXCLUSIVE MODE;")
    lines.extend(_move(tables, live, report.output))
    lines.extend(_move(tables, backup_schema(report), live))
    lines.append(f"DROP SCHEMA {quoted(backup_schema(report))};")
    lines.append("COMMIT;")
    return "\n".join(lines) + "\n"


def _literal(text: str) -> str:
    """A string literal (a digest is digits and a colon; doubled quotes keep it one literal regardless)."""
    return "'" + text.replace("'", "''") + "'"
