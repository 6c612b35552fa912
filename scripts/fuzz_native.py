"""Feed the compiled judge damaged real rows, json payloads and deep ext chains, with random edits, in
exact-size buffers (see fuzz-native.sh); where it vouches for a value, the Python judge must agree.

Run under AddressSanitizer, a read past a buffer's end lands outside its allocation and aborts the run.
"""

from __future__ import annotations

import array
import json
import random
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import ormsgpack

from deerflow_ckpt import native
from deerflow_ckpt.store import peek
from deerflow_ckpt.store.metadata import metadata_in_python
from deerflow_ckpt.store.records import Problem
from deerflow_ckpt.store.writes import check_typed_bytes

# Types for generated ext chains: trusted ones the compiled judge walks through, and foreign ones.
_CHAIN_TYPES = [
    ("builtins", "frozenset"),
    ("builtins", "set"),
    ("collections", "deque"),
    ("langchain_core.messages.ai", "AIMessage"),
    ("langgraph.types", "Overwrite"),
    ("os", "system"),
    ("langchain_core.utils.utils", "guard_import"),
]
# LangChain objects as json payloads carry them: lc 1 constructors LangGraph revives, lc 2, secrets.
_LC_IDS = [
    ["langchain", "prompts", "prompt", "PromptTemplate"],
    ["langchain", "schema", "messages", "HumanMessage"],
    ["langchain_core", "messages", "ai", "AIMessage"],
    ["uuid", "UUID"],
    ["os", "system"],
]

# An lc 2 object LangGraph revives as Decimal("1"), which equals 1: as an "lc", it makes its object lc 1.
_DECIMAL_ONE = {"lc": 2, "type": "constructor", "id": ["decimal", "Decimal"], "args": ["1"]}


def ext_chain(rng: random.Random) -> bytes:
    """Ext values nested up to twice the Python judge's depth limit, around a call or a plain value."""
    value: Any = ormsgpack.Ext(peek.EXT_CONSTRUCTOR_POS_ARGS, ormsgpack.packb(["os", "system", ["true"]]))
    if rng.random() < 0.5:
        value = rng.choice([[], "text", 7, None])
    for _ in range(rng.randint(1, 2 * peek.MAX_EXT_DEPTH)):
        module, name = rng.choice(_CHAIN_TYPES)
        code = rng.choice([peek.EXT_CONSTRUCTOR_SINGLE_ARG, peek.EXT_PYDANTIC_V2, peek.EXT_DELTA_SNAPSHOT])
        if code == peek.EXT_DELTA_SNAPSHOT:
            value = ormsgpack.Ext(code, ormsgpack.packb([value]))
        else:
            value = ormsgpack.Ext(code, ormsgpack.packb([module, name, value]))
        if rng.random() < 0.1:
            value = [value, "padding"]
    return ormsgpack.packb(value)


def json_payload(rng: random.Random) -> bytes:
    """A json payload holding LangChain objects, plain values, or nesting past what a decoder follows."""
    if rng.random() < 0.1:
        depth = rng.randint(10, 5000)
        return b"[" * depth + b"{}" + b"]" * depth
    value: Any = {"plain": [1, 2.5, "x", None, True]}
    for _ in range(rng.randint(1, 6)):
        lc = rng.choice([1, 2, True, 2.0, "1", _DECIMAL_ONE])
        kind = rng.choice(["constructor", "constructor", "secret", "not_implemented"])
        identifier: Any = rng.choice(_LC_IDS)
        if rng.random() < 0.1:  # an id LangGraph's reviver has rebuilt by the time it reads it
            identifier = rng.choice([_DECIMAL_ONE, [*identifier[:-1], _DECIMAL_ONE]])
        value = {"lc": lc, "type": kind, "id": identifier, "kwargs": {"value": value}}
        if rng.random() < 0.2:
            value = {"__lc_escaped__": value}
    return json.dumps(value).encode()


def damaged(data: bytes, rng: random.Random) -> bytes:
    edited = bytearray(data)
    for _ in range(rng.randint(0, 4)):
        at = rng.randrange(len(edited) + 1)
        edit = rng.randrange(4)
        if edit == 0 and edited:
            edited[min(at, len(edited) - 1)] = rng.randrange(256)
        elif edit == 1:
            del edited[at:]
        elif edit == 2:
            edited[at:at] = bytes([rng.randrange(256)])
        else:
            del edited[at : at + rng.randrange(8)]
    return bytes(edited)


