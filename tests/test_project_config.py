"""The project config (`[tool.ckpt]` in pyproject.toml, or .ckpt.toml) and rule selection (--select, --ignore,
--extend-select, --severity): where the file is found, what beats what, and what each output format shows.

Discovery and precedence are read back through `ckpt config` (exact bytes); the effect on a scan through
verify-shape on the real database the builder writes, and on lint-config with the config corpus.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from deerflow_ckpt.config.project import COMMAND_TABLES
from deerflow_ckpt.rule_selection import RuleSelection, SelectionLayer, resolve_selection
from deerflow_ckpt.rules import RuleCode, Severity
from tests.cli import CkptRun, run_ckpt
from tests.conftest import BuiltDatabase
from tests.test_ci_cli import CLEAN, CORPUS, FAULTY, FORK_ONLY, legacy_config

# What `ckpt config` prints for each key no file sets: a default the command works out when it runs in --help's
# words, in parentheses (never "(not set)").
DEFAULTS = [
    ("db", "(from config.yaml)"),
    ("schema", '""'),
    ("config", "(found the way DeerFlow finds it)"),
    ("deerflow_root", "(a checkout containing the working directory)"),
    ("cadence", "(the config's effective value)"),
    ("max_supersteps", "5000"),
    ("clock_skew", '"5s"'),
    ("rolling_window", '"15m"'),
    ("network_timeout", '"120s"'),
    ("statement_timeout", "(the role's or the server's, unchanged)"),
    ("jobs", "(one per 15,000 checkpoints, at most the idle CPUs and 4)"),
    ("format", '"text"'),
    ("fail_on", '"error"'),
    ("color", '"auto"'),
    ("sqlite_base", "(the current directory)"),
    ("assume_set", "[]"),
    ("allowed_types", "[]"),
    ("select", '["CK"]'),
    ("extend_select", "[]"),
    ("ignore", "[]"),
]


def expected_settings(head: str, changed: dict[str, tuple[str, str]], extra: list[tuple[str, str, str]]) -> str:
    """`ckpt config`'s exact text: `changed` maps a key to (value, source); `extra` adds table keys."""
    rows = [(key, *changed.get(key, (value, "default"))) for key, value in DEFAULTS]
    rows += extra
    width = max(len(f"{key} = {value}") for key, value, _ in rows)
    lines = [f"# project config: {head}"]
    lines += [f"{f'{key} = {value}'.ljust(width)}  # {source}" for key, value, source in rows]
    return "\n".join(lines) + "\n"


def setting(result: CkptRun, key: str) -> tuple[str, str]:
    """(value, source) of `key`'s line in `ckpt config`'s output."""
    line = next(line for line in result.stdout.splitlines() if line.startswith(f"{key} = "))
    value, source = line.removeprefix(f"{key} = ").split("  # ")
    return value.strip(), source


def show(cwd: Path, *args: str) -> CkptRun:
    return run_ckpt(*args, "config", cwd=cwd)


# -- discovery -------------------------------------------------------------------------------------------------


@pytest.mark.slow  # the first `ckpt config` imports every command's module
def test_no_file_anywhere_prints_the_defaults(tmp_path: Path) -> None:
    result = show(tmp_path)
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout == expected_settings("none (none found)", {}, [])


@pytest.mark.slow  # the first `ckpt config` imports every command's module
def test_a_default_worked_out_at_run_time_reads_as_help_says_it(tmp_path: Path) -> None:
    """--jobs showed "(not set)", though the command picks a count: now what --help says it picks."""
    result = show(tmp_path)
    assert "(not set)" not in result.stdout
    verify_help = " ".join(run_ckpt("verify-shape", "--help").stdout.split())
    jobs, source = setting(result, "jobs")
    assert source == "default" and jobs.startswith("(one per ")
    assert f"[default: {jobs}; x>=1]" in verify_help
    for key in ("db", "config", "statement_timeout", "deerflow_root"):
        assert f"[default: {setting(result, key)[0]}]" in verify_help, key


def test_dotfile_in_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / ".ckpt.toml").write_text('fail_on = "warning"\njobs = 1\n', encoding="utf-8")
    where = str(tmp_path / ".ckpt.toml")
    result = show(tmp_path)
    assert result.exit_code == 0, result.output
    assert result.stdout == expected_settings(
        f"{where} (found from {tmp_path})", {"fail_on": ('"warning"', where), "jobs": ("1", where)}, []
    )


