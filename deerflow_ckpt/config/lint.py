"""What DeerFlow makes of one config file's `database:` section, as lint findings.

Pure: text and an environment in, findings and the checkpoint facts the cross-file check needs out;
nothing is printed and nothing exits. Values follow DeerFlow's loading order (PyYAML safe_load, `$VAR`
resolution, the file defaults, the legacy-key shim, pydantic in lax mode); lines come from the nodes
PyYAML composes from the same text, so they point at the key that decides.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from deerflow_ckpt.config import fields, yamlnodes
from deerflow_ckpt.config.database import read_database_settings
from deerflow_ckpt.config.discovery import Refusal
from deerflow_ckpt.config.helm import embedded_config
from deerflow_ckpt.config.identity import DatabaseIdentity, Unlocated, checkpoint_identity
from deerflow_ckpt.config.keys import (
    CADENCE_KEY,
    CHANNEL_MODE_KEY,
    DATABASE,
    DEFAULT_CADENCE,
    DEFAULT_CHANNEL_MODE,
    DELTA_SECTION,
    FILE_DATABASE_DEFAULTS,
    LEGACY_CADENCE_KEY,
    LEGACY_CHECKPOINTER,
)
from deerflow_ckpt.config.lint_env import Reference, Unset, first_unset, resolve_tree
from deerflow_ckpt.config.lint_source import ConfigSource, document_lines, dotted, yaml_problem
from deerflow_ckpt.config.upgrade import UPGRADER_DEFAULT
from deerflow_ckpt.config.values import (
    CadenceReading,
    ShimBranch,
    apply_legacy_shim,
    compose_documents,
    construct_values,
    kind_of,
    read_cadence,
    yaml12_disagreement,
)
from deerflow_ckpt.dataclass import dataclass, replace
from deerflow_ckpt.redact import is_credential_path, redact
from deerflow_ckpt.rules import RuleCode, Severity, rule

# Keys that decide where checkpoints go, per section.
LOCATION_KEYS = {
    DATABASE: ("backend", "sqlite_dir", "postgres_url", "postgres_schema"),
    LEGACY_CHECKPOINTER: ("type", "connection_string", "postgres_schema"),
}
CHECKPOINTER_TYPES = ("memory", "sqlite", "postgres")
# A plain scalar PyYAML reads as octal (YAML 1.1): 010 is 8.
_OCTAL = re.compile(r"[-+]?0[0-7_]+")
# Checkpoint keys DeerFlow reads only under database:; written at the top level or under
# checkpointer: they are kept (extra="allow") or dropped, and never used.
MISPLACED = (
    CHANNEL_MODE_KEY,
    DELTA_SECTION,
    LEGACY_CADENCE_KEY,
    CADENCE_KEY,
    fields.GRAPH_CACHE_SECTION,
    fields.HISTORY_CACHE_SECTION,
)


@dataclass(frozen=True)
class Finding:
    rule: RuleCode
    # 1-based line of the key that decides, or None for the whole file.
    line: int | None
    message: str
    # DeerFlow's own log line for this case (config/messages.py), verbatim.
    deerflow_warning: str | None = None
    # A project's override (--severity, [tool.ckpt.severity]); the registry's severity otherwise.
    override: Severity | None = None

    @property
    def severity(self) -> Severity:
        return self.override or rule(self.rule).severity

    def graded(self, severity: Severity) -> Finding:
        return self if severity is self.severity else replace(self, override=severity)


@dataclass(frozen=True)
class Setting:
    """One effective value DeerFlow would freeze, and where the file decides it."""

    # None when ckpt cannot know it (an unset `$VAR`).
    value: object
    line: int | None
    # The key that sets it ("database.checkpoint_delta.snapshot_frequency"), or "DeerFlow's default".
    origin: str
    # True when the file does not set it and DeerFlow's default applies.
    default: bool = False

    @property
    def known(self) -> bool:
        return self.value is not None


@dataclass(frozen=True)
class CheckpointFacts:
    """What the cross-file check compares: where checkpoints go, in which mode, at which cadence."""

    database: DatabaseIdentity | Unlocated
    mode: Setting
    cadence: Setting


@dataclass(frozen=True)
class FileLint:
    """What lint-config verified in one file: the YAML of the whole file and its checkpoint sections.

    DeerFlow's other sections (sandbox:, models:, ...) are not checked, so no field here says the file loads.
    """

    findings: tuple[Finding, ...]
    # None when DeerFlow refuses the YAML or the checkpoint sections: no process runs with it, so it shares nothing.
    facts: CheckpointFacts | None
    # UTF-8 text that yaml.safe_load reads to one mapping, as AppConfig.from_file needs.
    yaml_valid: bool
    # database: and checkpointer: accepted by DeerFlow's models and startable; None when not known: the YAML
    # failed, or a `$VAR` they read is unset here (its value unknown).
    database_valid: bool | None


def lint_config_bytes(
    raw: bytes, environ: Mapping[str, str], cwd: Path, assumed: frozenset[str] = frozenset()
) -> FileLint:
    """Lint one config file's bytes; `cwd` is the directory DeerFlow's process runs in."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        finding = Finding(RuleCode.CK500, line, f"not UTF-8 text (byte {exc.start}); DeerFlow cannot read the file")
        return FileLint((finding,), None, yaml_valid=False, database_valid=None)
    return lint_config_text(text, environ, cwd, assumed)