def python_summary(data: bytes) -> tuple[int, int, int] | None:
    """What value_summary may answer for `data`: derived with the Python judge (None: it finds a problem)."""
    decoder = peek.InertDecoder(deep=False)
    try:
        value = decoder.decode(data)
    except peek.UndecodableError:
        return None
    if decoder.untrusted:
        return None
    items = value if type(value) is list else [value]
    names = {(item.module, item.name) for item in items if type(item) is peek.ExtValue}
    flags = (native.OVERWRITE_FLAG if peek.OVERWRITE_TYPE in names else 0) | (
        native.REMOVAL_FLAG if peek.REMOVE_MESSAGE_TYPE in names else 0
    )
    return (1, len(value), flags) if type(value) is list else (0, 0, flags)


def check_agreement(data: bytes, summaries: list[Any]) -> None:
    """The compiled judges vouch only for what the Python path judges clean, and read it the same way."""
    value, checkpoint, metadata = summaries
    if value is not None and value != python_summary(data):
        sys.exit(f"value_summary vouched for {data[:120]!r}, which the Python judge reads otherwise")
    if checkpoint is not None:
        problems: list[Problem] = []
        check_typed_bytes("msgpack", data, "checkpoint", problems, peek.InertDecoder(deep=False))
        if problems:
            sys.exit(f"checkpoint_summary vouched for {data[:120]!r}, where Python finds {problems[0].detail}")
    if metadata is not None:
        problems = []
        if metadata_in_python(data, False, problems) != metadata or problems:
            sys.exit(f"metadata_summary read {data[:120]!r} otherwise than json.loads")
    # The Python judge of every payload type answers with findings, never with an exception.
    for kind in ("json", "msgpack"):
        check_typed_bytes(kind, data, "payload", [], peek.InertDecoder(deep=False))


def main(database: str, seconds: float) -> None:
    connection = sqlite3.connect(Path(database).resolve().as_uri() + "?mode=ro", uri=True)
    seeds = [row[0] for row in connection.execute("SELECT checkpoint FROM checkpoints LIMIT 300")]
    seeds += [row[0] for row in connection.execute("SELECT value FROM writes WHERE value IS NOT NULL LIMIT 300")]
    seeds += [row[0] for row in connection.execute("SELECT CAST(metadata AS BLOB) FROM checkpoints LIMIT 300")]
    judges = [native.value_summary, native.checkpoint_summary, native.metadata_summary]
    if not seeds or any(judge is None for judge in judges):
        sys.exit("no rows to start from, or the compiled judge is not built")
    rng = random.Random(1)
    inputs = vouched = chains = payloads = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        kind = rng.random()
        if kind < 0.15:
            source, chains = ext_chain(rng), chains + 1
        elif kind < 0.3:
            source, payloads = json_payload(rng), payloads + 1
        else:
            source = rng.choice(seeds)
        data = damaged(source, rng)
        exact = memoryview(array.array("B", data))  # no spare byte after the data, unlike bytes
        summaries = [judge(exact) for judge in judges]  # type: ignore[misc]
        vouched += sum(summary is not None for summary in summaries)
        check_agreement(data, summaries)
        # holds(): a needle cut from the data (found) or random bytes, in an exact-size buffer of its own.
        start = rng.randrange(len(data) + 1)
        cut = bytes(data[start : start + rng.randrange(12)]) if rng.random() < 0.7 else rng.randbytes(rng.randrange(6))
        needle = memoryview(array.array("B", cut))
        if native.holds(exact, needle) != (cut in data):
            sys.exit(f"holds disagrees with bytes.__contains__ on {data!r}, {cut!r}")
        inputs += 1
    print(
        f"{inputs} inputs ({chains} ext chains, {payloads} json payloads) x {len(judges)} judges and holds, "
        f"{vouched} summaries, each agreeing with the Python judge, no fault"
    )
    stream_whole(database)


def stream_whole(database: str) -> None:
    """Read the whole database through the compiled SQLite reader, as a scan does."""
    from deerflow_ckpt.store.selection import ALL_THREADS
    from deerflow_ckpt.store.source import SqliteTarget
    from deerflow_ckpt.store.sqlite import SqliteCheckpointReader

    if native.open_lineages is None:
        sys.exit("the compiled SQLite reader is not built")
    reader = SqliteCheckpointReader(SqliteTarget(Path(database)))
    checkpoints = sum(len(lineage.records) for lineage in reader.lineages(ALL_THREADS))
    print(f"streamed {checkpoints} checkpoints through the compiled reader, no fault")
    # As verify-shape --deep reads: each lineage's messages rows handed over as well.
    reader = SqliteCheckpointReader(SqliteTarget(Path(database)), messages_rows=True)
    handed = 0
    for lineage in reader.lineages(ALL_THREADS):
        rows = lineage.messages_rows.take() if lineage.messages_rows is not None else None
        handed += len(rows[0]) + len(rows[1]) if rows is not None else 0
    print(f"streamed it again with {handed} messages rows handed over, no fault")


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 60.0)