@pytest.mark.slow
def test_nearest_pyproject_with_a_ckpt_table_from_the_parents(tmp_path: Path) -> None:
    """A nearer pyproject.toml without [tool.ckpt] is passed over (ruff's rule); the nearest with it decides,
    and relative paths in it are relative to its directory."""
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "app"\n\n[tool.ckpt]\ndb = "var/checkpoints.db"\ncadence = 25\n\n'
        '[tool.ckpt.verify-shape]\nformat = "sarif"\n\n[tool.ckpt.severity]\nCK205 = "error"\n',
        encoding="utf-8",
    )
    package = tmp_path / "pkg"
    deeper = package / "src" / "module"
    deeper.mkdir(parents=True)
    (package / "pyproject.toml").write_text(
        '[project]\nname = "pkg"\n[tool.ruff]\nline-length = 99\n', encoding="utf-8"
    )
    table = f"{tmp_path / 'pyproject.toml'} [tool.ckpt]"
    result = show(deeper)
    assert result.exit_code == 0, result.output
    assert result.stdout == expected_settings(
        f"{tmp_path / 'pyproject.toml'} (found from {deeper})",
        {"db": (json.dumps(str(tmp_path / "var" / "checkpoints.db")), table), "cadence": ("25", table)},
        [
            ("verify-shape.format", '"sarif"', f"{tmp_path / 'pyproject.toml'} [tool.ckpt.verify-shape]"),
            ("severity.CK205", '"error"', f"{tmp_path / 'pyproject.toml'} [tool.ckpt.severity]"),
        ],
    )


def test_dotfile_beats_pyproject_in_one_directory_and_nearer_beats_farther(tmp_path: Path) -> None:
    (tmp_path / ".ckpt.toml").write_text("jobs = 3\n", encoding="utf-8")
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "pyproject.toml").write_text("[tool.ckpt]\njobs = 2\n", encoding="utf-8")
    (inner / ".ckpt.toml").write_text("jobs = 1\n", encoding="utf-8")
    assert setting(show(inner), "jobs") == ("1", str(inner / ".ckpt.toml"))
    (inner / ".ckpt.toml").unlink()
    assert setting(show(inner), "jobs") == ("2", f"{inner / 'pyproject.toml'} [tool.ckpt]")
    (inner / "pyproject.toml").unlink()
    assert setting(show(inner), "jobs") == ("3", str(tmp_path / ".ckpt.toml"))


def test_config_file_in_pyproject_form_under_another_name(tmp_path: Path) -> None:
    named = tmp_path / "ckpt-settings.toml"
    named.write_text("[tool.other]\nx = 1\n[tool.ckpt]\njobs = 1\n", encoding="utf-8")
    result = run_ckpt("--config-file", str(named), "config", cwd=tmp_path)
    assert setting(result, "jobs") == ("1", f"{named} [tool.ckpt]")


@pytest.mark.parametrize("placement", ["before", "after", "equals"])
def test_config_file_names_the_file_instead(tmp_path: Path, placement: str) -> None:
    (tmp_path / ".ckpt.toml").write_text("jobs = 3\n", encoding="utf-8")
    elsewhere = tmp_path / "ci" / "ckpt-ci.toml"
    elsewhere.parent.mkdir()
    elsewhere.write_text('fail_on = "info"\n', encoding="utf-8")
    args = {
        "before": ["--config-file", str(elsewhere), "config"],
        "after": ["config", "--config-file", str(elsewhere)],
        "equals": ["config", f"--config-file={elsewhere}"],
    }[placement]
    result = run_ckpt(*args, cwd=tmp_path)
    assert result.exit_code == 0, result.output
    assert result.stdout == expected_settings(
        f"{elsewhere} (--config-file)", {"fail_on": ('"info"', str(elsewhere))}, []
    )


def test_isolated_reads_no_file(tmp_path: Path) -> None:
    (tmp_path / ".ckpt.toml").write_text("jobs = 1\nbogus = 1\n", encoding="utf-8")
    for args in (["--isolated", "config"], ["config", "--isolated"]):
        result = run_ckpt(*args, cwd=tmp_path)
        assert result.exit_code == 0, result.output
        assert result.stdout == expected_settings("none (--isolated)", {}, [])
    both = run_ckpt("--isolated", "--config-file", str(tmp_path / ".ckpt.toml"), "config", cwd=tmp_path)
    assert both.exit_code == 2
    assert both.stderr == "ckpt: error: --isolated reads no project config: it cannot go with --config-file\n"


