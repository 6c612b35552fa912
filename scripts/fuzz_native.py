"""Feed the compiled judge damaged real rows and random edits in exact-size buffers (see fuzz-native.sh).

Run under AddressSanitizer, a read past a buffer's end lands outside its allocation and aborts the run.
"""

from __future__ import annotations

import array
import random
import sqlite3
import sys
import time
from pathlib import Path

from deerflow_ckpt import native


def main(database: str, seconds: float) -> None:
    connection = sqlite3.connect(Path(database).resolve().as_uri() + "?mode=ro", uri=True)
    seeds = [row[0] for row in connection.execute("SELECT checkpoint FROM checkpoints LIMIT 300")]
    seeds += [row[0] for row in connection.execute("SELECT value FROM writes WHERE value IS NOT NULL LIMIT 300")]
    seeds += [row[0] for row in connection.execute("SELECT CAST(metadata AS BLOB) FROM checkpoints LIMIT 300")]
    judges = [native.value_summary, native.checkpoint_summary, native.metadata_summary]
    if not seeds or any(judge is None for judge in judges):
        sys.exit("no rows to start from, or the compiled judge is not built")
    rng = random.Random(1)
    inputs = vouched = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(0, 4)):
            at = rng.randrange(len(data) + 1)
            edit = rng.randrange(4)
            if edit == 0 and data:
                data[min(at, len(data) - 1)] = rng.randrange(256)
            elif edit == 1:
                del data[at:]
            elif edit == 2:
                data[at:at] = bytes([rng.randrange(256)])
            else:
                del data[at : at + rng.randrange(8)]
        exact = memoryview(array.array("B", bytes(data)))  # no spare byte after the data, unlike bytes
        for judge in judges:
            vouched += judge(exact) is not None  # type: ignore[misc]
        # holds(): a needle cut from the data (found) or random bytes, in an exact-size buffer of its own.
        start = rng.randrange(len(data) + 1)
        cut = bytes(data[start : start + rng.randrange(12)]) if rng.random() < 0.7 else rng.randbytes(rng.randrange(6))
        needle = memoryview(array.array("B", cut))
        if native.holds(exact, needle) != (cut in bytes(data)):
            sys.exit(f"holds disagrees with bytes.__contains__ on {bytes(data)!r}, {cut!r}")
        inputs += 1
    print(f"{inputs} inputs x {len(judges)} judges and holds, {vouched} summaries, no fault")
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


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 60.0)