def lint_config_text(
    text: str, environ: Mapping[str, str], cwd: Path, assumed: frozenset[str] = frozenset()
) -> FileLint:
    """Lint one config's text; `assumed` names variables set where DeerFlow runs though unset here ("*": all)."""
    embedded = embedded_config(text)
    if embedded is None:
        return _Linter(text, environ, cwd, assumed).run()
    # A Helm values.yaml: lint the config block, at the outer file's lines.
    linted = _Linter(embedded.text, environ, cwd, assumed).run()
    findings = tuple(replace(finding, line=embedded.outer_line(finding.line)) for finding in linted.findings)
    facts = linted.facts
    if facts is not None:
        facts = replace(
            facts,
            mode=replace(facts.mode, line=embedded.outer_line(facts.mode.line)),
            cadence=replace(facts.cadence, line=embedded.outer_line(facts.cadence.line)),
        )
    return replace(linted, findings=findings, facts=facts)


def _suggest(name: object, candidates: list[str]) -> str | None:
    matches = difflib.get_close_matches(str(name).lower(), candidates, n=1, cutoff=0.6)
    return matches[0] if matches else None


class _Linter:
    def __init__(self, text: str, environ: Mapping[str, str], cwd: Path, assumed: frozenset[str]) -> None:
        self.text = text
        self.assumed = assumed
        self.environ = environ
        self.cwd = cwd
        self.source = ConfigSource(text, None)
        self.findings: list[Finding] = []
        self.references: list[Reference] = []
        # CK500s for `$VAR`s unset here: DeerFlow refuses the file in this environment, and ckpt still
        # checks the rest with those values unknown.
        self.unset_findings: list[Finding] = []
        # The `$VAR` DeerFlow's load fails on in this environment (first_unset), if any: then nothing after
        # resolve_env_variables runs, and DeerFlow logs no legacy-key warning.
        self.load_fails_at: Reference | None = None

    def add(self, code: RuleCode, line: int | None, message: str, deerflow_warning: str | None = None) -> None:
        # DeerFlow's warning quotes the value (%r), which can be a DSN.
        warning = None if deerflow_warning is None else redact(deerflow_warning)
        self.findings.append(Finding(code, line, redact(message), warning))

    def refused(self) -> bool:
        """DeerFlow refuses the file, at load or at startup, whatever its environment (an unset `$VAR`
        refuses it only here)."""
        return any(
            finding.rule in (RuleCode.CK500, RuleCode.CK503, RuleCode.CK513) and finding not in self.unset_findings
            for finding in self.findings
        )

    def result(self, facts: CheckpointFacts | None, yaml_valid: bool = True) -> FileLint:
        ordered = sorted(self.findings, key=lambda f: (f.line or 0, f.rule))
        refused = self.refused()
        valid: bool | None = not refused
        if not yaml_valid or (not refused and any(isinstance(found.value, Unset) for found in self.references)):
            valid = None
        return FileLint(tuple(ordered), None if refused else facts, yaml_valid, valid)

    # -- the file --------------------------------------------------------------------------------

    def run(self) -> FileLint:
        try:
            documents = compose_documents(self.text)
        except yaml.YAMLError as exc:
            return self.unreadable(exc)
        if len(documents) > 1:
            lines = document_lines(self.text)
            self.add(
                RuleCode.CK500,
                lines[1] if len(lines) > 1 else None,
                f"holds {len(documents)} YAML documents; DeerFlow's yaml.safe_load accepts exactly one, so it "
                "cannot start",
            )
            return self.result(None, yaml_valid=False)
        try:
            data = construct_values(documents[0]) if documents else None
        except (yaml.YAMLError, ValueError, TypeError) as exc:
            # Composes but does not construct (an unknown tag, `!!int abc`): safe_load fails the same way.
            return self.unreadable(exc)
        self.source = ConfigSource(self.text, documents[0] if documents else None)
        # AppConfig.from_file: `yaml.safe_load(f) or {}`.
        data = data or {}
        if not isinstance(data, dict):
            self.add(
                RuleCode.CK500, 1, f"the file holds {kind_of(data)}, not a mapping of sections; DeerFlow cannot load it"
            )
            return self.result(None, yaml_valid=False)
        self.check_top_level(data)
        for section in (DATABASE, LEGACY_CHECKPOINTER):
            # A null section is dropped (database: null gets the defaults); anything else must be a mapping.
            value = data.get(section)
            if value is not None and not isinstance(value, dict):
                shown = self.source.described((section,), value)
                self.add(
                    RuleCode.CK500,
                    self.source.line(section),
                    f"{section} is {shown}, not a mapping; DeerFlow cannot load it",
                )
                return self.result(None)
        database = resolve_tree(data.get(DATABASE) or {}, (DATABASE,), self.environ, self.references)
        checkpointer = resolve_tree(
            data.get(LEGACY_CHECKPOINTER), (LEGACY_CHECKPOINTER,), self.environ, self.references
        )
        assert isinstance(database, dict)
        self.load_fails_at = first_unset(data, self.environ, self.assumed)
        self.check_unset_elsewhere(data)
        return self.check_database(data, database, checkpointer)

    def check_unset_elsewhere(self, data: dict[Any, Any]) -> None:
        """DeerFlow resolves `$VAR` in every value of the file and refuses it when one is unset."""
        elsewhere: list[Reference] = []
        for key, value in data.items():
            if key not in (DATABASE, LEGACY_CHECKPOINTER):
                resolve_tree(value, (key,), self.environ, elsewhere)
        for reference in elsewhere:
            if isinstance(reference.value, Unset):
                self.add_unset(reference, "")

    def add_unset(self, reference: Reference, effect: str) -> None:
        name = reference.name
        if name in self.assumed or "*" in self.assumed:
            self.add(
                RuleCode.CK509,
                self.source.line(*reference.path),
                f"{dotted(reference.path)} is ${name}: not set here, and assumed set where DeerFlow runs "
                f"(--assume-set){effect}",
            )
            return
        self.add(
            RuleCode.CK500,
            self.source.line(*reference.path),
            f"{dotted(reference.path)}: Environment variable {name} not found for config value ${name}: DeerFlow "
            f"refuses the whole file where ${name} is unset (set it in its environment or the .env it loads){effect}",
        )
        self.unset_findings.append(self.findings[-1])

    def unreadable(self, exc: Exception) -> FileLint:
        line, problem = yaml_problem(exc, self.text)
        self.add(
            RuleCode.CK500, line, f"not valid YAML ({problem}); DeerFlow's yaml.safe_load fails, so it cannot start"
        )
        return self.result(None, yaml_valid=False)

    def check_top_level(self, data: dict[Any, Any]) -> None:
        if isinstance(self.source.root, yaml.MappingNode):
            for section in (DATABASE, LEGACY_CHECKPOINTER):
                self.check_duplicates(section)
        for name in MISPLACED:
            if name in data:
                self.misplaced((name,), "at the top level")

    def check_duplicates(self, section: str) -> None:
        assert isinstance(self.source.root, yaml.MappingNode)
        keys = [key for key, _ in yamlnodes.own_pairs(self.source.root) if isinstance(key, yaml.ScalarNode)]
        lines = [int(key.start_mark.line) + 1 for key in keys if key.value == section]
        if len(lines) > 1:
            self.add(
                RuleCode.CK508,
                lines[0],
                f"{section}: is written {len(lines)} times (lines {', '.join(map(str, lines))}); PyYAML keeps only "
                f"the last one (line {lines[-1]}), so every key in the others is ignored",
            )
        found = self.source.pair((section,))
        if found is None or not isinstance(found[1], yaml.MappingNode):
            return
        for duplicate in yamlnodes.duplicate_keys(found[1]):
            joined = ", ".join(map(str, duplicate.lines))
            self.add(
                RuleCode.CK508,
                duplicate.lines[0],
                f"{duplicate.name} is written {len(duplicate.lines)} times in one mapping under {section}: "
                f"(lines {joined}); PyYAML silently keeps the last (line {duplicate.lines[-1]}) and ignores the others",
            )

    def misplaced(self, path: tuple[str, ...], where: str) -> None:
        name = path[-1]
        target = f"{DATABASE}.{DELTA_SECTION}.{CADENCE_KEY}" if name in (LEGACY_CADENCE_KEY, CADENCE_KEY) else None
        self.add(
            RuleCode.CK505,
            self.source.line(*path),
            f"{dotted(path)} is not read {where}: DeerFlow reads checkpoint settings only under database:, so it "
            f"is ignored (did you mean {target or f'{DATABASE}.{name}'}?)",
        )

    # -- $VAR ------------------------------------------------------------------------------------

    def report_references(self, location_section: str) -> None:
        for reference in self.references:
            path, name = reference.path, reference.name
            subject = f"{dotted(path)} is ${name}: DeerFlow reads it from its environment when it loads the config"
            if not isinstance(reference.value, Unset):
                # A credential, or a piece of a DSN (a mapping postgres_url's password), is never shown.
                shown = "set (the value is not shown)" if is_credential_path(path) else repr(reference.value)
                self.add(
                    RuleCode.CK509,
                    self.source.line(*path),
                    f"{subject}; here it is {shown}, and ckpt checks that value",
                )
                continue
            if path[0] == location_section and path[-1] in LOCATION_KEYS[location_section]:
                effect = "ckpt cannot tell which database this file uses and leaves it out of the cross-file check"
            elif path[-1] == CHANNEL_MODE_KEY:
                effect = "its channel mode is not compared with other files"
            elif path[-1] in (CADENCE_KEY, LEGACY_CADENCE_KEY):
                effect = "its cadence is not compared with other files"
            else:
                effect = "ckpt cannot check its value"
            self.add_unset(reference, f"; unknown here, so {effect}")

    # -- database: -------------------------------------------------------------------------------

    def check_database(self, data: dict[Any, Any], resolved: dict[Any, Any], checkpointer: object) -> FileLint:
        # _apply_database_defaults, then the legacy-key shim, exactly in DeerFlow's order.
        database = {**FILE_DATABASE_DEFAULTS, **resolved}
        shim = apply_legacy_shim(database)
        database = shim.database
        self.check_shim(shim.branch, shim.warning, resolved, database)
        self.check_fields(database)
        mode = self.mode_setting(resolved, database)
        cadence = self.cadence_setting(shim.branch, database)
        self.check_unknown_keys(database, mode, cadence)
        self.check_full_mode(mode, cadence)
        section = LEGACY_CHECKPOINTER if isinstance(checkpointer, dict) else DATABASE
        self.report_references(section)
        if isinstance(checkpointer, dict):
            self.check_checkpointer_fields(checkpointer)
        location = self.locate(data, section)
        if isinstance(checkpointer, dict):
            self.check_checkpointer(data, checkpointer, location)
        return self.result(CheckpointFacts(location, mode, cadence))

    def check_shim(
        self, branch: ShimBranch, warning: str | None, resolved: dict[Any, Any], database: dict[Any, Any]
    ) -> None:
        if branch is ShimBranch.NO_LEGACY_KEY:
            return
        legacy_path = (DATABASE, LEGACY_CADENCE_KEY)
        legacy = resolved[LEGACY_CADENCE_KEY]
        if isinstance(legacy, Unset) or self.load_fails_at is not None:
            # DeerFlow resolves every `$VAR` in the file before validating, and refuses it at the first unset
            # one (app_config.py:412, 545-567), before its shim can log: the legacy key's or any other.
            warning = None
        legacy_line = self.source.line(*legacy_path)
        legacy_shown = self.source.shown(legacy_path, legacy)
        if branch is ShimBranch.IGNORED:
            delta = database[DELTA_SECTION]
            if isinstance(delta, Unset):
                return  # unknown here: the CK509 for it says so
            self.add(
                RuleCode.CK503,
                self.source.line(DATABASE, DELTA_SECTION),
                f"database.{DELTA_SECTION} is {self.source.described((DATABASE, DELTA_SECTION), delta)}, not a "
                f"mapping: DeerFlow drops the deprecated {LEGACY_CADENCE_KEY} (line {legacy_line}) and then rejects "
                f"{DELTA_SECTION}, so it cannot start; write {DELTA_SECTION}: {{{CADENCE_KEY}: N}}",
                warning,
            )
            return
        if branch is ShimBranch.NESTED_WINS:
            nested_path = (DATABASE, DELTA_SECTION, CADENCE_KEY)
            nested = database[DELTA_SECTION][CADENCE_KEY]
            nested_shown = self.source.shown(nested_path, nested)
            where = f"database.{DELTA_SECTION}.{CADENCE_KEY} (line {self.source.line(*nested_path)})"
            if _same_cadence(legacy, nested):
                self.add(
                    RuleCode.CK501,
                    legacy_line,
                    f"database.{LEGACY_CADENCE_KEY}: {legacy_shown} is deprecated and repeats {where}: DeerFlow keeps "
                    "the nested key and logs a warning on every load; delete the flat key",
                    warning,
                )
                return
            message = (
                f"database.{LEGACY_CADENCE_KEY} is {legacy_shown} but {where} is {nested_shown}: DeerFlow keeps "
                f"the nested key and silently drops {legacy_shown} without checking it"
            )
            if _reading(nested).effective == UPGRADER_DEFAULT:
                message += (
                    f" (make config-upgrade adds {CADENCE_KEY}: {UPGRADER_DEFAULT} next to a legacy key; 1000 was "
                    "the pre-rename default)"
                )
            self.add(
                RuleCode.CK502, legacy_line, message + "; keep the cadence you mean under checkpoint_delta", warning
            )
            return
        reading = _reading(legacy)
        effect = f", so the cadence is {reading.effective}," if reading.effective is not None else ""
        if isinstance(legacy, Unset):
            effect = f" (its warning shows the value of ${legacy.name})"
        self.add(
            RuleCode.CK501,
            legacy_line,
            f"database.{LEGACY_CADENCE_KEY}: {legacy_shown} is deprecated: DeerFlow carries it to "
            f"{DELTA_SECTION}.{CADENCE_KEY}{effect} and logs a warning on every load; run ckpt migrate-config",
            warning,
        )

    def check_fields(self, database: dict[Any, Any]) -> None:
        for key, kind in fields.DATABASE_FIELDS.items():
            if key not in database or isinstance(database[key], Unset):
                continue
            value = database[key]
            if kind == "section":
                self.check_section(key, value)
            else:
                self.check_value((DATABASE, key), kind, value)
        schema = database.get("postgres_schema")
        if isinstance(schema, str) and (problem := fields.schema_problem(schema)):
            self.add(
                RuleCode.CK500,
                self.source.line(DATABASE, "postgres_schema"),
                f"database.postgres_schema is rejected by DeerFlow: {problem}; DeerFlow cannot start with this file",
            )

    def check_section(self, key: str, value: object) -> None:
        path = (DATABASE, key)
        if not isinstance(value, dict):
            if any(finding.rule == RuleCode.CK503 for finding in self.findings):
                return  # the legacy-key shim already said it
            self.add(
                RuleCode.CK503 if key == DELTA_SECTION else RuleCode.CK500,
                self.source.line(*path),
                f"database.{key} is {self.source.described(path, value)}, not a mapping; DeerFlow rejects it "
                "(Input should be a valid dictionary), so it cannot start",
            )
            return
        for name, kind in fields.SECTION_FIELDS[key].items():
            if name in value and not isinstance(value[name], Unset):
                if kind == "cadence":
                    self.check_cadence(value[name])
                else:
                    self.check_value((*path, name), kind, value[name])

    def check_value(self, path: tuple[str, ...], kind: str, value: object) -> None:
        problem = fields.check(kind, value)
        if problem is not None:
            self.add(
                RuleCode.CK500,
                self.source.line(*path),
                f"{dotted(path)}: {self.source.shown(path, value)} is rejected by DeerFlow: {problem}"
                f"{fields.literal_hint(kind, value)}; DeerFlow cannot start with this file",
            )

    def check_cadence_spelling(self, path: tuple[str, ...], effective: int | None) -> None:
        """YAML 1.1 reads a plain 010 as octal 8 and 1:30 as sexagesimal 90: not what the text seems to say."""
        found = self.source.pair(path)
        # PyYAML marks a plain scalar with style "" (quoted ones with their quote character).
        if found is None or not isinstance(found[1], yaml.ScalarNode) or found[1].style:
            return
        written = str(found[1].value)
        if _OCTAL.fullmatch(written) or ":" in written:
            self.add(
                RuleCode.CK504,
                self.source.line(*path),
                f"{dotted(path)}: {written} is read by DeerFlow (PyYAML, YAML 1.1) as {effective}; write {effective} "
                f"if that is the cadence you mean{yaml12_disagreement(written, effective)}",
            )

    def plain_text(self, path: tuple[str, ...]) -> str | None:
        """The value as written when it is a plain scalar (the only style YAML 1.1 and 1.2 resolve apart)."""
        found = self.source.pair(path)
        if found is None or not isinstance(found[1], yaml.ScalarNode) or found[1].style:
            return None
        return str(found[1].value)

    def cadence_path(self) -> tuple[str, ...]:
        """Where the cadence DeerFlow uses is written: the nested key, else the carried flat key."""
        if self.source.pair((DATABASE, DELTA_SECTION, CADENCE_KEY)) is None and self.source.pair(
            (DATABASE, LEGACY_CADENCE_KEY)
        ):
            return (DATABASE, LEGACY_CADENCE_KEY)
        return (DATABASE, DELTA_SECTION, CADENCE_KEY)

    def check_cadence(self, value: object) -> None:
        reading = read_cadence(value)
        path = self.cadence_path()
        if reading.problem is None:
            self.check_cadence_spelling(path, reading.effective)
            return
        code = RuleCode.CK504 if reading.effective is not None or reading.beyond_range else RuleCode.CK500
        consequence = "" if code == RuleCode.CK504 else "; DeerFlow cannot start with this file"
        written = self.plain_text(path)
        if written is not None and isinstance(value, bool):
            consequence += yaml12_disagreement(written, value)
        self.add(
            code,
            self.source.line(*path),
            f"{dotted(path)}: {self.source.shown(path, value)} {reading.problem}{consequence}",
        )

    # -- effective values ------------------------------------------------------------------------

    def mode_setting(self, resolved: dict[Any, Any], database: dict[Any, Any]) -> Setting:
        if CHANNEL_MODE_KEY not in resolved:
            return Setting(DEFAULT_CHANNEL_MODE, self.source.line(DATABASE), "DeerFlow's default", default=True)
        value = database[CHANNEL_MODE_KEY]
        line = self.source.line(DATABASE, CHANNEL_MODE_KEY)
        if isinstance(value, Unset):
            return Setting(None, line, f"${value.name}, not set here")
        return Setting(value, line, f"database.{CHANNEL_MODE_KEY}")

    def cadence_setting(self, branch: ShimBranch, database: dict[Any, Any]) -> Setting:
        delta = database.get(DELTA_SECTION)
        if not isinstance(delta, dict) or CADENCE_KEY not in delta:
            line = self.source.line(DATABASE, DELTA_SECTION)
            return Setting(DEFAULT_CADENCE, line or self.source.line(DATABASE), "DeerFlow's default", default=True)
        value = delta[CADENCE_KEY]
        path = self.cadence_path() if branch is ShimBranch.CARRIED else (DATABASE, DELTA_SECTION, CADENCE_KEY)
        line = self.source.line(*path)
        if isinstance(value, Unset):
            return Setting(None, line, f"${value.name}, not set here")
        return Setting(read_cadence(value).effective, line, dotted(path))

    def check_unknown_keys(self, database: dict[Any, Any], mode: Setting, cadence: Setting) -> None:
        known = [key for key in fields.DATABASE_FIELDS if key != LEGACY_CADENCE_KEY]
        nested = {name: section for section, names in fields.SECTION_FIELDS.items() for name in names}
        for key in database:
            if key in fields.DATABASE_FIELDS:
                continue
            if key in nested:
                self.unknown((DATABASE, key), f"{nested[key]}.{key}", mode, cadence)
            else:
                self.unknown((DATABASE, key), _suggest(key, known), mode, cadence)
        for section, section_fields in fields.SECTION_FIELDS.items():
            value = database.get(section)
            if isinstance(value, dict):
                for key in value:
                    if key not in section_fields:
                        self.unknown((DATABASE, section, key), _suggest(key, list(section_fields)), mode, cadence)

    def unknown(self, path: tuple[Any, ...], suggestion: str | None, mode: Setting, cadence: Setting) -> None:
        message = f"{dotted(path)} is not a key DeerFlow knows; it is ignored"
        if suggestion is not None:
            last = suggestion.rsplit(".", 1)[-1]
            if last == CADENCE_KEY:
                message += f" and the cadence stays {_value_text(cadence)}"
            elif last == CHANNEL_MODE_KEY:
                message += f" and the channel mode stays {_value_text(mode)}"
            message += f" (did you mean {suggestion}?)"
        self.add(RuleCode.CK505, self.source.line(*path), message)

    def check_full_mode(self, mode: Setting, cadence: Setting) -> None:
        # config.example.yaml itself sets the default cadence in full mode: only another value misleads.
        if mode.value != "full" or cadence.default or not cadence.known or cadence.value == DEFAULT_CADENCE:
            return
        how = "is not set, so it is full" if mode.default else "is full"
        self.add(
            RuleCode.CK506,
            cadence.line,
            f"{cadence.origin} is {cadence.value} but database.{CHANNEL_MODE_KEY} {how}: DeerFlow stores full "
            "checkpoints and the cadence changes nothing on disk (it is still frozen at startup, so a later edit "
            f"needs a restart); remove it or set {CHANNEL_MODE_KEY}: delta",
        )

    # -- where checkpoints go --------------------------------------------------------------------

    def unset_location(self, section: str) -> Unlocated | None:
        """Where checkpoints go depends on a `$VAR` that is not set here."""
        for reference in self.references:
            unset = isinstance(reference.value, Unset) and reference.path[0] == section
            if unset and reference.path[-1] in LOCATION_KEYS[section]:
                return Unlocated(f"{dotted(reference.path)} comes from ${reference.name}, which is not set here")
        return None

    def locate(self, data: dict[Any, Any], section: str) -> DatabaseIdentity | Unlocated:
        unset = self.unset_location(section)
        if unset is not None:
            return unset
        if self.refused():
            return Unlocated("DeerFlow cannot load this file")
        location = checkpoint_identity(read_database_settings(data, self.environ), self.environ, self.cwd)
        self.check_location(location, section)
        return location

    def check_location(self, location: DatabaseIdentity | Unlocated, section: str) -> None:
        if isinstance(location, Unlocated) and location.refused is not None:
            keys = ("connection_string", "type") if section == LEGACY_CHECKPOINTER else ("postgres_url", "backend")
            path = next(((section, key) for key in keys if self.source.pair((section, key))), (section,))
            code = RuleCode.CK513 if location.refused is Refusal.STARTUP else RuleCode.CK500
            self.add(code, self.source.line(*path), f"{dotted(path)}: {location.reason}")

    def check_checkpointer(
        self, data: dict[Any, Any], checkpointer: dict[Any, Any], location: DatabaseIdentity | Unlocated
    ) -> None:
        for name in MISPLACED:
            if name in checkpointer:
                self.misplaced((LEGACY_CHECKPOINTER, name), "under checkpointer:")
        if self.refused():
            return
        instead = self.unset_location(DATABASE) or checkpoint_identity(
            read_database_settings({**data, LEGACY_CHECKPOINTER: None}, self.environ), self.environ, self.cwd
        )
        # DeerFlow's app tables still use database: under a checkpointer override, so its refusals stand.
        self.check_location(instead, DATABASE)
        if self.refused():
            return
        if _same_place(location, instead) or _same_reference(data):
            return  # both sections name one database (upstream's Helm chart does): nothing is redirected
        if isinstance(location, DatabaseIdentity):
            where = location.display
        else:
            where = f"{'nowhere on disk' if location.in_memory else 'the place it names'} ({location.reason})"
        instead_text = instead.display if isinstance(instead, DatabaseIdentity) else instead.reason
        self.add(
            RuleCode.CK507,
            self.source.line(LEGACY_CHECKPOINTER),
            f"the legacy checkpointer: section overrides database: for checkpoints: DeerFlow writes them to "
            f"{where}, not to what database: names ({instead_text})",
        )

    def check_checkpointer_fields(self, checkpointer: dict[Any, Any]) -> None:
        """DeerFlow's CheckpointerConfig: a required type, a validated schema; a failure refuses the file."""
        if "type" not in checkpointer:
            self.add(
                RuleCode.CK500,
                self.source.line(LEGACY_CHECKPOINTER),
                "checkpointer: has no type, which DeerFlow requires (checkpointer.type: Field required; one of "
                f"{', '.join(CHECKPOINTER_TYPES)}); DeerFlow cannot start with this file",
            )
        kind = checkpointer.get("type")
        if "type" in checkpointer and not isinstance(kind, Unset) and kind not in CHECKPOINTER_TYPES:
            self.check_value((LEGACY_CHECKPOINTER, "type"), "backend", kind)
        for key in ("postgres_schema", "connection_string"):
            value = checkpointer.get(key)
            # connection_string may be null (sqlite's store.db); postgres_schema is a str, null included.
            if (
                key in checkpointer
                and not isinstance(value, (str, Unset))
                and (value is not None or key == "postgres_schema")
            ):
                self.add(
                    RuleCode.CK500,
                    self.source.line(LEGACY_CHECKPOINTER, key),
                    f"checkpointer.{key} is {self.source.described((LEGACY_CHECKPOINTER, key), value)}: DeerFlow "
                    "rejects it (Input should be a valid string), so it cannot start",
                )
        schema = checkpointer.get("postgres_schema")
        if isinstance(schema, str):
            problem = fields.schema_problem(schema)
            if problem:
                self.add(
                    RuleCode.CK500,
                    self.source.line(LEGACY_CHECKPOINTER, "postgres_schema"),
                    f"checkpointer.postgres_schema is rejected by DeerFlow: {problem}; DeerFlow cannot start with "
                    "this file",
                )