# -- refusals ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("fail_onn = 'info'\n", "{path}: unknown key 'fail_onn' (did you mean fail_on?)"),
        ("[verify-shape]\nselcet = ['CK1']\n", "{path} [verify-shape]: unknown key 'selcet' (did you mean select?)"),
        ("[verify-shap]\njobs = 1\n", "{path}: unknown key 'verify-shap' (did you mean verify-shape?)"),
        ("jobs = '2'\n", "{path}: jobs must be an integer, got '2'"),
        ("select = 'CK1'\n", "{path}: select must be a list of strings, got 'CK1'"),
        ("jobs = = 1\n", "{path}: not valid TOML: Invalid value (at line 1, column 8)"),
        (
            "select = ['CK2055']\n",
            "{path}: select: unknown rule code 'CK2055' (did you mean CK205?); codes are "
            "CK101-CK513, or a prefix such as CK2",
        ),
        (
            "[severity]\nCK77 = 'error'\n",
            "{path}: severity: unknown rule code 'CK77'; codes are CK101-CK513, or a prefix such as CK2",
        ),
        (
            "[severity]\nCK205 = 'fatal'\n",
            "{path}: severity: unknown severity 'fatal'; expected one of error, warning, info",
        ),
        (
            "[verify-shape]\nformat = 'jsn'\n",
            "{path} [verify-shape]: format: 'jsn' is not one of 'text', 'json', 'github', 'sarif' "
            "(did you mean json?).",
        ),
        ("jobs = 0\n", "{path}: jobs: 0 is not in the range x>=1."),
        ("color = 'nevr'\n", "{path}: color: 'nevr' is not one of 'auto', 'always', 'never' (did you mean never?)."),
    ],
)
def test_bad_settings_are_refused_naming_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / ".ckpt.toml"
    path.write_text(text, encoding="utf-8")
    result = run_ckpt("verify-shape", "--db", str(tmp_path / "none.db"), cwd=tmp_path)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == f"ckpt: error: {message.format(path=path)}\n"


