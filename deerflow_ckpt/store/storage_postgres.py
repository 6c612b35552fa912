"""Where a Postgres checkpoint store's bytes are (`ckpt inspect storage`), read in one READ ONLY transaction.

Every figure is SQL over the catalog, the statistics views, row counts and stored lengths: `pg_column_size` (as
stored, after compression) and `octet_length` (raw) read the heap's TOAST pointers, never the TOAST
tables. A value inline in the checkpoint JSONB is compressed with the whole column: its stored bytes are
its share (by text length) of the column's stored size. Only two passes read value bytes, both only with
`StorageRequest.channels`: the large-value peek (`position()` on values of at least
`StorageRequest.large_value_bytes`, server-side, the hits' bytes confirmed here by their signature) and
the tool-output pass (`messages` blobs and writes that hold ToolMessage's module name, their items' types
read here, store/messages.py). Nothing is decoded with LangGraph's serializer.

Rows are count(*) (36 ms on 45,000 checkpoints, 7x the statistics read it replaces, about 1% of the
read); dead rows come from pgstattuple where installed, else from the statistics only where they are
current (`_dead_rows`, docs/storage-model.md): a restored copy's or reset statistics miss rows.

Aggregates are taken per table before anything is joined: ckpt cannot ANALYZE, and a never-analysed
table (reltuples -1) turns a join of raw rows into a very bad plan. Relations are found through
pg_class and pg_namespace, and every table is privilege-checked before it is read, since an error
(to_regclass on a schema without USAGE, a SELECT without privilege) aborts the read-only transaction:
what cannot be read is said in `StorageFacts.notes`.

Cost (45,000 checkpoints, 300 threads, 131 MB database, warm, 2 CPUs shared with another benchmark): 1.16 s
for the whole process against 0.89 s for `ckpt verify-shape` (1.30x, median of 7 pairs), 51 MiB peak. Most
of it is the server's: growth's first-version aggregate (jsonb_each_text over every checkpoint's
channel_versions, to date each blob) and the two passes that detoast values (the `messages` blobs for tool
outputs, the large values for the base64 peek).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from deerflow_ckpt.dataclass import dataclass
from deerflow_ckpt.errors import StoreError
from deerflow_ckpt.redact import redact
from deerflow_ckpt.store.base64_peek import content_digest, find_base64_files
from deerflow_ckpt.store.clock import HOUR_NS, TIMED_ID_SQL, hour_sql, write_time_ns
from deerflow_ckpt.store.messages import TOOL_MESSAGE_MARKER, tool_outputs
from deerflow_ckpt.store.postgres import connect
from deerflow_ckpt.store.source import PostgresTarget
from deerflow_ckpt.store.storage import (
    TOOL_OUTPUTS,
    AppThreads,
    Bucket,
    ChannelBytes,
    DeadRowsSource,
    LargeValue,
    PostgresDatabase,
    Relation,
    StorageFacts,
    StorageRequest,
    StoredIn,
    ThreadBytes,
    WriteTimes,
)

CHECKPOINTS, BLOBS, WRITES, MIGRATIONS = "checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations"
RELATIONS = (CHECKPOINTS, BLOBS, WRITES, MIGRATIONS)
APP_TABLE = "threads_meta"
MESSAGES = "messages"
# The app table is looked for in these schemas after the checkpoints' own (DeerFlow's app tables live
# wherever its connection's search path puts them, public by default).
APP_FALLBACK_SCHEMA = "public"


def _timed_sql(column: str) -> str:
    """The id in `column` carries a write time: write_time_ns's test (store/clock.py)."""
    return f"length({column}) = 36 AND {column} ~ '{TIMED_ID_SQL}'"


# A checkpoint's JSONB object at `key`, NULL when it is anything else (jsonb_each raises on a non-object).
_OBJECT_SQL = "CASE WHEN jsonb_typeof(c.checkpoint->'{key}') = 'object' THEN c.checkpoint->'{key}' END"
_CHECKPOINT_BYTES_SQL = "coalesce(pg_column_size(c.checkpoint), 0) + coalesce(pg_column_size(c.metadata), 0)"

# The signatures the server looks for, as the base64 of a file's magic (or a data URI's marker).
_SERVER_PATTERNS = (";base64,", "iVBORw0KGgo", "/9j/", "R0lGOD", "UklGR", "JVBERi0", "UEsDB")


