"""config/dotenv_file.py against python-dotenv 1.2.2 itself, the version DeerFlow's backend/uv.lock pins (the dev
extra installs exactly it; ckpt does not depend on python-dotenv): the same names, values and skipped lines for
generated files, a BOM included, whatever version a user has installed."""

from __future__ import annotations

import logging
import os
from importlib.metadata import version
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deerflow_ckpt.config import dotenv_file

PIECES = ["A", "B", "_1", "=", "'", '"', "\\", "#", " ", "\t", "\n", "\r", "\r\n", "$", "${A}", "${B:-d}", "{", "}"]
PIECES += [":-", "export ", "\ufeff", "x", "é", "n", "\x0b"]


def test_the_oracle_is_deerflows_locked_version() -> None:
    assert version("python-dotenv") == "1.2.2"


def deerflow_dotenv(path: Path, environ: dict[str, str]) -> tuple[dict[str, str | None], list[int]]:
    """What python-dotenv 1.2.2's load_dotenv reads (DotEnv as load_dotenv builds it, main.py:421-428), and the
    lines it logs as unparsable."""
    from dotenv.main import DotEnv

    lines: list[int] = []

    class Lines(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(int(record.args[0]))  # type: ignore[index]

    logger, handler = logging.getLogger("dotenv.main"), Lines()
    logger.addHandler(handler)
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(environ)
    try:
        return dict(DotEnv(path, encoding="utf-8", interpolate=True, override=False).dict()), lines
    finally:
        os.environ.clear()
        os.environ.update(saved)
        logger.removeHandler(handler)


@pytest.mark.slow  # 400 generated files, about 2.5 s
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from(PIECES), max_size=30), environ=st.sampled_from([{}, {"A": "env", "B": ""}]))
def test_generated_files_read_as_python_dotenv_reads_them(
    tmp_path: Path, pieces: list[str], environ: dict[str, str]
) -> None:
    path = tmp_path / ".env"
    path.write_bytes("".join(pieces).encode())
    parsed = dotenv_file.parse(dotenv_file.read_text(path))
    expected, lines = deerflow_dotenv(path, environ)
    assert dotenv_file.interpolate(parsed.bindings, environ) == expected
    assert list(parsed.unparsable_lines) == lines
    supplied, _ = dotenv_file.load(path, environ)
    assert supplied == {k: v for k, v in expected.items() if v is not None and k not in environ}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\ufeffSF=250\nB=2\n", {"\ufeffSF": "250", "B": "2"}),
        (
            "export A=1\nB=\"two words\" # note\nC=${A}-x\nD='${A}'\nE\n",
            {"A": "1", "B": "two words", "C": "1-x", "D": "1"},
        ),
        ("A=1\nB=${A}\nA=2\nC=${A}\n", {"A": "2", "B": "1", "C": "2"}),
        ("A=\"x\\ny\"\nB='it\\'s'\n", {"A": "x\ny", "B": "it's"}),
    ],
)
def test_known_files(tmp_path: Path, text: str, expected: dict[str, str]) -> None:
    path = tmp_path / ".env"
    path.write_bytes(text.encode())
    supplied, _ = dotenv_file.load(path, {})
    assert supplied == expected == {k: v for k, v in deerflow_dotenv(path, {})[0].items() if v is not None}


def test_the_disable_switch_is_casefolded_not_stripped() -> None:
    assert dotenv_file.is_disabled({"PYTHON_DOTENV_DISABLED": "TRUE"})
    assert not dotenv_file.is_disabled({"PYTHON_DOTENV_DISABLED": " 1"})
    assert not dotenv_file.is_disabled({})
