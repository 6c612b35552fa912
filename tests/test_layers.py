"""The package's imports run one way: config -> store -> analysis -> commands -> report -> cli.

Read from the source with ast (deferred and TYPE_CHECKING imports included, since they are dependencies
too), so a module that reaches up a layer fails here before it makes a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "deerflow_ckpt"

# Lower first; a module may import its own layer and the layers below it.
LAYERS: tuple[tuple[str, ...], ...] = (
    # The bottom: the rule registry and the small shared pieces every layer uses.
    (
        "deerflow_ckpt",
        "deerflow_ckpt.dataclass",
        "deerflow_ckpt.rules",
        "deerflow_ckpt.errors",
        "deerflow_ckpt.exitcodes",
    ),
    # Which rules a run reports (--select, --severity): the registry read through a project's choices.
    ("deerflow_ckpt.rule_selection",),
    ("deerflow_ckpt.redact", "deerflow_ckpt.fileio", "deerflow_ckpt.dsn", "deerflow_ckpt.locations"),
    ("deerflow_ckpt.config",),
    # The compiled judge is the store's fast path, configured from the store's type tables.
    ("deerflow_ckpt.store", "deerflow_ckpt.native"),
    ("deerflow_ckpt.analysis",),
    ("deerflow_ckpt.commands",),
    ("deerflow_ckpt.report",),
    ("deerflow_ckpt.cli",),
    ("deerflow_ckpt.manpages", "deerflow_ckpt.__main__"),
)


def layer_of(module: str) -> int:
    """The layer of the longest prefix that names `module` or a package holding it (the package itself,
    `deerflow_ckpt`, names only its __init__: a new top-level module must be placed in LAYERS)."""
    best, rank = -1, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            holds = prefix != "deerflow_ckpt" and module.startswith(prefix + ".")
            if (module == prefix or holds) and len(prefix) > best:
                best, rank = len(prefix), index
    if rank < 0:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS")
    return rank


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every deerflow_ckpt import in the file, relative ones resolved."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    return imports_in(path.read_text(encoding="utf-8"), package)


def imports_in(source: str, package: str) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from deerflow_ckpt.x import y` may name a module y; judge the deepest name that is one.
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                is_module = (PACKAGE.parent / Path(*candidate.split("."))).with_suffix(".py").exists() or (
                    PACKAGE.parent / Path(*candidate.split("."))
                ).is_dir()
                found.append((node.lineno, candidate if is_module else base))
    return [(line, name) for line, name in found if name == "deerflow_ckpt" or name.startswith("deerflow_ckpt.")]


SOURCES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_has_a_layer() -> None:
    for path in SOURCES:
        layer_of(module_name(path))
    with pytest.raises(AssertionError, match="in no layer"):
        layer_of("deerflow_ckpt.newcomer")


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_imports_only_its_own_layer_or_lower(path: Path) -> None:
    importer = module_name(path)
    upward = [
        f"line {line}: {importer} imports {imported}"
        for line, imported in imports_of(path)
        if layer_of(imported) > layer_of(importer)
    ]
    assert not upward


def test_the_checker_sees_an_upward_import() -> None:
    # Guard against a checker that passes everything: a config module importing the CLI is caught.
    source = "from deerflow_ckpt.cli import app\nfrom deerflow_ckpt.store.source import choose\nfrom . import keys\n"
    found = imports_in(source, "deerflow_ckpt.config")
    assert [name for _, name in found] == [
        "deerflow_ckpt.cli.app",
        "deerflow_ckpt.store.source",
        "deerflow_ckpt.config.keys",
    ]
    assert [layer_of(name) > layer_of("deerflow_ckpt.config.discovery") for _, name in found] == [True, True, False]
