"""What attacking ckpt's credentials and limits found: one masking rule for every credential form, masking in
linear time, and a huge integer or a symbolic-link loop as a one-line error, each tested as the attack was made.

Every leak test reads a real config file (or a --db argument), runs the command in every format, with and
without --debug, and looks in stdout, stderr and the step summary for the password and for every piece of
three or more of its characters that the input does not hold elsewhere. ckpt remembers a password it has
seen for the rest of the process; each in-process run here starts with nothing remembered, as a new process
does, so a pattern that misses a password is not hidden by an earlier run that remembered it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from deerflow_ckpt import redact as redact_module
from deerflow_ckpt.redact import redact
from tests.cli import CkptRun, run_ckpt
from tests.conftest import BuiltDatabase


@pytest.fixture(autouse=True)
def _nothing_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redact_module, "_known_secrets", set())
    monkeypatch.setattr(redact_module, "_known_credentials", set())


def fresh_run(*args: str, **kwargs: object) -> CkptRun:
    """run_ckpt in process, with no secret remembered from an earlier run (a new process's memory)."""
    redact_module._known_secrets.clear()
    redact_module._known_credentials.clear()
    return run_ckpt(*args, **kwargs)  # type: ignore[arg-type]


def leaked_pieces(password: str, shown: str, given: str) -> list[str]:
    """The pieces of `password` (3 characters or more) in `shown` that `given` does not hold elsewhere."""
    elsewhere = given.replace(password, "\0")
    pieces = {password[i:j] for i in range(len(password)) for j in range(i + 3, len(password) + 1)}
    return sorted(piece for piece in pieces if piece in shown and piece not in elsewhere)


def assert_hidden(password: str, result: CkptRun, given: str, summary: Path | None = None) -> None:
    shown = result.stdout + result.stderr + (summary.read_text() if summary is not None and summary.exists() else "")
    assert not leaked_pieces(password, shown, given), (leaked_pieces(password, shown, given), shown[-2000:])


# Every command that reads a database, with every format it takes.
DATABASE_COMMANDS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("verify-shape",), ("text", "json", "github", "sarif")),
    (("inspect", "summary"), ("text", "json", "csv")),
    (("inspect", "thread", "some-thread"), ("text", "json", "csv")),
    (("inspect", "storage"), ("text", "json", "csv")),
    (("plan", "retention", "--keep-newest", "1"), ("text", "json", "sql")),
)


def database_runs(*target: str) -> Iterator[tuple[str, ...]]:
    for command, formats in DATABASE_COMMANDS:
        for output_format in formats:
            for debug in ((), ("--debug",)):
                yield (*debug, *command, *target, "--format", output_format)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# -- 4: a postgres_url (or connection_string) given as a mapping -------------------------------------------

MAPPING_PASSWORD = "Wq3Zr7Xk9Pv"
MAPPING_CONFIGS = {
    "database": "database:\n  backend: postgres\n  postgres_url:\n"
    f"    url: postgresql://root@127.0.0.1:1/db\n    password: {MAPPING_PASSWORD}\n",
    "flow": "database:\n  backend: postgres\n"
    f"  postgres_url: {{url: 'postgresql://root@127.0.0.1:1/db', pass: {MAPPING_PASSWORD}}}\n",
    "checkpointer": "checkpointer:\n  type: postgres\n  connection_string:\n"
    f"    - postgresql://root@127.0.0.1:1/db\n    - {MAPPING_PASSWORD}\n",
}


@pytest.mark.slow
@pytest.mark.parametrize("layout", sorted(MAPPING_CONFIGS))
def test_a_mapping_postgres_url_is_refused_by_name_and_never_printed(tmp_path: Path, layout: str) -> None:
    text = MAPPING_CONFIGS[layout]
    config = write(tmp_path / "config.yaml", text)
    summary = tmp_path / "summary.md"
    for args in database_runs("--config", str(config)):
        result = fresh_run(*args, env={"GITHUB_STEP_SUMMARY": str(summary)})
        assert result.exit_code == 2, (args, result.output)
        assert_hidden(MAPPING_PASSWORD, result, text, summary)
        assert "internal error" not in result.stderr and "{" not in result.stderr.splitlines()[-1]
        key = "checkpointer.connection_string" if layout == "checkpointer" else "database.postgres_url"
        kind = "a list" if layout == "checkpointer" else "a mapping"
        assert f"{key} is {kind}, not a string" in result.stderr, (args, result.stderr)
    for output_format in ("text", "json", "github", "sarif"):
        for debug in ((), ("--debug",)):
            lint = fresh_run(*debug, "lint-config", str(config), "--format", output_format)
            assert lint.exit_code == 1 and "CK500" in lint.stdout, lint.output
            assert_hidden(MAPPING_PASSWORD, lint, text)


