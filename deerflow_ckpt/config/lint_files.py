"""lint-config over several files: read every file first, lint each, then check them against each other."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from deerflow_ckpt.config.consistency import Consistency, check_consistency
from deerflow_ckpt.config.lint import FileLint, Finding, lint_config_bytes
from deerflow_ckpt.config.values import ExpansionError
from deerflow_ckpt.errors import ConfigError
from deerflow_ckpt.fileio import ConfigReadError, read_config_file


@dataclass(frozen=True)
class LintedFile:
    # As given on the command line: CI annotations and editors link to it.
    name: str
    lint: FileLint


@dataclass(frozen=True)
class LintReport:
    files: tuple[LintedFile, ...]
    consistency: Consistency
    # The directory DeerFlow is taken to run in: relative sqlite_dir values resolve against it.
    base: Path

    def findings_of(self, name: str) -> list[Finding]:
        """The file's own findings and the cross-file ones located in it, by line."""
        lint = next(linted.lint for linted in self.files if linted.name == name)
        cross = [finding for path, finding in self.consistency.findings if path == name]
        return sorted([*lint.findings, *cross], key=lambda finding: (finding.line or 0, finding.rule))

    def all_findings(self) -> list[tuple[str, Finding]]:
        return [(linted.name, finding) for linted in self.files for finding in self.findings_of(linted.name)]


def read_configs(paths: Sequence[Path]) -> list[tuple[str, bytes]]:
    """Every file's bytes, or ConfigError for the first that cannot be read (the command cannot run)."""
    contents: list[tuple[str, bytes]] = []
    seen: set[Path] = set()
    for path in paths:
        resolved = path.resolve()
        if resolved in seen:
            continue
        seen.add(resolved)
        try:
            contents.append((str(path), read_config_file(path)))
        except ConfigReadError as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from None
    return contents


def _lint_one(name: str, raw: bytes, environ: Mapping[str, str], base: Path) -> FileLint:
    try:
        return lint_config_bytes(raw, environ, base)
    except ExpansionError as exc:
        raise ConfigError(f"cannot lint {name}: {exc}") from None


def lint_files(contents: Sequence[tuple[str, bytes]], environ: Mapping[str, str], base: Path) -> LintReport:
    files = tuple(LintedFile(name, _lint_one(name, raw, environ, base)) for name, raw in contents)
    consistency = check_consistency([(linted.name, linted.lint.facts) for linted in files])
    return LintReport(files, consistency, base)