def _same_place(left: DatabaseIdentity | Unlocated, right: DatabaseIdentity | Unlocated) -> bool:
    return isinstance(left, DatabaseIdentity) and isinstance(right, DatabaseIdentity) and left.key == right.key


def _same_reference(data: dict[Any, Any]) -> bool:
    """Both sections name Postgres through the same text and schema (`$DATABASE_URL` unset here, say)."""
    database, checkpointer = data.get(DATABASE), data.get(LEGACY_CHECKPOINTER)
    if not isinstance(database, dict) or not isinstance(checkpointer, dict) or checkpointer.get("type") != "postgres":
        return False
    if database.get("backend") != "postgres" or not isinstance(database.get("postgres_url"), str):
        return False
    same_schema = (database.get("postgres_schema") or "") == (checkpointer.get("postgres_schema") or "")
    return same_schema and database.get("postgres_url") == checkpointer.get("connection_string")


def _reading(value: object) -> CadenceReading:
    if isinstance(value, Unset):
        return CadenceReading(value, None, env_reference=value.name)
    return read_cadence(value)


def _same_cadence(legacy: object, nested: object) -> bool:
    left, right = _reading(legacy), _reading(nested)
    if left.effective is not None and right.effective is not None:
        return left.effective == right.effective
    return legacy == nested


def _value_text(setting: Setting) -> str:
    return str(setting.value) if setting.known else "unknown (read from the environment)"