@pytest.mark.slow
def test_a_mapping_postgres_url_in_a_fresh_process(tmp_path: Path) -> None:
    text = MAPPING_CONFIGS["database"]
    config = write(tmp_path / "config.yaml", text)
    result = run_ckpt("--debug", "verify-shape", "--config", str(config), process=True)
    assert result.exit_code == 2
    assert_hidden(MAPPING_PASSWORD, result, text)
    assert "database.postgres_url is a mapping, not a string" in result.stderr


# -- 5: a DSN however spelt: an unencoded '@', '/' or space, short pieces, key=value conninfo --------------

# (DSN, its password): every reading of the password libpq or a person might make stops somewhere else.
SPELT_DSNS = (
    ("postgresql://root:Tr0ub4dor@x9z@nohost.invalid/db", "Tr0ub4dor@x9z"),
    ("postgresql://root:Tr0ub4dor@x9z@127.0.0.1:1/db", "Tr0ub4dor@x9z"),
    ("postgresql://root:Gr8/q7z@127.0.0.1:1/db", "Gr8/q7z"),
    ("postgresql://root:Zx9 Lq2@127.0.0.1:1/db", "Zx9 Lq2"),
    ("postgresql+psycopg://root:Vb7@@127.0.0.1:1/db", "Vb7@"),
    ("host=127.0.0.1 port=1 dbname=db password=Kq3 Wv8", "Kq3 Wv8"),
    ("host=127.0.0.1 port=1 dbname=db password='Jm4 Yh6' user=root", "Jm4 Yh6"),
)


@pytest.mark.slow
@pytest.mark.parametrize(("dsn", "password"), SPELT_DSNS)
def test_a_dsn_however_spelt_never_shows_its_password(tmp_path: Path, dsn: str, password: str) -> None:
    config_text = f"database:\n  backend: postgres\n  postgres_url: {json.dumps(dsn)}\n"
    config = write(tmp_path / "config.yaml", config_text)
    summary = tmp_path / "summary.md"
    for target, given in ((("--config", str(config)), config_text), (("--db", dsn), dsn)):
        for args in database_runs(*target):
            result = fresh_run(*args, env={"GITHUB_STEP_SUMMARY": str(summary)})
            assert result.exit_code == 2, (args, result.output)
            assert "internal error" not in result.stderr
            assert_hidden(password, result, given, summary)
    for output_format in ("text", "json", "github", "sarif"):
        lint = fresh_run("lint-config", str(config), "--format", output_format)
        assert lint.exit_code in (0, 1), lint.output
        assert_hidden(password, lint, config_text)


@pytest.mark.slow
def test_an_unencoded_at_is_refused_before_libpq_reads_it(tmp_path: Path) -> None:
    """libpq would take 'x9z@127.0.0.1' for the host and say so: ckpt says what is wrong instead."""
    for dsn, _ in SPELT_DSNS[:3]:
        result = run_ckpt("verify-shape", "--db", dsn, process=True)
        assert result.exit_code == 2
        assert "percent-encode" in result.stderr and "failed to resolve host" not in result.stderr, result.stderr
        assert result.stderr.count("\n") == 1, result.stderr


def test_a_dsn_that_connects_nowhere_is_still_named_masked() -> None:
    result = fresh_run("verify-shape", "--db", "postgresql://root:Hx5 Pq9@127.0.0.1:1/db")
    assert (
        result.exit_code == 2 and "cannot connect to PostgreSQL postgresql://root:***@127.0.0.1:1/db" in result.stderr
    )


# -- 6: migrate-config --diff shows a config's lines: its credentials masked ------------------------------

