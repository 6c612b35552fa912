"""lint-config over several files: read every file first, lint each, then check them against each other."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from deerflow_ckpt.config.consistency import Consistency, check_consistency
from deerflow_ckpt.config.keys import CADENCE_KEY, DATABASE, DELTA_SECTION, LEGACY_CADENCE_KEY
from deerflow_ckpt.config.lint import FileLint, Finding, lint_config_bytes
from deerflow_ckpt.config.lint_source import ConfigSource
from deerflow_ckpt.config.upgrade import backup_of, lost_cadence, lost_message, pending_upgrade
from deerflow_ckpt.config.values import ExpansionError, compose_documents, construct_values
from deerflow_ckpt.dataclass import dataclass, replace
from deerflow_ckpt.errors import ConfigError
from deerflow_ckpt.fileio import ConfigReadError, read_config_file, resolved
from deerflow_ckpt.rule_selection import RuleSelection
from deerflow_ckpt.rules import RuleCode


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
        real = resolved(path)
        if real in seen:
            continue
        seen.add(real)
        try:
            contents.append((str(path), read_config_file(path)))
        except ConfigReadError as exc:
            raise ConfigError(f"{path}: {exc}") from None
    return contents


def _lint_one(name: str, raw: bytes, environ: Mapping[str, str], base: Path, assumed: frozenset[str]) -> FileLint:
    try:
        linted = lint_config_bytes(raw, environ, base, assumed)
    except ExpansionError as exc:
        raise ConfigError(f"cannot lint {name}: {exc}") from None
    upgrade = _upgrade_findings(Path(name), raw, environ) if linted.facts is not None else []
    if not upgrade:
        return linted
    ordered = sorted([*linted.findings, *upgrade], key=lambda finding: (finding.line or 0, finding.rule))
    return replace(linted, findings=tuple(ordered))


def _upgrade_findings(path: Path, raw: bytes, environ: Mapping[str, str]) -> list[Finding]:
    """make config-upgrade's effect on the cadence: about to replace it (CK511), or replaced it (CK512)."""
    has_backup = path.is_file() and backup_of(path).is_file()
    if not has_backup and LEGACY_CADENCE_KEY.encode() not in raw:
        return []  # neither can apply: no need to read the file again
    text = raw.decode("utf-8-sig")
    documents = compose_documents(text)
    if len(documents) != 1:
        return []
    source = ConfigSource(text, documents[0])
    data = construct_values(documents[0])
    findings: list[Finding] = []
    pending = pending_upgrade(path, data) if path.is_file() else None
    if pending is not None:
        example = pending.example
        findings.append(
            Finding(
                RuleCode.CK511,
                source.line(DATABASE, LEGACY_CADENCE_KEY),
                f"config_version {pending.version} is below {example.path}'s {example.version}: the next make dev "
                f"or make start runs make config-upgrade, which adds {DELTA_SECTION}.{CADENCE_KEY}: "
                f"{example.cadence} beside the legacy key (the nested key wins, so the legacy cadence is lost), "
                "re-dumps the file without a single comment and leaves the old text in "
                f"{backup_of(path).name}; run ckpt migrate-config first",
            )
        )
    lost = lost_cadence(path, data, environ) if has_backup else None
    if lost is not None:
        findings.append(Finding(RuleCode.CK512, source.line(DATABASE, DELTA_SECTION, CADENCE_KEY), lost_message(lost)))
    return findings


def lint_files(
    contents: Sequence[tuple[str, bytes]],
    environ: Mapping[str, str],
    base: Path,
    assumed: frozenset[str] = frozenset(),
    rules: RuleSelection = RuleSelection(),
) -> LintReport:
    """Every file linted and the files compared; only `rules`' findings kept, at their chosen severities."""
    files = tuple(LintedFile(name, _lint_one(name, raw, environ, base, assumed)) for name, raw in contents)
    consistency = check_consistency([(linted.name, linted.lint.facts) for linted in files])
    if rules.is_default:
        return LintReport(files, consistency, base)
    chosen = tuple(
        LintedFile(linted.name, replace(linted.lint, findings=tuple(rules.apply(linted.lint.findings))))
        for linted in files
    )
    cross = tuple((path, finding) for path, finding in consistency.findings if rules.enabled(finding.rule))
    graded = tuple((path, finding.graded(rules.severity_of(finding.rule))) for path, finding in cross)
    return LintReport(chosen, replace(consistency, findings=graded), base)
