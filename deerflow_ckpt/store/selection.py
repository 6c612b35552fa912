"""Which threads a reader streams: one thread, a list of them, a half-open range of thread ids, or all."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ThreadSelection:
    thread_id: str | None = None
    # Range bounds for a parallel scan's share: lower inclusive, upper exclusive (None: unbounded).
    lower: str | None = None
    upper: str | None = None
    # Exactly these threads (a --since scan reads only the threads written since then).
    thread_ids: tuple[str, ...] | None = None

    def conditions(self, column: str, placeholder: str, sqlite: bool) -> tuple[list[str], list[Any]]:
        """SQL conditions on `column` and their parameters, in the reader's own dialect."""
        clauses: list[str] = []
        parameters: list[Any] = []
        for value, operator in ((self.thread_id, "="), (self.lower, ">="), (self.upper, "<")):
            if value is not None:
                clauses.append(f"{column} {operator} {placeholder}")
                parameters.append(value)
        if self.upper is not None and self.lower is None:
            # The first share also reads NULL thread ids (a schema without NOT NULL): no range holds them.
            clauses[-1] = f"({clauses[-1]} OR {column} IS NULL)"
        if self.thread_ids is not None:
            # One parameter whatever the count: SQLite reads a JSON array, Postgres binds a text[].
            if sqlite:
                clauses.append(f"{column} IN (SELECT value FROM json_each({placeholder}))")
                parameters.append(json.dumps(list(self.thread_ids)))
            else:
                clauses.append(f"{column} = ANY({placeholder})")
                parameters.append(list(self.thread_ids))
        return clauses, parameters


ALL_THREADS = ThreadSelection()