DIFF_PASSWORD = "Dq8 Mw@Zr1"
DIFF_CONFIG = (
    "# the team's database\n"
    "database:\n"
    "  backend: postgres\n"
    f"  postgres_url: 'postgresql://deer:{DIFF_PASSWORD}@db.internal/app'\n"
    "  checkpoint_channel_mode: delta\n"
    "  checkpoint_delta_snapshot_frequency: 5\n"
    "redis:\n"
    f"  password: {DIFF_PASSWORD}\n"
)


@pytest.mark.parametrize("output_format", ["text", "json", "github", "sarif"])
def test_a_config_diff_masks_the_password_on_its_context_lines(tmp_path: Path, output_format: str) -> None:
    config = write(tmp_path / "config.yaml", DIFF_CONFIG)
    summary = tmp_path / "summary.md"
    for mode in (("--diff",), ("--check", "--diff")):
        for debug in ((), ("--debug",)):
            result = fresh_run(
                *debug, "migrate-config", *mode, "--format", output_format, str(config),
                env={"GITHUB_STEP_SUMMARY": str(summary)},
            )  # fmt: skip
            assert result.exit_code in (0, 1), result.output
            assert_hidden(DIFF_PASSWORD, result, DIFF_CONFIG, summary)
            if output_format in ("text", "json"):
                diff = result.stdout if output_format == "text" else json.loads(result.stdout)["files"][0]["diff"]
                assert "   postgres_url: 'postgresql://deer:***@db.internal/app'\n" in diff, diff
                assert "+  checkpoint_delta:\n+    snapshot_frequency: 5\n" in diff
    assert config.read_text() == DIFF_CONFIG


def test_a_config_diff_masks_a_password_of_a_mapping_postgres_url(tmp_path: Path) -> None:
    text = MAPPING_CONFIGS["flow"] + "  checkpoint_delta_snapshot_frequency: 5\n"
    config = write(tmp_path / "config.yaml", text)
    result = fresh_run("migrate-config", "--diff", str(config))
    assert result.exit_code == 0 and "+  checkpoint_delta:" in result.stdout, result.output
    assert_hidden(MAPPING_PASSWORD, result, text)


# -- 10: masking is linear: megabyte tokens and a 100,000-character thread id ------------------------------

BOUND_S = 20.0


@pytest.mark.parametrize(
    "text",
    [
        "a" * 2_000_000,
        "a://" * 500_000,
        "a://b:" * 300_000 + "@",
        "password='" * 200_000,
        "password=" * 200_000,
        "password   " * 200_000,
        "x://a/b" * 300_000 + ":@",
    ],
    ids=["letters", "schemes", "userinfo", "quoted", "keys", "spaces", "paths"],
)
@pytest.mark.slow
def test_masking_a_two_megabyte_message_is_quick(text: str) -> None:
    started = time.monotonic()
    redact(text)
    assert time.monotonic() - started < 2.0


TOKEN = "a" * 2_000_000
BIG_VALUES = {
    "cadence": f"  checkpoint_delta:\n    snapshot_frequency: {TOKEN}\n",
    # A host of megabytes: the database's description is masked before it is shown.
    "postgres_url host": f"  backend: postgres\n  postgres_url: postgresql://{TOKEN}/db\n",
    "postgres_url": f"  backend: postgres\n  postgres_url: {TOKEN}\n",
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(BIG_VALUES))
def test_lint_config_reads_a_two_megabyte_token_quickly(tmp_path: Path, case: str) -> None:
    config = write(tmp_path / "config.yaml", f"database:\n  checkpoint_channel_mode: delta\n{BIG_VALUES[case]}")
    started = time.monotonic()
    result = run_ckpt("lint-config", str(config), process=True)
    assert time.monotonic() - started < BOUND_S
    assert result.exit_code in (0, 1) and "1 config file" in result.stdout, result.output[-2000:]


@pytest.mark.slow
def test_a_hundred_thousand_character_thread_id_is_answered_quickly(built_sqlite: BuiltDatabase) -> None:
    thread = "t" * 100_000
    for args in (
        ("verify-shape", "--thread", thread),
        ("inspect", "thread", thread),
        ("plan", "retention", "--keep-newest", "1", "--thread", thread),
    ):
        started = time.monotonic()
        result = run_ckpt(*args, "--db", built_sqlite.db, process=True)
        assert time.monotonic() - started < BOUND_S, args
        assert result.exit_code == 2 and "no checkpoints for thread" in result.stderr, result.stderr[-500:]