@dataclass(frozen=True)
class _Table:
    name: str
    oid: int
    readable: bool


def read_postgres_storage(target: PostgresTarget, request: StorageRequest) -> StorageFacts:
    """The storage facts of the checkpoint tables at `target` (its schema, or the first on the search path
    holding `checkpoints`), read in one READ ONLY transaction that is rolled back."""
    import psycopg

    connection = connect(target)
    try:
        facts = _Reader(connection, target, request).read()
        connection.rollback()
        return facts
    except psycopg.Error as exc:
        raise StoreError(f"reading storage of {target.describe()} failed: {redact(str(exc)).strip()}") from None
    finally:
        connection.close()


class _Reader:
    def __init__(self, connection: Any, target: PostgresTarget, request: StorageRequest) -> None:
        self.connection = connection
        self.target = target
        self.request = request
        self.facts = StorageFacts(database=target.describe(), backend="postgres")
        self.schema = ""
        # The schema threads_meta was found in (the checkpoints', the search path's, or public).
        self.app_schema = ""
        self.tables: dict[str, _Table] = {}
        self._usage = True

    def read(self) -> StorageFacts:
        self.schema = self._schema()
        self.tables = self._tables()
        self.facts.postgres = self._database()
        self.facts.relations = self._relations()
        unreadable = [name for name in (CHECKPOINTS, BLOBS, WRITES) if not self._readable(name)]
        if unreadable:
            reason = (
                f"no USAGE privilege on schema {self.schema}"
                if not self._usage
                else f"no SELECT privilege on {', '.join(f'{self.schema}.{name}' for name in unreadable)}"
            )
            self.facts.rows_unread = reason
            self.facts.notes.append(
                f"{reason}: bytes by thread, channel and time, large values and orphans are not read"
            )
            return self.facts
        totals = self._thread_totals()
        self.facts.metadata_bytes = sum(row.metadata for row in totals.values())
        ranked = sorted(totals.values(), key=lambda row: (-row.bytes, row.thread_id))
        self.facts.heaviest = [row.thread_bytes() for row in ranked[: max(self.request.top, 0)]]
        self._growth([row.thread_id for row in self.facts.heaviest])
        if self.request.channels:
            checkpoint_bytes = sum(row.checkpoint for row in totals.values())
            self._channels(checkpoint_bytes)
            self.facts.large_values = self._large_values()
        self.facts.app = self._app_threads(totals)
        return self.facts

    # -- where the tables are, and what this role may read ------------------------------------------------

    def _one(self, query: Any, parameters: Iterable[Any] = ()) -> Any:
        with self.connection.cursor() as cursor:
            cursor.execute(query, tuple(parameters))
            return cursor.fetchone()

    def _all(self, query: Any, parameters: Iterable[Any] = ()) -> list[Any]:
        with self.connection.cursor() as cursor:
            cursor.execute(query, tuple(parameters))
            rows: list[Any] = cursor.fetchall()
            return rows

    def _schema(self) -> str:
        if self.target.schema:
            return self.target.schema
        # The effective search path lists only schemas this role may use, in order: never to_regclass,
        # which raises (and aborts the transaction) on a schema without USAGE.
        row = self._one(
            "SELECT s.name FROM unnest(current_schemas(false)) WITH ORDINALITY AS s(name, position) "
            "JOIN pg_namespace n ON n.nspname = s.name "
            "JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = %s AND c.relkind IN ('r', 'p') "
            "ORDER BY s.position LIMIT 1",
            (CHECKPOINTS,),
        )
        if row is not None:
            return str(row[0])
        # A schema on the search path that holds the tables but that this role may not use is left out of
        # current_schemas: it is the store, unreadable (the read says so), not a missing one.
        unusable = self._one(
            "SELECT n.nspname FROM unnest(%s::text[]) WITH ORDINALITY AS s(name, position) "
            "JOIN pg_namespace n ON n.nspname = s.name "
            "JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = %s AND c.relkind IN ('r', 'p') "
            "WHERE NOT has_schema_privilege(n.oid, 'USAGE') ORDER BY s.position LIMIT 1",
            (self._search_path(), CHECKPOINTS),
        )
        if unusable is not None:
            return str(unusable[0])
        raise StoreError(f"no {CHECKPOINTS} table in the search path: not a LangGraph Postgres checkpoint database")

    def _search_path(self) -> list[str]:
        """The search_path setting's schema names as written ($user made the role's name)."""
        row = self._one("SELECT current_setting('search_path'), current_user")
        setting, user = str(row[0]), str(row[1])
        names = []
        for part in setting.split(","):
            name = part.strip()
            if len(name) >= 2 and name[0] == name[-1] == '"':
                name = name[1:-1].replace('""', '"')
            names.append(user if name == "$user" else name)
        return names

    def _tables(self) -> dict[str, _Table]:
        rows = self._all(
            "SELECT c.relname, c.oid::bigint, has_schema_privilege(n.oid, 'USAGE'), "
            "has_table_privilege(c.oid, 'SELECT') FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = ANY(%s) AND c.relkind IN ('r', 'p')",
            (self.schema, list(RELATIONS)),
        )
        self._usage = all(bool(row[2]) for row in rows) if rows else True
        found = {
            str(name): _Table(str(name), int(oid), bool(usage) and bool(select)) for name, oid, usage, select in rows
        }
        for name in (CHECKPOINTS, BLOBS, WRITES):
            if name not in found:
                raise StoreError(
                    f"no {name} table in schema {self.schema}: not a LangGraph Postgres checkpoint database"
                )
        app = self._app_table()
        if app is not None:
            found[APP_TABLE] = app
        return found

    def _app_table(self) -> _Table | None:
        """DeerFlow's threads_meta in the same database: in the checkpoints' schema, else the first schema of
        the search path, else public, that holds one (`app_schema` names it); readable as the others are."""
        candidates = [self.schema, *(name for name in self._search_path() if name != self.schema)]
        if APP_FALLBACK_SCHEMA not in candidates:
            candidates.append(APP_FALLBACK_SCHEMA)
        row = self._one(
            "SELECT n.nspname, c.oid::bigint, has_schema_privilege(n.oid, 'USAGE') "
            "AND has_table_privilege(c.oid, 'SELECT') "
            "FROM unnest(%s::text[]) WITH ORDINALITY AS s(name, position) "
            "JOIN pg_namespace n ON n.nspname = s.name "
            "JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = %s AND c.relkind IN ('r', 'p') "
            "ORDER BY s.position LIMIT 1",
            (candidates, APP_TABLE),
        )
        if row is None:
            return None
        self.app_schema = str(row[0])
        return _Table(APP_TABLE, int(row[1]), bool(row[2]))

    def _readable(self, name: str) -> bool:
        table = self.tables.get(name)
        return table is not None and table.readable

    def _sql(self, text: str, schema: str | None = None, **names: str) -> str:
        """`text` with each {key} replaced by the quoted table `names[key]` in `schema` (the checkpoints'
        by default), and nothing else: SQL keeps its own braces."""
        from psycopg import sql

        for key, name in names.items():
            identifier = sql.Identifier(schema or self.schema, name)
            text = text.replace("{" + key + "}", identifier.as_string(self.connection))
        return text

    # -- the database and its relations --------------------------------------------------------------

    def _database(self) -> PostgresDatabase:
        import psycopg

        database_bytes = 0
        try:
            with self.connection.transaction():  # a savepoint: CONNECT can be revoked from a connected role
                row = self._one("SELECT pg_database_size(current_database())")
                database_bytes = int(row[0])
        except psycopg.errors.InsufficientPrivilege:
            self.facts.notes.append("no CONNECT privilege on the database: its size is not read")
        settings = dict(
            self._all(
                "SELECT name, setting FROM pg_settings WHERE name IN "
                "('autovacuum', 'autovacuum_vacuum_threshold', 'autovacuum_vacuum_scale_factor')"
            )
        )
        autovacuum = settings.get("autovacuum")
        threshold = settings.get("autovacuum_vacuum_threshold")
        scale = settings.get("autovacuum_vacuum_scale_factor")
        # backend_xmin is visible for every session, whoever owns it; ours is left out.
        xmin = self._one(
            "SELECT coalesce(max(age(backend_xmin)), 0) FROM pg_stat_activity "
            "WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid()"
        )
        reset = self._one("SELECT stats_reset FROM pg_stat_database WHERE datname = current_database()")
        return PostgresDatabase(
            database_bytes=database_bytes,
            stats_reset=None if reset is None else _iso(reset[0]),
            autovacuum=None if autovacuum is None else autovacuum == "on",
            vacuum_threshold=None if threshold is None else int(threshold),
            vacuum_scale_factor=None if scale is None else float(scale),
            oldest_xmin_age=None if xmin is None else int(xmin[0]),
        )

    def _relations(self) -> list[Relation]:
        # Catalog functions and statistics views: readable without SELECT on the tables.
        rows = self._all(
            "SELECT c.relname, pg_total_relation_size(c.oid), pg_indexes_size(c.oid), "
            "coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0), "
            "s.n_live_tup, s.n_dead_tup, s.n_tup_ins, s.last_vacuum, s.last_autovacuum, s.last_analyze, "
            "s.last_autoanalyze FROM pg_class c LEFT JOIN pg_stat_all_tables s ON s.relid = c.oid "
            "WHERE c.oid = ANY(%s)",
            ([table.oid for name, table in self.tables.items() if name in RELATIONS],),
        )
        by_name = {str(row[0]): row for row in rows}
        counts = self._row_counts([name for name in RELATIONS if name in by_name and self._readable(name)])
        dead_by_pages = self._pgstattuple_dead_rows([name for name in RELATIONS if name in by_name])
        stats_reset = self.facts.postgres.stats_reset if self.facts.postgres is not None else None
        relations: list[Relation] = []
        for name in RELATIONS:
            row = by_name.get(name)
            if row is None:
                continue
            _, total, indexes, toast, live, dead, inserted, vacuum, autovacuum, analyze, autoanalyze = row
            statistics = None if live is None else _Statistics(
                int(live), int(dead or 0), int(inserted or 0),
                max(filter(None, (vacuum, autovacuum, analyze, autoanalyze)), default=None),
            )  # fmt: skip
            count = counts.get(name)
            heap = int(total) - int(indexes) - int(toast)
            dead_rows, source, unknown = _dead_rows(dead_by_pages.get(name), statistics, count, heap, stats_reset)
            relations.append(
                Relation(
                    name=name,
                    bytes=int(total),
                    rows=count if count is not None else (statistics.live if statistics else 0),
                    rows_exact=count is not None,
                    statistics_rows=None if statistics is None else statistics.live,
                    index_bytes=int(indexes),
                    toast_bytes=int(toast),
                    dead_rows=dead_rows,
                    dead_rows_source=source,
                    dead_rows_unknown=unknown,
                    last_vacuum=_iso(vacuum),
                    last_autovacuum=_iso(autovacuum),
                    last_analyze=_iso(analyze),
                    last_autoanalyze=_iso(autoanalyze),
                )
            )
        return relations

    def _row_counts(self, names: list[str]) -> dict[str, int]:
        """count(*) of each table in this transaction's snapshot (the statistics' n_live_tup is an estimate,
        and zero on a restored copy or after pg_stat_reset)."""
        if not names:
            return {}
        keys = {f"t{index}": name for index, name in enumerate(names)}
        query = self._sql("SELECT " + ", ".join(f"(SELECT count(*) FROM {{{key}}})" for key in keys), **keys)
        row = self._one(query)
        return {name: int(value) for name, value in zip(names, row, strict=True)}

    def _pgstattuple_dead_rows(self, names: list[str]) -> dict[str, int]:
        """Dead rows read from the pages by pgstattuple_approx (exact for dead rows: it reads every page the
        visibility map does not mark all-visible), where the extension is installed and this role may run
        it; {} otherwise. Each call in a savepoint: a refusal must not abort the read-only transaction."""
        import psycopg

        # Looked up through pg_proc: has_function_privilege raises (and aborts the transaction) on a name
        # that does not exist.
        row = self._one(
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
            "JOIN pg_proc p ON p.pronamespace = n.oid AND p.proname = 'pgstattuple_approx' "
            "AND p.proargtypes = '2205'::oidvector "  # (regclass)
            "WHERE e.extname = 'pgstattuple' AND has_schema_privilege(n.oid, 'USAGE') "
            "AND has_function_privilege(p.oid, 'EXECUTE') LIMIT 1"
        )
        if row is None:
            return {}
        from psycopg import sql

        function = sql.Identifier(str(row[0]), "pgstattuple_approx").as_string(self.connection)
        dead: dict[str, int] = {}
        for name in names:
            try:
                with self.connection.transaction():
                    found = self._one(
                        f"SELECT dead_tuple_count FROM {function}(%s::oid::regclass)", (self.tables[name].oid,)
                    )
            except psycopg.Error as exc:
                self.facts.notes.append(f"pgstattuple could not read {self.schema}.{name}: {redact(str(exc)).strip()}")
                continue
            dead[name] = int(found[0])
        return dead

    # -- bytes by thread and by time -----------------------------------------------------------------

    def _thread_totals(self) -> dict[str, _ThreadTotal]:
        timed = _timed_sql("c.checkpoint_id")
        query = self._sql(
            "SELECT thread_id, sum(n), sum(ckpt), sum(meta), sum(blob), sum(write), min(first_id), max(last_id) "
            "FROM ("
            f" SELECT c.thread_id, count(*) AS n, sum({_CHECKPOINT_BYTES_SQL}) AS ckpt,"
            "  sum(coalesce(pg_column_size(c.metadata), 0)) AS meta, 0 AS blob, 0 AS write,"
            f"  min(CASE WHEN {timed} THEN c.checkpoint_id END) AS first_id,"
            f"  max(CASE WHEN {timed} THEN c.checkpoint_id END) AS last_id"
            "  FROM {checkpoints} c GROUP BY 1"
            " UNION ALL SELECT thread_id, 0, 0, 0, sum(coalesce(pg_column_size(blob), 0)), 0, NULL, NULL"
            "  FROM {blobs} GROUP BY 1"
            " UNION ALL SELECT thread_id, 0, 0, 0, 0, sum(coalesce(pg_column_size(blob), 0)), NULL, NULL"
            "  FROM {writes} GROUP BY 1"
            ") x GROUP BY thread_id",
            checkpoints=CHECKPOINTS,
            blobs=BLOBS,
            writes=WRITES,
        )
        totals: dict[str, _ThreadTotal] = {}
        for thread_id, count, ckpt, meta, blob, write, first_id, last_id in self._all(query):
            totals[thread_id] = _ThreadTotal(
                str(thread_id), int(count), int(ckpt), int(meta), int(blob), int(write), first_id, last_id
            )
        return totals

    def _growth(self, heaviest: list[str]) -> None:
        """Bytes written per hour, for the store and each of the `heaviest` threads, in one pass.

        A checkpoint's and a write's hour is their checkpoint id's; a blob's is the first checkpoint's that
        names its (channel, version). Blobs no checkpoint names have no hour: counted apart, rows and bytes."""
        versions = _OBJECT_SQL.format(key="channel_versions")
        query = self._sql(
            "SELECT hour, top, kind, sum(n), sum(bytes) FROM ("
            f" SELECT {hour_sql('c.checkpoint_id')} AS hour,"
            "  CASE WHEN c.thread_id = ANY(%(top)s) THEN c.thread_id END AS top, 'c' AS kind,"
            f"  count(*) AS n, sum({_CHECKPOINT_BYTES_SQL}) AS bytes FROM {{checkpoints}} c GROUP BY 1, 2"
            f" UNION ALL SELECT {hour_sql('w.checkpoint_id')},"
            "  CASE WHEN w.thread_id = ANY(%(top)s) THEN w.thread_id END, 'w', 0,"
            "  sum(coalesce(pg_column_size(w.blob), 0)) FROM {writes} w GROUP BY 1, 2"
            f" UNION ALL SELECT {hour_sql('f.first_id')},"
            "  CASE WHEN b.thread_id = ANY(%(top)s) THEN b.thread_id END,"
            "  CASE WHEN f.first_id IS NULL THEN 'u' ELSE 'b' END, count(*),"
            "  sum(coalesce(pg_column_size(b.blob), 0)) FROM {blobs} b"
            "  LEFT JOIN (SELECT c.thread_id, c.checkpoint_ns, v.key AS channel, v.value AS version,"
            "        min(c.checkpoint_id) AS first_id"
            f"        FROM {{checkpoints}} c, jsonb_each_text({versions}) v GROUP BY 1, 2, 3, 4) f"
            "   USING (thread_id, checkpoint_ns, channel, version)"
            "  GROUP BY 1, 2, 3"
            ") x GROUP BY 1, 2, 3",
            checkpoints=CHECKPOINTS,
            blobs=BLOBS,
            writes=WRITES,
        )
        store: dict[int, list[int]] = {}
        times = {thread_id: WriteTimes() for thread_id in heaviest}
        slots: dict[str, dict[int, list[int]]] = {thread_id: {} for thread_id in heaviest}
        with self.connection.cursor() as cursor:
            cursor.execute(query, {"top": heaviest})
            for hour, top, kind, count, size in cursor:
                count, size = int(count), int(size or 0)
                for target, hours in ((self.facts.growth, store), *([(times[top], slots[top])] if top else [])):
                    if kind == "u":
                        target.unnamed_blob_rows += count
                        target.unnamed_blob_bytes += size
                    elif hour is None:
                        target.untimed_checkpoints += count if kind == "c" else 0
                        target.untimed_bytes += size
                    else:
                        slot = hours.setdefault(int(hour) * HOUR_NS, [0, 0])
                        slot[0] += count if kind == "c" else 0
                        slot[1] += size
        self.facts.growth.hours = _buckets(store)
        for thread_id, thread_times in times.items():
            thread_times.hours = _buckets(slots[thread_id])
        # Postgres keys are text: a heaviest thread's shown id is its key.
        ranked = self.facts.heaviest
        self.facts.heaviest_growth = {i: times[t.thread_id] for i, t in enumerate(ranked) if t.thread_id in times}

    # -- bytes by channel ----------------------------------------------------------------------------

    def _channels(self, checkpoint_bytes: int) -> None:
        channels: list[ChannelBytes] = []
        for stored_in, table in ((StoredIn.BLOBS, BLOBS), (StoredIn.WRITES, WRITES)):
            query = self._sql(
                "SELECT channel, count(*), sum(coalesce(pg_column_size(blob), 0)),"
                " sum(coalesce(octet_length(blob), 0)) FROM {table} GROUP BY channel",
                table=table,
            )
            rows = [ChannelBytes(stored_in, str(ch), int(n), int(s), int(r)) for ch, n, s, r in self._all(query)]
            channels += self._split_tool_outputs(stored_in, table, rows)
        # Inline values (None, strings, numbers, the snapshot marker) live in the checkpoint's JSONB, which is
        # stored (and compressed) as a whole: a value's stored bytes are its share, by text length, of its
        # checkpoint's stored size (floored per value); its text is its size before compression.
        # Bigint arithmetic floors exactly (sizes are far below its range), and the text of a checkpoint is
        # made only for the checkpoints that hold inline values.
        query = self._sql(
            "SELECT kv.key, count(*),"
            " sum(pg_column_size(c.checkpoint)::bigint * octet_length(kv.value::text)"
            "     / octet_length(c.checkpoint::text)),"
            " sum(octet_length(kv.value::text))"
            f" FROM {{checkpoints}} c, jsonb_each({_OBJECT_SQL.format(key='channel_values')}) kv GROUP BY kv.key",
            checkpoints=CHECKPOINTS,
        )
        inline = [
            ChannelBytes(StoredIn.CHECKPOINTS, str(ch), int(n), int(s), int(r)) for ch, n, s, r in self._all(query)
        ]
        channels += inline
        self.facts.channels = sorted(channels, key=lambda c: (-c.bytes, c.stored_in, c.label))
        inline_bytes = sum(channel.bytes for channel in inline)
        self.facts.checkpoint_rest_bytes = checkpoint_bytes - self.facts.metadata_bytes - inline_bytes

    def _split_tool_outputs(self, stored_in: StoredIn, table: str, rows: list[ChannelBytes]) -> list[ChannelBytes]:
        """The messages row without its ToolMessage items, and those items as a row of their own: stored
        bytes are each value's stored size apportioned by the items' share of its raw bytes (floored)."""
        messages = next((row for row in rows if row.channel == MESSAGES), None)
        if messages is None:
            return rows
        marker = "\\x" + TOOL_MESSAGE_MARKER.hex()
        query = self._sql(
            "SELECT stored, value FROM (SELECT pg_column_size(blob) AS stored, blob || ''::bytea AS value"
            f" FROM {{table}} WHERE channel = %s OFFSET 0) s WHERE position('{marker}'::bytea IN value) > 0",
            table=table,
        )
        items = stored = raw = 0
        # A server-side cursor: only values that name the module cross the wire, a few at a time.
        with self.connection.cursor(name=f"ckpt_tools_{stored_in}", binary=True) as cursor:
            cursor.itersize = 16
            cursor.execute(query, (MESSAGES,))
            for value_stored, value in cursor:
                data = bytes(value)
                count, size = tool_outputs(data)
                if count:
                    items += count
                    raw += size
                    stored += int(value_stored) * size // len(data)
        if not items:
            return rows
        rest = ChannelBytes(stored_in, MESSAGES, messages.values, messages.bytes - stored, messages.raw_bytes - raw)
        tools = ChannelBytes(stored_in, MESSAGES, items, stored, raw, part=TOOL_OUTPUTS)
        return [row for row in rows if row is not messages] + [rest, tools]

    # -- large values ---------------------------------------------------------------------------------

    def _large_values(self) -> list[LargeValue]:
        """Values of at least request.large_value_bytes holding a base64 signature: found by position() on
        the server (which reads only those values), confirmed here on the hits' bytes."""
        threshold = self.request.large_value_bytes
        # position() on the detoasted copy the subquery materialises: each test would detoast again.
        patterns = " OR ".join(f"position('{pattern}'::bytea IN value) > 0" for pattern in _SERVER_PATTERNS)
        found: list[LargeValue] = []
        blobs = self._sql(
            "SELECT thread_id, checkpoint_ns, channel, value,"
            " (SELECT min(c.checkpoint_id) FROM {checkpoints} c WHERE c.thread_id = s.thread_id"
            "   AND c.checkpoint_ns = s.checkpoint_ns AND c.checkpoint->'channel_versions'->>s.channel = s.version)"
            " FROM (SELECT thread_id, checkpoint_ns, channel, version, blob || ''::bytea AS value FROM {blobs}"
            f"       WHERE octet_length(blob) >= %s OFFSET 0) s WHERE {patterns}",
            checkpoints=CHECKPOINTS,
            blobs=BLOBS,
        )
        writes = self._sql(
            "SELECT thread_id, checkpoint_ns, channel, value, checkpoint_id"
            " FROM (SELECT thread_id, checkpoint_ns, checkpoint_id, channel, blob || ''::bytea AS value"
            f"       FROM {{writes}} WHERE octet_length(blob) >= %s OFFSET 0) s WHERE {patterns}",
            writes=WRITES,
        )
        for stored_in, query in ((StoredIn.BLOBS, blobs), (StoredIn.WRITES, writes)):
            # A server-side cursor: only the hits cross the wire, a few at a time.
            with self.connection.cursor(name=f"ckpt_storage_{stored_in}", binary=True) as cursor:
                cursor.itersize = 8
                cursor.execute(query, (threshold,))
                for thread_id, ns, channel, value, checkpoint_id in cursor:
                    data = bytes(value)
                    for looks_like, start, size in find_base64_files(data, msgpack=True):
                        digest = content_digest(data, start, size).hex()
                        found.append(
                            LargeValue(
                                str(thread_id), ns or "", stored_in, str(channel), looks_like, size, 1, checkpoint_id,
                                digest,
                            )
                        )  # fmt: skip
        # Strings inline in the checkpoints' JSONB: every checkpoint carries the channel's current value.
        strpos = " OR ".join(f"strpos(kv.value #>> '{{}}', '{pattern}') > 0" for pattern in _SERVER_PATTERNS)
        inline = self._sql(
            "SELECT c.thread_id, c.checkpoint_ns, kv.key, kv.value #>> '{}', count(*), min(c.checkpoint_id)"
            f" FROM {{checkpoints}} c, jsonb_each({_OBJECT_SQL.format(key='channel_values')}) kv"
            f" WHERE jsonb_typeof(kv.value) = 'string' AND octet_length(kv.value #>> '{{}}') >= %s AND ({strpos})"
            " GROUP BY 1, 2, 3, 4",
            checkpoints=CHECKPOINTS,
        )
        for thread_id, ns, channel, text, copies, checkpoint_id in self._all(inline, (threshold,)):
            data = str(text).encode()
            for looks_like, start, size in find_base64_files(data, msgpack=False):
                found.append(
                    LargeValue(
                        str(thread_id), ns or "", StoredIn.CHECKPOINTS, str(channel), looks_like, size, int(copies),
                        checkpoint_id, content_digest(data, start, size).hex(),
                    )
                )  # fmt: skip
        return sorted(found, key=lambda v: (-v.bytes * v.copies, v.thread_id, v.channel, v.checkpoint_id or ""))

    # -- the app's threads ----------------------------------------------------------------------------

    def _app_threads(self, totals: dict[str, _ThreadTotal]) -> AppThreads | None:
        """The threads with stored rows (checkpoints, blobs or writes) that threads_meta does not know, and
        its rows that have none: the same count as on SQLite."""
        table = self.tables.get(APP_TABLE)
        if table is None:
            return None
        qualified = f"{self.app_schema}.{APP_TABLE}"
        if not table.readable:
            self.facts.notes.append(
                f"no SELECT privilege on {qualified} (or no USAGE on its schema): orphan threads are not counted"
            )
            return None
        columns = {row[0] for row in self._all(
            "SELECT attname FROM pg_attribute WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped", (table.oid,)
        )}  # fmt: skip
        if "thread_id" not in columns:
            self.facts.notes.append(f"{qualified} has no thread_id column: orphan threads are not counted")
            return None
        query = self._sql("SELECT thread_id FROM {app}", schema=self.app_schema, app=APP_TABLE)
        known = {str(row[0]) for row in self._all(query)}
        orphans = sorted(
            (total for thread_id, total in totals.items() if thread_id not in known),
            key=lambda total: (-total.bytes, total.thread_id),
        )
        return AppThreads(
            table=qualified,
            known=len(known & totals.keys()),
            orphans=tuple(total.thread_bytes() for total in orphans),
            orphan_bytes=sum(total.bytes for total in orphans),
            app_only=len(known - totals.keys()),
        )


