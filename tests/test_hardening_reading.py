"""Hardening II (issue 27), reading: what a crafted row or value made the readers do, tested the way the attack
was made (README, "Security model and limits").

11: a value of many data URIs made inspect storage's base64 peek quadratic (each signature hit checked against
every URI before it).
"""

from __future__ import annotations

import base64
import json
import shutil
import sqlite3
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from deerflow_ckpt.store.base64_peek import (
    _BASE64_RUN,
    _DATA_URI,
    MIN_RUN_BYTES,
    SIGNATURES,
    Base64File,
    _confirms,
    _string_length,
    find_base64_files,
)
from tests.cli import run_ckpt
from tests.conftest import BuiltDatabase

# -- 11: inspect storage's base64 peek is n log n in the data URIs of a value ---------------------------------


def _quadratic_reference(data: bytes, msgpack: bool = True) -> list[Base64File]:
    """find_base64_files as it was before the fix (every hit against every data URI's span): the reference."""
    found: list[Base64File] = []
    covered: list[tuple[int, int]] = []
    for match in _DATA_URI.finditer(data):
        covered.append((match.start(2), match.end(2)))
        if len(match.group(2)) >= MIN_RUN_BYTES:
            found.append((f"data-uri {match.group(1).decode()}", match.start(2), len(match.group(2))))
    for signature, kind in SIGNATURES:
        start = data.find(signature)
        while start >= 0:
            if not any(low <= start < high for low, high in covered):
                length = _string_length(data, start) if msgpack else (len(data) if start == 0 else None)
                if length is not None:
                    matched = _BASE64_RUN.match(data, start, start + length)
                    size = 0 if matched is None else matched.end() - start
                    if size >= MIN_RUN_BYTES and size == length and _confirms(data[start : start + 24], kind):
                        found.append((kind, start, size))
            start = data.find(signature, start + 1)
    return found


def _msgpack_str(text: bytes) -> bytes:
    """`text` behind the msgpack str header the saver writes for its length."""
    if len(text) < 256:
        return b"\xd9" + bytes([len(text)]) + text
    return (
        b"\xda" + len(text).to_bytes(2, "big") if len(text) < 65536 else b"\xdb" + len(text).to_bytes(4, "big")
    ) + text


_PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
# Pieces a stored value is made of: data URIs (short, long, empty, cut), bare base64 strings behind their msgpack
# header, signatures in plain text, and the noise between them.
_PIECES = st.sampled_from(
    [
        b"data:image/png;base64," + _PNG,
        b"data:image/png;base64," + _PNG[:40],
        b"data:image/jpeg;base64,",
        b"data:text/plain;base64," + _PNG[:1500] + b"==",
        _msgpack_str(_PNG),
        _msgpack_str(_PNG[:900]),
        _msgpack_str(b"/9j/" + _PNG[4:]),
        _msgpack_str(b"UklGR" + _PNG[5:]),
        b"iVBORw0KGgo",
        b"JVBERi0 in text",
        b" ",
        b"data:",
    ]
)


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(st.one_of(_PIECES, st.binary(max_size=8)), max_size=30), msgpack=st.booleans())
def test_the_peek_finds_what_the_quadratic_peek_found(pieces: list[bytes], msgpack: bool) -> None:
    data = b"".join(pieces)
    assert find_base64_files(data, msgpack) == _quadratic_reference(data, msgpack)


def _add_data_uri_write(path: Path, count: int) -> int:
    """One messages write through the real SqliteSaver whose message holds `count` PNG data URIs, every
    100th long enough to be reported: how many of them the peek must report."""
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.sqlite import SqliteSaver

    images = []
    for number in range(count):
        # A PNG's magic, then bytes of its own: each image has its own digest.
        image = b"\x89PNG\r\n\x1a\n" + number.to_bytes(4, "big") * (200 if number % 100 == 0 else 10)
        images.append(f"![image {number}](data:image/png;base64,{base64.b64encode(image).decode()})")
    connection = sqlite3.connect(path, check_same_thread=False)
    try:
        (thread_id, checkpoint_id) = connection.execute(
            "SELECT thread_id, max(checkpoint_id) FROM checkpoints WHERE thread_id = 'clean-delta-k1'"
        ).fetchone()
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}}
        saver = SqliteSaver(connection)
        saver.put_writes(config, [("messages", [HumanMessage(content=" ".join(images))])], "task-data-uris")  # type: ignore[arg-type]
        connection.commit()
    finally:
        connection.close()
    return len(range(0, count, 100))


def test_many_data_uris_in_one_value_are_peeked_in_time(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    """40,000 data URIs in one write took 35 s (200,000: killed at 300 s); now well under a second of peeking."""
    path = tmp_path / "data-uris.db"
    shutil.copyfile(built_sqlite.path, path)
    reported = _add_data_uri_write(path, 40_000)
    started = time.monotonic()
    result = run_ckpt("inspect", "storage", "--db", str(path), "--format", "json")
    elapsed = time.monotonic() - started
    assert result.exit_code == 0, result.stderr
    assert elapsed < 20, f"inspect storage took {elapsed:.1f} s"
    large = [value for value in json.loads(result.stdout)["large_values"] if value["thread_id"] == "clean-delta-k1"]
    # Every long URI, each once (its own digest), in the write it was put in; the short ones are not reported.
    assert len(large) == reported == len({value["digest"] for value in large})
    assert {(v["looks_like"], v["stored_in"], v["channel"], v["copies"]) for v in large} == {
        ("data-uri image/png", "writes", "messages", 1)
    }
