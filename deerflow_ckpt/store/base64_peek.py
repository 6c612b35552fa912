"""Base64 images and documents inside stored values, found by their signatures without decoding anything:
the peek `inspect storage` runs over large values (docs/storage-model.md, "Storage and compaction")."""

from __future__ import annotations

import base64
import binascii
import bisect
import hashlib
import re

# The base64 of each file's magic, kept to the characters the magic fixes.
SIGNATURES = (
    (b"iVBORw0KGgo", "png"),
    (b"/9j/", "jpeg"),
    (b"R0lGOD", "gif"),
    (b"UklGR", "webp"),
    (b"JVBERi0", "pdf"),
    (b"UEsDB", "zip"),
)
_DATA_URI = re.compile(rb"data:([a-z]+/[a-z0-9.+-]+);base64,([A-Za-z0-9+/]*={0,2})")
_BASE64_RUN = re.compile(rb"[A-Za-z0-9+/]*={0,2}")
# A run shorter than this is no file worth reporting (a signature in ordinary text, an icon).
MIN_RUN_BYTES = 1024

# (looks_like, start, length) of one base64 file in a value.
Base64File = tuple[str, int, int]


def find_base64_files(data: bytes, msgpack: bool = True) -> list[Base64File]:
    """Each base64 file in `data`. A data URI counts wherever it is; bare base64 only where it is a whole
    string: right after a msgpack str header (`msgpack`), or all of `data` (a JSON string's text)."""
    found: list[Base64File] = []
    # The data URIs' base64 spans, in order and apart (finditer never overlaps): a hit inside one is looked up
    # by bisection, so a value of many URIs costs n log n, not a scan of every span per hit.
    starts: list[int] = []
    ends: list[int] = []
    for match in _DATA_URI.finditer(data):
        starts.append(match.start(2))
        ends.append(match.end(2))
        if len(match.group(2)) >= MIN_RUN_BYTES:
            found.append((f"data-uri {match.group(1).decode()}", match.start(2), len(match.group(2))))
    for signature, kind in SIGNATURES:
        start = data.find(signature)
        while start >= 0:
            span = bisect.bisect_right(starts, start) - 1
            if span < 0 or start >= ends[span]:
                length = _string_length(data, start) if msgpack else (len(data) if start == 0 else None)
                if length is not None:
                    matched = _BASE64_RUN.match(data, start, start + length)
                    size = 0 if matched is None else matched.end() - start
                    if size >= MIN_RUN_BYTES and size == length and _confirms(data[start : start + 24], kind):
                        found.append((kind, start, size))
            start = data.find(signature, start + 1)
    return found


def _string_length(data: bytes, start: int) -> int | None:
    """The length of the msgpack str whose header ends right before `start`, None without one."""
    if start >= 2 and data[start - 2] == 0xD9:
        return data[start - 1]
    if start >= 3 and data[start - 3] == 0xDA:
        return int.from_bytes(data[start - 2 : start], "big")
    if start >= 5 and data[start - 5] == 0xDB:
        return int.from_bytes(data[start - 4 : start], "big")
    return None


def _confirms(head: bytes, kind: str) -> bool:
    """RIFF holds WAV and AVI as well: decode the first 16 characters (12 bytes) and look for WEBP."""
    if kind != "webp":
        return True
    try:
        return base64.b64decode(head[:16], validate=True)[8:12] == b"WEBP"
    except (binascii.Error, ValueError):
        return False


def content_digest(data: bytes, start: int, length: int) -> bytes:
    """A digest of one file's base64 text (blake2b, 16 bytes): equal digests, the same file."""
    return hashlib.blake2b(memoryview(data)[start : start + length], digest_size=16).digest()