@dataclass(frozen=True)
class _ThreadTotal:
    thread_id: str
    checkpoints: int
    checkpoint: int  # checkpoint and metadata columns, as stored
    metadata: int
    blob: int
    write: int
    first_id: str | None
    last_id: str | None

    @property
    def bytes(self) -> int:
        return self.checkpoint + self.blob + self.write

    def thread_bytes(self) -> ThreadBytes:
        return ThreadBytes(
            self.thread_id,
            self.checkpoints,
            self.bytes,
            None if self.first_id is None else write_time_ns(self.first_id),
            None if self.last_id is None else write_time_ns(self.last_id),
        )


# The statistics' live count within this share of the exact count: they saw the table's rows.
STATISTICS_AGREE_SHARE = 0.05


@dataclass(frozen=True)
class _Statistics:
    """A table's pg_stat_all_tables entry: counters, and the last time VACUUM or ANALYZE set them from the
    table itself (None: never, since the statistics began or were reset)."""

    live: int
    dead: int
    inserted: int
    recounted: datetime | None


def _dead_rows(
    by_pages: int | None, statistics: _Statistics | None, count: int | None, heap_bytes: int, stats_reset: str | None
) -> tuple[int | None, DeadRowsSource | None, str | None]:
    """A table's dead rows and where they come from, or None and why they are not known.

    pgstattuple reads them from the pages. The statistics' n_dead_tup counts deletes and updates since the
    statistics began, and VACUUM and ANALYZE set it from the table: it is current only when the statistics
    have seen the table's rows, which the live count (within STATISTICS_AGREE_SHARE of count(*)) and a
    VACUUM or ANALYZE since a reset (or, without a reset, writes counted at all) show. A copy made with
    CREATE DATABASE ... TEMPLATE, pg_restore, pg_stat_reset() or a crash leaves counters that miss rows."""
    if by_pages is not None:
        return by_pages, DeadRowsSource.PGSTATTUPLE, None
    if statistics is None:
        return None, None, "the table has no statistics entry"
    if count is not None and abs(statistics.live - count) > STATISTICS_AGREE_SHARE * count:
        since = f" (statistics reset at {stats_reset})" if stats_reset and statistics.recounted is None else ""
        return None, None, f"the statistics count {statistics.live:,} live rows of {count:,}{since}"
    if statistics.recounted is None:
        if stats_reset is not None:
            return None, None, f"statistics reset at {stats_reset}, no VACUUM or ANALYZE of the table since"
        if statistics.inserted == 0 and heap_bytes > 0:
            return None, None, "the statistics count no write to the table and no VACUUM or ANALYZE of it"
    return statistics.dead, DeadRowsSource.STATISTICS, None


def _buckets(slots: dict[int, list[int]]) -> list[Bucket]:
    return [Bucket(start, count, size) for start, (count, size) in sorted(slots.items())]


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