# -- 14: a 4,301-digit decimal cadence and a symbolic-link loop are one-line errors -----------------------

DIGITS = "9" * 4301
HUGE_CADENCES = {
    "nested": f"database:\n  checkpoint_channel_mode: delta\n  checkpoint_delta:\n    snapshot_frequency: {DIGITS}\n",
    "legacy": f"database:\n  checkpoint_channel_mode: delta\n  checkpoint_delta_snapshot_frequency: {DIGITS}\n",
}
READING_COMMANDS = (("verify-shape",), ("inspect", "summary"), ("plan", "retention", "--keep-newest", "1"))


def one_line_error(result: CkptRun) -> str:
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("ckpt: error: "), result.stderr
    assert "internal error" not in result.stderr
    return result.stderr


@pytest.mark.parametrize("layout", sorted(HUGE_CADENCES))
def test_a_cadence_of_4301_digits_is_a_clean_error(tmp_path: Path, layout: str, built_sqlite: BuiltDatabase) -> None:
    config = write(tmp_path / "config.yaml", HUGE_CADENCES[layout])
    line = 4 if layout == "nested" else 3
    for command in READING_COMMANDS:
        error = one_line_error(run_ckpt(*command, "-q", "--config", str(config), "--db", built_sqlite.db))
        assert "an integer of 4301 digits" in error and f"line {line}" in error and "set_int_max_str" not in error
    lint = run_ckpt("lint-config", str(config), "--format", "json")
    assert lint.exit_code == 1, lint.output
    [finding] = json.loads(lint.stdout)["findings"]
    assert finding["rule"] == "CK500" and finding["line"] == line and "an integer of 4301 digits" in finding["message"]
    migrate = run_ckpt("migrate-config", str(config))
    assert migrate.exit_code == 2 and "an integer of 4301 digits" in migrate.stderr, migrate.output
    assert "internal error" not in migrate.stderr and config.read_text() == HUGE_CADENCES[layout]


def test_a_symlink_loop_for_a_config_is_a_clean_error(tmp_path: Path, built_sqlite: BuiltDatabase) -> None:
    first, second, itself = tmp_path / "a.yaml", tmp_path / "b.yaml", tmp_path / "self.yaml"
    os.symlink(second, first)
    os.symlink(first, second)
    os.symlink(itself, itself)
    for config in (first, itself):
        for command in READING_COMMANDS:
            for debug in ((), ("--debug",)):
                result = run_ckpt(*debug, *command, "--config", str(config), "--db", built_sqlite.db)
                error = result.stderr.splitlines()[-1] if debug else one_line_error(result)
                assert f"{config}: is a loop of symbolic links" in error, result.stderr
        for args in (("lint-config",), ("migrate-config",), ("migrate-config", "--diff")):
            assert f"{config}: is a loop of symbolic links" in one_line_error(run_ckpt(*args, str(config)))
        valid = write(tmp_path / "valid.yaml", "database:\n  backend: sqlite\n")
        assert f"{config}: is a loop of symbolic links" in one_line_error(
            run_ckpt("lint-config", str(valid), str(config))
        )


def test_a_symlink_loop_for_a_database_is_a_clean_error(tmp_path: Path) -> None:
    first, second = tmp_path / "a.db", tmp_path / "b.db"
    os.symlink(second, first)
    os.symlink(first, second)
    for command in (*READING_COMMANDS, ("inspect", "storage")):
        assert f"{first}: is a loop of symbolic links" in one_line_error(run_ckpt(*command, "-q", "--db", str(first)))


def test_a_symlink_loop_for_a_report_file_is_a_clean_error(tmp_path: Path, built_sqlite: BuiltDatabase) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    os.symlink(second, first)
    os.symlink(first, second)
    result = run_ckpt("verify-shape", "-q", "--db", built_sqlite.db, "-o", str(first))
    assert f"{first}: is a loop of symbolic links" in one_line_error(result)


# -- review 3: a $VAR password in a credential position is never shown by lint-config's CK509 ---------------

