"""Every document the code cites is in this repository, and every section it names is there.

The facts the code relies on live in docs/ (docs/architecture.md, docs/storage-model.md, docs/rules.md and
the pages beside them). A docstring or comment citing a document kept anywhere else (a shared drive, an
issue tracker) points readers at something they cannot open, and so does a `docs/...md` that was renamed.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from deerflow_ckpt.exitcodes import ExitCode, exit_statuses
from deerflow_ckpt.rules import RULES

THIS = Path(__file__).resolve()
REPO = THIS.parents[1]
DOCS = REPO / "docs"
# Where citations are checked: the package, its tests, fixtures, scripts and benchmarks.
SCOPES = ("deerflow_ckpt", "tests", "fixtures", "scripts", "benchmarks")
TEXT_SUFFIXES = frozenset({".py", ".pyi", ".c", ".h", ".sh", ".md", ".txt", ".json", ".yaml", ".yml", ".toml"})
SKIPPED_DIRS = frozenset({"__pycache__", ".venv", ".git", ".hypothesis", ".pytest_cache", ".mypy_cache"})
# Phrases that cite what is not in the repository, wherever they appear (code strings included).
OUTSIDE = re.compile(
    r"\bthe issue\b|\bissues? #?\d+|\.\./shared\b|/work/shared\b|\bthe spec\b|\bstorage contract\b|§"
    # The outside documents by name, with or without their extension.
    r"|\b(?:storage-contract|storage-growth|cli-conventions|deerflow-contracts|notes-on-issues|yaml-migration"
    r"|snapshot-cadence)\b",
    re.IGNORECASE,
)
DOCUMENT = re.compile(r"(?<![\w./-])((?:\.{0,2}/)?[\w-]+(?:/[\w.-]+)*\.(?:md|txt))\b")
URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+")
DOCS_PATH = re.compile(r"\bdocs/[\w./-]+?\.md\b")
# A document and the section it names: `docs/x.md, "Title"` or a Markdown link `(x.md), "Title"`.
SECTION = re.compile(r"([\w./-]+\.md)(?:#[\w-]+)?\)?,\s*\"([^\"]+)\"")
HEADING = re.compile(r"^#+\s+(.+?)\s*$", re.MULTILINE)


def _files(roots: tuple[str, ...]) -> Iterator[Path]:
    for root in roots:
        for path in sorted((REPO / root).rglob("*")):
            # This file spells out the patterns it looks for.
            if path.is_file() and path.suffix in TEXT_SUFFIXES and not SKIPPED_DIRS & set(path.parts) and path != THIS:
                yield path


@cache
def _repo_names() -> frozenset[str]:
    """Base names of every file in the repository (outside tool and build directories)."""
    return frozenset(
        path.name
        for path in REPO.rglob("*")
        if path.is_file() and not SKIPPED_DIRS & set(path.relative_to(REPO).parts) and ".egg-info" not in str(path)
    )


def _prose(path: Path, text: str) -> str:
    """What people read in a file: a Python file's comments and docstrings, any other file whole."""
    if path.suffix not in (".py", ".pyi"):
        return text
    parts = [
        token.string for token in tokenize.generate_tokens(io.StringIO(text).readline) if token.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            docstring = ast.get_docstring(node, clean=False)
            if docstring:
                parts.append(docstring)
    return "\n".join(parts)


def _exists(name: str, citing: Path) -> bool:
    if "/" not in name:
        return name in _repo_names()
    relative = name.removeprefix("./")
    return (REPO / relative).is_file() or (citing.parent / relative).is_file()


def _flat(text: str) -> str:
    """Text with line breaks (and comment markers continuing a sentence) as single spaces."""
    return re.sub(r"\s*\n\s*(?:#\s*)?", " ", text)


@cache
def _headings(document: Path) -> frozenset[str]:
    return frozenset(title.strip("`") for title in HEADING.findall(document.read_text(encoding="utf-8")))


def _relative(path: Path) -> str:
    return str(path.relative_to(REPO))


@pytest.mark.parametrize("path", list(_files(SCOPES)), ids=_relative)
def test_cites_only_documents_in_the_repository(path: Path) -> None:
    text = path.read_text(encoding="utf-8", errors="replace")
    problems = [f"cites {found.group(0)!r}" for found in OUTSIDE.finditer(text)]
    prose = URL.sub("", _prose(path, text))
    problems += [f"cites {name!r}, not a file here" for name in DOCUMENT.findall(prose) if not _exists(name, path)]
    assert not problems, f"{_relative(path)}: " + "; ".join(problems)


@pytest.mark.parametrize("path", [REPO / "README.md", *sorted(DOCS.glob("*.md")), *_files(SCOPES)], ids=_relative)
def test_docs_references_exist_with_their_sections(path: Path) -> None:
    text = path.read_text(encoding="utf-8", errors="replace")
    prose = _flat(URL.sub("", _prose(path, text)))
    problems = [f"{name} does not exist" for name in DOCS_PATH.findall(prose) if not (REPO / name).is_file()]
    for name, title in SECTION.findall(prose):
        document = next(
            (
                candidate
                for candidate in (REPO / name, path.parent / name)
                if candidate.is_file() and candidate.resolve().parent == DOCS
            ),
            None,
        )
        if document is not None and title not in _headings(document):
            problems.append(f"{name} has no section {title!r}")
    assert not problems, f"{_relative(path)}: " + "; ".join(problems)


def test_rules_page_covers_the_registry() -> None:
    """docs/rules.md explains every registry rule, and no rule the registry does not have."""
    documented = set(re.findall(r"^### (CK\d{3})$", (DOCS / "rules.md").read_text(encoding="utf-8"), re.MULTILINE))
    assert documented == set(RULES)


def test_readme_links_the_docs() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for page in sorted(DOCS.glob("*.md")):
        assert f"(docs/{page.name})" in readme, page.name


RULE_ROW = re.compile(r"^\| `(CK\d{3})` \| (\w+) \| ([^|]+) \| ([^|]+) \|$", re.M)


def test_rule_catalogue_matches_the_registry() -> None:
    page = (DOCS / "rules.md").read_text(encoding="utf-8")
    catalogue = page.split("\n## Rule catalogue\n", 1)[1].split("\n## ", 1)[0]
    rows = {
        code: (severity, title.strip(), impact.strip()) for code, severity, title, impact in RULE_ROW.findall(catalogue)
    }
    assert rows == {rule.code: (rule.severity.value, rule.title, rule.impact) for rule in RULES.values()}


def _table_rows(text: str) -> list[list[str]]:
    """The cells of every Markdown table row in `text` (header and separator rows left out), code spans unquoted."""
    lines = text.splitlines()
    return [
        [cell.strip().replace("`", "") for cell in line.strip().strip("|").split(" | ")]
        for line, after in zip(lines, [*lines[1:], ""], strict=True)
        if line.startswith("| ") and not after.startswith("|---")
    ]


def test_exit_code_tables_are_exitcodes_table() -> None:
    """docs/commands.md's exit codes, for ckpt and for each command, say exactly what exit_statuses() says (what
    every --help and man page print), row for row, every code included."""
    from deerflow_ckpt.cli.app import COMMANDS

    page = (DOCS / "commands.md").read_text(encoding="utf-8")
    section = page.split("\n## Exit codes\n", 1)[1].split("\n## ", 1)[0]
    rows = _table_rows(section)
    whole = [(row[0], row[1]) for row in rows if len(row) == 2]
    assert whole == exit_statuses(None)
    per_command: dict[str, list[tuple[str, str]]] = {}
    for names, code, meaning in (row for row in rows if len(row) == 3):
        for name in names.split(", "):
            per_command.setdefault(name, []).append((code, meaning))
    assert per_command == {name: exit_statuses(name) for name in COMMANDS}
    assert {code for rows in per_command.values() for code, _ in rows} == {
        *(str(int(code)) for code in ExitCode),
        "128+N",
    }


def _slug(title: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation but `-` and `_` dropped, spaces as `-`."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


LINK = re.compile(r"\]\(([\w./-]*\.md)?#([\w-]+)\)")


@pytest.mark.parametrize("path", [REPO / "README.md", *sorted(DOCS.glob("*.md"))], ids=_relative)
def test_every_anchor_link_names_a_heading(path: Path) -> None:
    """A link to `page.md#anchor` (or `#anchor` in the same page) lands on a heading that is there."""
    problems = []
    for name, anchor in LINK.findall(path.read_text(encoding="utf-8")):
        target = (path.parent / name) if name else path
        if not target.is_file():
            problems.append(f"{name}: no such page")
        elif anchor not in {_slug(title) for title in HEADING.findall(target.read_text(encoding="utf-8"))}:
            problems.append(f"{name or path.name}#{anchor}: no such heading")
    assert not problems, f"{_relative(path)}: " + "; ".join(problems)


@pytest.mark.parametrize(
    "project",
    ['[tool.ckpt.verify-shape]\nformat = "jsn"\n', '[tool.ckpt]\ncolour = "never"\n'],
    ids=["bad-value", "unknown-key"],
)
def test_ci_gate_project_file_errors_are_what_ckpt_prints(tmp_path: Path, project: str) -> None:
    """docs/ci-gate.md quotes ckpt's refusal of a project file's value and key: the line ckpt prints today."""
    from tests.cli import run_ckpt

    (tmp_path / "pyproject.toml").write_text(project, encoding="utf-8")
    result = run_ckpt("verify-shape", cwd=tmp_path)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
    line = result.stderr.strip().replace(str(tmp_path.resolve()), "/repo")
    assert f"`{line}`" in _flat((DOCS / "ci-gate.md").read_text(encoding="utf-8")), line


def test_ci_gate_names_each_refusal_of_a_directory(tmp_path: Path) -> None:
    """docs/ci-gate.md says what a directory given as a file is refused as, per option: as ckpt says it."""
    from tests.cli import run_ckpt

    page = _flat((DOCS / "ci-gate.md").read_text(encoding="utf-8"))
    for args, option in (
        (("--isolated", "verify-shape", "--config", str(tmp_path)), "a DeerFlow config"),
        (("--config-file", str(tmp_path), "verify-shape"), "`--config-file`"),
        (("--isolated", "verify-shape", "--db", str(tmp_path)), "`--db`"),
    ):
        result = run_ckpt(*args)
        last = result.stderr.strip().splitlines()[-1]
        assert result.exit_code == 2 and last.startswith(f"ckpt: error: {tmp_path}: is a directory, not a "), last
        refused_as = last.split(": is a directory, ", 1)[1]
        assert f"{refused_as}` ({option})" in page, (refused_as, option)


def test_commands_page_describes_lint_configs_json_and_checked_line(tmp_path: Path) -> None:
    """docs/commands.md's lint-config section names the json schema and the fields lint-config writes, and the
    Checked: line its text report ends with."""
    import json

    from tests.cli import run_ckpt

    (tmp_path / "config.yaml").write_text("database:\n  backend: sqlite\n", encoding="utf-8")
    page = (DOCS / "commands.md").read_text(encoding="utf-8")
    section = _flat(page.split("\n## `ckpt lint-config [FILE]...`\n", 1)[1].split("\n## ", 1)[0])
    document = json.loads(run_ckpt("--isolated", "lint-config", "config.yaml", "--format", "json", cwd=tmp_path).stdout)
    assert f"`schema_version` {document['schema_version']}" in section
    checked = ", ".join(f"{key}: [{', '.join(value)}]" for key, value in document["checked"].items())
    assert f"`checked` object (`{checked.replace(', sections', '`, `sections')}`)" in section, checked
    for key in ("yaml_valid", "database_valid"):
        assert key in document["files"][0] and f"`{key}`" in section, key
    text = run_ckpt("--isolated", "lint-config", "config.yaml", cwd=tmp_path).stdout.rstrip("\n").splitlines()[-1]
    assert text.startswith("Checked: ") and f"`{text.split('. ', 1)[0]}" in section, text
