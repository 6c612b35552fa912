"""Which LangGraph Postgres saver generation set a database's tables up, from its `checkpoint_migrations` rows.

langgraph-checkpoint-postgres applies its schema as a list of migrations (`MIGRATIONS` in its `base`
module) and records each applied one as a row of `checkpoint_migrations`. Comparing the count of rows with
the list's length says which saver generation set a database up: a database with fewer rows was set up by
an older saver, and lacks later columns (`checkpoint_writes.task_path`).

The list's length is restated here for the saver versions ckpt knows, not read from an installed saver:
the savers are not dependencies of ckpt (no command imports them), and what an operator's database was
set up with does not depend on what is installed beside ckpt. `tests/test_deployments.py` compares the
count with the real savers' `MIGRATIONS`: DeerFlow's pinned 3.1.1 and the one the `dev` extra installs.
"""

from __future__ import annotations

POSTGRES_SAVER = "langgraph-checkpoint-postgres"
# The versions whose `MIGRATIONS` the tests compare with SAVER_MIGRATIONS: DeerFlow's pin (3.1.1) up to the
# newest the `fixtures` and `dev` extras allow (<3.3).
KNOWN_SAVERS = "3.1.1 to 3.2"
SAVER_MIGRATIONS = 10


def describe_setup(applied: int | None) -> str | None:
    """One line on which saver generation set the tables up, or None when nothing can be said."""
    if applied is None:
        return None
    known = f"{POSTGRES_SAVER} {KNOWN_SAVERS} applies {SAVER_MIGRATIONS}"
    if applied < SAVER_MIGRATIONS:
        return f"{applied} saver migrations applied ({known}): set up by an older saver, later columns may be absent"
    if applied > SAVER_MIGRATIONS:
        return f"{applied} saver migrations applied ({known}): set up by a newer saver"
    return f"{applied} saver migrations applied ({known})"