ENV_PASSWORD = "Qz7Xw9Vk2Jh"  # no three letters of it in any English word ckpt prints
ENV_PASSWORD_CONFIGS = {
    "mapping postgres_url": "database:\n  backend: postgres\n  postgres_url:\n    host: db\n    user: deer\n"
    "    password: $PG_SECRET_PW\n",
    "database.password": "database:\n  backend: postgres\n  postgres_url: postgresql://deer@127.0.0.1:1/db\n"
    "  password: $PG_SECRET_PW\n",
    "checkpointer token": "checkpointer:\n  type: sqlite\n  connection_string: store.db\n  api_token: $PG_SECRET_PW\n",
}


@pytest.mark.slow
@pytest.mark.parametrize("layout", sorted(ENV_PASSWORD_CONFIGS))
def test_lint_config_never_shows_a_password_read_from_a_variable(tmp_path: Path, layout: str) -> None:
    text = ENV_PASSWORD_CONFIGS[layout]
    config = write(tmp_path / "config.yaml", text)
    summary = tmp_path / "summary.md"
    env = {"PG_SECRET_PW": ENV_PASSWORD, "GITHUB_STEP_SUMMARY": str(summary)}
    for output_format in ("text", "json", "github", "sarif"):
        for debug in ((), ("--debug",)):
            lint = fresh_run(*debug, "lint-config", str(config), "--format", output_format, env=env)
            assert lint.exit_code in (0, 1) and "CK509" in lint.stdout, lint.output
            assert_hidden(ENV_PASSWORD, lint, text, summary)
            assert "$PG_SECRET_PW" in lint.stdout and "the value is not shown" in lint.stdout, lint.stdout
            # Remembered for every later message of the process, as a password written in the file is.
            assert redact(f"said {ENV_PASSWORD}.") == "said ***.", output_format
    lint = run_ckpt("lint-config", str(config), env=env, process=True)
    assert lint.exit_code in (0, 1) and "CK509" in lint.stdout, lint.output
    assert_hidden(ENV_PASSWORD, lint, text)


# -- review 11: only credentials are remembered, not a mapping postgres_url's user, host or database name ----

WORDS_CONFIG = (
    "database:\n  backend: postgres\n  postgres_url:\n    host: local\n    user: deer\n    dbname: main\n"
    "    port: 5432\n    password: Kv8Pz2Wq\nredis:\n  token: dummy\n  api_key: none\n"
)


def test_ordinary_words_beside_a_password_are_not_masked(tmp_path: Path) -> None:
    write(tmp_path / "config.yaml", WORDS_CONFIG)
    for args in (("--debug", "verify-shape"), ("--debug", "inspect", "summary")):
        result = fresh_run(*args, cwd=tmp_path)
        assert result.exit_code == 2, result.output
        assert_hidden("Kv8Pz2Wq", result, WORDS_CONFIG)
        # The traceback names ckpt's own modules; with user: deer remembered they read ***flow_ckpt.
        assert "deerflow_ckpt.errors.ConfigError" in result.stderr and "***" not in result.stderr, result.stderr
    lint = fresh_run("--debug", "lint-config", "config.yaml", "--format", "json", cwd=tmp_path)
    assert lint.exit_code == 1 and "***" not in lint.output, lint.output
    # Still remembered: the password itself, wherever it is later quoted.
    assert redact("Kv8Pz2Wq local deer main dummy none") == "*** local deer main dummy none"


# -- review 12: the store never imports config/ (DSN parsing lives in the neutral deerflow_ckpt.dsn) --------


def test_no_store_module_imports_config() -> None:
    from tests.test_layers import PACKAGE, imports_of

    store_modules = sorted((PACKAGE / "store").rglob("*.py"))
    assert store_modules
    reaching = [
        f"{path.name}:{line} imports {name}"
        for path in store_modules
        for line, name in imports_of(path)
        if name == "deerflow_ckpt.config" or name.startswith("deerflow_ckpt.config.")
    ]
    assert not reaching


# -- review 13: a usage error quotes what was typed, a DSN's password masked --------------------------------