def test_pyproject_key_errors_name_the_tool_table(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.ckpt]\ncolour = 'never'\n", encoding="utf-8")
    result = show(tmp_path)
    assert (result.exit_code, result.stderr) == (
        2,
        f"ckpt: error: {path} [tool.ckpt]: unknown key 'colour' (did you mean color?)\n",
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--select", "CK9"),
            "ckpt: error: --select: unknown rule code 'CK9'; codes are CK101-CK513, or a prefix such as CK2\n",
        ),
        (
            ("--ignore", "CK1,XX1"),
            "ckpt: error: --ignore: unknown rule code 'XX1'; codes are CK101-CK513, or a prefix such as CK2\n",
        ),
        (
            ("--severity", "CK205=fatal"),
            "ckpt: error: --severity: unknown severity 'fatal'; expected one of error, warning, info\n",
        ),
    ],
)
def test_unknown_codes_on_the_command_line_are_refused(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    result = run_ckpt("verify-shape", "--isolated", "--db", str(tmp_path / "none.db"), *args, cwd=tmp_path)
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", message)


def test_an_unknown_code_names_the_registrys_first_and_last_codes() -> None:
    """The range a refusal names is the registry's, whatever rule was added last (CK513 after CK512)."""
    from deerflow_ckpt.rule_selection import UnknownCode, rule_prefix
    from deerflow_ckpt.rules import RULES

    codes = sorted(RULES)
    with pytest.raises(UnknownCode, match=f"codes are {codes[0]}-{codes[-1]}, or a prefix"):
        rule_prefix("CK9", "--select")
    assert rule_prefix(codes[-1].lower(), "--select") == codes[-1]


def test_the_command_tables_are_the_commands() -> None:
    from deerflow_ckpt.cli.app import COMMANDS

    assert set(COMMAND_TABLES) == set(COMMANDS) - {"config"}


# -- selection semantics (pure) -----------------------------------------------------------------------------------


def test_the_most_specific_prefix_decides() -> None:
    selection = RuleSelection(select=("CK305",), ignore=("CK3",))
    assert selection.enabled(RuleCode.CK305) and not selection.enabled(RuleCode.CK301)
    # A tie ignores: ruff's rule.
    assert not RuleSelection(select=("CK3",), ignore=("CK3",)).enabled(RuleCode.CK305)
    graded = RuleSelection(severity=(("CK3", Severity.WARNING), ("CK305", Severity.ERROR)))
    assert graded.severity_of(RuleCode.CK305) is Severity.ERROR
    assert graded.severity_of(RuleCode.CK306) is Severity.WARNING
    assert graded.severity_of(RuleCode.CK101) is Severity.ERROR


def test_a_later_select_states_the_whole_choice() -> None:
    file_layer = SelectionLayer(select=("CK1",), extend_select=("CK2",), ignore=("CK101",))
    assert resolve_selection([file_layer, SelectionLayer(extend_select=("CK3",))]) == RuleSelection(
        ("CK1", "CK2", "CK3"), ("CK101",)
    )
    assert resolve_selection([file_layer, SelectionLayer(select=("CK4",))]) == RuleSelection(("CK4",), ())
    assert resolve_selection([SelectionLayer(), SelectionLayer()]).is_default


# -- verify-shape: a real database ----------------------------------------------------------------------------------


def scan(built: BuiltDatabase, thread: str, cwd: Path, *args: str) -> CkptRun:
    return run_ckpt("verify-shape", "--db", str(built.path), "--thread", thread, *args, cwd=cwd)


def findings(result: CkptRun) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = json.loads(result.stdout)["findings"]
    return found


@pytest.mark.slow
def test_severity_override_reaches_exit_code_and_every_format(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    plain = scan(built_sqlite, FORK_ONLY, tmp_path, "--format", "json")
    assert plain.exit_code == 0
    before = findings(plain)
    assert before and {f["rule"] for f in before} == {"CK305"} and {f["severity"] for f in before} == {"info"}

    raised = ("--severity", "CK305=error")
    as_json = scan(built_sqlite, FORK_ONLY, tmp_path, *raised, "--format", "json")
    assert as_json.exit_code == 1
    after = findings(as_json)
    assert [f["severity"] for f in after] == ["error"] * len(before)
    assert json.loads(as_json.stdout)["summary"]["by_severity"]["error"] == len(before)

    text = scan(built_sqlite, FORK_ONLY, tmp_path, *raised, "--color", "never")
    assert text.exit_code == 1
    assert "CK305 error thread" in text.stdout and "info" not in text.stdout.split("Findings by rule", 1)[1]

    github = scan(built_sqlite, FORK_ONLY, tmp_path, *raised, "--format", "github")
    assert github.exit_code == 1
    assert github.stdout.splitlines() and all(
        line.startswith("::error title=CK305") for line in github.stdout.splitlines()
    )

    sarif = json.loads(scan(built_sqlite, FORK_ONLY, tmp_path, *raised, "--format", "sarif").stdout)
    assert [r["level"] for r in sarif["runs"][0]["results"]] == ["error"] * len(before)


@pytest.mark.slow
def test_select_and_ignore_decide_findings_and_exit(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    everything = findings(scan(built_sqlite, FAULTY, tmp_path, "--format", "json"))
    rules = {f["rule"] for f in everything}
    assert "CK101" in rules
    ignored = scan(built_sqlite, FAULTY, tmp_path, "--ignore", "CK101", "--format", "json")
    assert findings(ignored) == [f for f in everything if f["rule"] != "CK101"]
    expected_exit = int(any(f["severity"] == "error" and f["rule"] != "CK101" for f in everything))
    assert ignored.exit_code == expected_exit
    # Selecting a family the thread has none of: nothing reported, even at --fail-on info.
    none = scan(built_sqlite, FAULTY, tmp_path, "--select", "CK4", "--fail-on", "info", "--format", "sarif")
    assert none.exit_code == 0 and json.loads(none.stdout)["runs"][0]["results"] == []
    # A selection and a more specific extension.
    back = scan(built_sqlite, FAULTY, tmp_path, "--select", "CK4", "--extend-select", "CK101", "--format", "json")
    assert back.exit_code == 1 and findings(back) == [f for f in everything if f["rule"] == "CK101"]


@pytest.mark.slow
def test_project_file_sets_the_gate_and_the_command_line_wins(built_sqlite: BuiltDatabase, tmp_path: Path) -> None:
    """db (relative to the file), fail_on, format and severities from pyproject.toml; each beaten by its option."""
    project = tmp_path / "app"
    work = project / "src"
    work.mkdir(parents=True)
    (project / "var").mkdir()
    (project / "var" / "checkpoints.db").symlink_to(built_sqlite.path)
    pyproject = project / "pyproject.toml"
    pyproject.write_text(
        '[tool.ckpt]\ndb = "var/checkpoints.db"\nfail_on = "info"\n\n[tool.ckpt.verify-shape]\nformat = "json"\n',
        encoding="utf-8",
    )
    from_file = run_ckpt("verify-shape", "--thread", FORK_ONLY, cwd=work)
    assert from_file.exit_code == 1, from_file.output  # CK305 info fails at the file's fail_on
    assert {f["rule"] for f in findings(from_file)} == {"CK305"}
    assert f"(chosen via --db from {pyproject} [tool.ckpt])" in from_file.stderr

    assert run_ckpt("verify-shape", "--thread", FORK_ONLY, "--fail-on", "warning", cwd=work).exit_code == 0
    as_text = run_ckpt("verify-shape", "--thread", FORK_ONLY, "--format", "text", "--color", "never", cwd=work)
    assert as_text.stdout.startswith("Scanned") or "Findings by rule" in as_text.stdout
    assert (
        run_ckpt(
            "verify-shape", "--thread", FORK_ONLY, "--isolated", "--db", str(built_sqlite.path), cwd=work
        ).exit_code
        == 0
    )

    # Severity from the file, the command line's override beating it.
    pyproject.write_text(
        '[tool.ckpt]\ndb = "var/checkpoints.db"\nformat = "json"\nignore = ["CK101"]\n\n'
        '[tool.ckpt.severity]\nCK3 = "warning"\n',
        encoding="utf-8",
    )
    warned = run_ckpt("verify-shape", "--thread", FORK_ONLY, "--fail-on", "warning", cwd=work)
    assert warned.exit_code == 1 and {f["severity"] for f in findings(warned)} == {"warning"}
    back = run_ckpt("verify-shape", "--thread", FORK_ONLY, "--fail-on", "warning", "--severity", "CK305=info", cwd=work)
    assert back.exit_code == 0 and {f["severity"] for f in findings(back)} == {"info"}
    # The file's ignore applies, and a command-line --select replaces it.
    assert "CK101" not in {f["rule"] for f in findings(run_ckpt("verify-shape", "--thread", FAULTY, cwd=work))}
    reselected = run_ckpt("verify-shape", "--thread", FAULTY, "--select", "CK1", cwd=work)
    assert "CK101" in {f["rule"] for f in findings(reselected)}
    clean = run_ckpt("verify-shape", "--thread", CLEAN, "--cadence", "3", cwd=work)
    assert clean.exit_code == 0 and findings(clean) == []


# -- lint-config ------------------------------------------------------------------------------------------------------


def lint(cwd: Path, *args: str) -> CkptRun:
    return run_ckpt("lint-config", "config.yaml", *args, cwd=cwd)


@pytest.mark.slow
def test_lint_config_rules_follow_selection_and_severity(tmp_path: Path) -> None:
    legacy_config(tmp_path)  # one CK501 warning
    assert lint(tmp_path).exit_code == 0
    raised = lint(tmp_path, "--severity", "CK501=error", "--format", "json")
    assert raised.exit_code == 1
    [finding] = json.loads(raised.stdout)["findings"]
    assert (finding["rule"], finding["severity"]) == ("CK501", "error")
    sarif = json.loads(lint(tmp_path, "--severity", "CK501=error", "--format", "sarif").stdout)
    assert [r["level"] for r in sarif["runs"][0]["results"]] == ["error"]
    github = lint(tmp_path, "--severity", "CK501=error", "--format", "github")
    assert github.stdout.startswith("::error title=CK501 deprecated flat cadence key,file=config.yaml,line=8::")
    text = lint(tmp_path, "--severity", "CK501=error", "--color", "never")
    assert text.stdout.startswith("config.yaml:8: CK501 error: ") and "0 warnings" in text.stdout

    ignored = lint(tmp_path, "--ignore", "CK5", "--fail-on", "info", "--format", "json")
    assert ignored.exit_code == 0 and json.loads(ignored.stdout)["findings"] == []

    (tmp_path / ".ckpt.toml").write_text('[lint-config]\nfail_on = "warning"\n', encoding="utf-8")
    assert lint(tmp_path).exit_code == 1
    (tmp_path / ".ckpt.toml").write_text('ignore = ["CK501"]\nfail_on = "warning"\n', encoding="utf-8")
    assert lint(tmp_path).exit_code == 0
    assert lint(tmp_path, "--select", "CK501").exit_code == 1


@pytest.mark.slow
def test_the_docs_example_is_what_ckpt_config_prints(tmp_path: Path) -> None:
    """docs/ci-gate.md's pyproject.toml and `ckpt config` output, with /repo standing for the project."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "ci-gate.md").read_text(encoding="utf-8")
    section = page.split("## `ckpt config`", 1)[1]
    pyproject = section.split("```toml\n", 1)[1].split("```", 1)[0]
    printed = section.split("```text\n", 1)[1].split("```", 1)[0]
    (tmp_path / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    (tmp_path / "app").mkdir()
    result = show(tmp_path / "app")
    assert result.exit_code == 0, result.output

    # The column of sources moves with the path's length: compared up to the alignment.
    def unaligned(text: str) -> str:
        return re.sub(r" +# ", "  # ", text)

    assert unaligned(result.stdout.replace(str(tmp_path), "/repo")) == unaligned(printed)


@pytest.mark.slow
@pytest.mark.parametrize("page", ["docs/ci-gate.md"])
def test_every_toml_example_in_the_docs_loads(tmp_path: Path, page: str) -> None:
    text = (Path(__file__).resolve().parents[1] / page).read_text(encoding="utf-8")
    blocks = re.findall(r"```toml\n(.*?)```", text, re.DOTALL)
    assert blocks
    for index, block in enumerate(blocks):
        example = tmp_path / f"example{index}.toml"
        example.write_text(block, encoding="utf-8")
        result = run_ckpt("--config-file", str(example), "config", cwd=tmp_path)
        assert result.exit_code == 0, (block, result.output)


def test_a_list_valued_key_sets_a_repeatable_option(tmp_path: Path) -> None:
    """`assume_set = [...]` in a command's table is `--assume-set` given once per item; the command line's
    list replaces it."""
    (tmp_path / "config.yaml").write_bytes((CORPUS / "env_var" / "input.yaml").read_bytes())

    def rules(*args: str) -> list[str]:
        result = run_ckpt("lint-config", "config.yaml", "--format", "json", *args, cwd=tmp_path)
        return sorted(f"{f['rule']} {f['severity']}" for f in json.loads(result.stdout)["findings"])

    def errors(found: list[str]) -> int:
        # An unset variable is CK500 (the file cannot load) or, under a DSN key, CK513 (DeerFlow cannot start).
        return found.count("CK500 error") + found.count("CK513 error")

    unset = rules()
    assert errors(unset) == 2 and "CK509 info" not in unset
    (tmp_path / ".ckpt.toml").write_text('[lint-config]\nassume_set = ["SNAPSHOT_FREQ"]\n', encoding="utf-8")
    assumed = rules()
    assert errors(assumed) == 1 and "CK509 info" in assumed
    assert rules("--assume-set", "OTHER") == unset


@pytest.fixture(scope="module")
def project_with_a_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A project whose pyproject.toml names its database (a plain LangGraph app's store, written through
    SqliteSaver), and the directory below it a command runs from."""
    from fixtures import plain_app

    project = tmp_path_factory.mktemp("project")
    plain_app.write_sqlite(project / "app.db")
    (project / "pyproject.toml").write_text('[tool.ckpt]\ndb = "app.db"\n', encoding="utf-8")
    (project / "src").mkdir()
    return project, project / "src"


@pytest.mark.parametrize(
    "args",
    [
        ["verify-shape"],
        ["inspect", "thread", "--top", "1"],
        ["inspect", "summary"],
        ["inspect", "storage"],
        ["plan", "retention", "--keep-newest", "3", "--mode", "full"],
        ["convert", "--to", "delta", "--output", "{out}"],
    ],
    ids=lambda args: " ".join(args[:2]),
)
def test_every_database_command_says_the_db_came_from_the_project_file(
    project_with_a_db: tuple[Path, Path], tmp_path: Path, args: list[str]
) -> None:
    """verify-shape said "chosen via --db from <file>"; inspect, plan retention and convert said "--db" alone."""
    project, work = project_with_a_db
    argv = [arg.format(out=tmp_path / "converted.db") for arg in args]
    result = run_ckpt(*argv, cwd=work)
    assert result.exit_code in (0, 1), result.output
    via = f"--db from {project / 'pyproject.toml'} [tool.ckpt]"
    # On stderr when the command starts (inspect's text names the database only in its report), and in the report.
    assert f"(chosen via {via})" in result.stdout + result.stderr, result.output
    assert f"(chosen via {via})" in result.stdout or f"found via {via}" in result.stdout, result.stdout
    if args[0] != "convert":  # its --output exists now
        given = run_ckpt(*argv, "--db", str(project / "app.db"), cwd=work)
        assert "(chosen via --db)" in given.stdout + given.stderr and "--db from" not in given.output