USAGE_PASSWORD = "Tz4Rq8Vm"
USAGE_DSN = f"postgresql://deer:{USAGE_PASSWORD}@db.internal/app"
USAGE_CONNINFO = f"host=db.internal password={USAGE_PASSWORD} dbname=app"
# Every way a mistyped command line reaches an error that quotes it: a value an option refuses (integer,
# choice, duration, time), an unknown command or option, an extra argument, a path that is not there.
USAGE_MISTAKES: dict[str, tuple[str, ...]] = {
    "integer": ("plan", "retention", "--keep-newest", "{}"),
    "integer-jobs": ("verify-shape", "--jobs", "{}"),
    "integer-top": ("inspect", "thread", "--top", "{}"),
    "format": ("verify-shape", "--format", "{}"),
    "format-plan": ("plan", "retention", "--keep-newest", "1", "--format", "{}"),
    "mode": ("verify-shape", "--mode", "{}"),
    "command": ("{}",),
    "subcommand": ("plan", "{}"),
    "subcommand-inspect": ("inspect", "{}"),
    "option": ("verify-shape", "--{}"),
    "extra-argument": ("verify-shape", "--db", "x.db", "{}"),
    "since": ("verify-shape", "--since", "{}"),
    "clock-skew": ("verify-shape", "--clock-skew", "{}"),
    "config": ("verify-shape", "--config", "{}"),
    "config-file": ("--config-file", "{}", "verify-shape"),
}


@pytest.mark.parametrize("typed", [USAGE_DSN, USAGE_CONNINFO], ids=["url", "conninfo"])
@pytest.mark.parametrize("mistake", sorted(USAGE_MISTAKES))
def test_a_usage_error_never_shows_a_password_typed_on_the_command_line(mistake: str, typed: str) -> None:
    args = tuple(arg.format(typed) for arg in USAGE_MISTAKES[mistake])
    result = fresh_run(*args)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() and not result.stdout, result.output
    assert_hidden(USAGE_PASSWORD, result, " ".join(args))


def test_a_usage_error_still_says_what_was_typed_masked() -> None:
    """The refusal quotes the value, password masked, inside its quotes (the quoting helpers redact first)."""
    refused = fresh_run("plan", "retention", "--keep-newest", USAGE_DSN)
    assert "'postgresql://deer:***@db.internal/app' is not a valid integer." in refused.stderr, refused.stderr
    choice = fresh_run("verify-shape", "--format", USAGE_CONNINFO)
    assert "'host=db.internal password=*** dbname=app' is not one of 'text', 'json'" in choice.stderr, choice.stderr
    mode = fresh_run("inspect", "summary", "--mode", USAGE_DSN)
    assert "'postgresql://deer:***@db.internal/app' is not one of 'full', 'delta'." in mode.stderr, mode.stderr
    command = fresh_run(USAGE_DSN)
    assert "No such command 'postgresql://deer:***@db.internal/app'." in command.stderr, command.stderr


def test_a_usage_error_in_a_fresh_process_masks_the_password() -> None:
    mistakes = ((USAGE_DSN,), ("plan", "retention", "--keep-newest", USAGE_DSN), ("verify-shape", "--mode", USAGE_DSN))
    for args in mistakes:
        result = run_ckpt(*args, process=True)
        assert result.exit_code == 2 and "***" in result.stderr, result.output
        assert_hidden(USAGE_PASSWORD, result, " ".join(args))


@pytest.mark.parametrize("option", ["--config", "-o"])
def test_a_short_password_in_a_dsn_taken_as_a_path_is_masked(option: str) -> None:
    """Too short to be remembered alone, and its '://' collapsed to ':/' by the path: still masked after its user."""
    dsn = "postgresql://deer:x7q@db.internal/app"
    args = (
        ("verify-shape", option, dsn) if option == "--config" else ("verify-shape", "--db", "missing.db", option, dsn)
    )
    result = fresh_run(*args)
    assert result.exit_code == 2, result.output
    assert "x7q" not in result.output, result.output


def test_ckpt_config_shows_a_project_files_dsn_with_its_password_masked(tmp_path: Path) -> None:
    """`ckpt config` prints every setting the project file gives, a database DSN among them."""
    (tmp_path / "pyproject.toml").write_text(f'[tool.ckpt]\ndb = "{USAGE_DSN}"\n', encoding="utf-8")
    shown = fresh_run("config", cwd=tmp_path)
    assert shown.exit_code == 0, shown.output
    assert 'db = "postgresql://deer:***@db.internal/app"' in shown.stdout, shown.stdout
    assert_hidden(USAGE_PASSWORD, shown, USAGE_DSN)
