"""Which threads a reader streams: one thread, a list of them, a half-open range of thread ids, or all."""

from __future__ import annotations

from typing import Any

from deerflow_ckpt.dataclass import dataclass
from deerflow_ckpt.store.sqlite_text import is_utf8, key_in, text_parameter


@dataclass(frozen=True)
class ThreadSelection:
    thread_id: str | None = None
    # Range bounds for a parallel scan's share: lower inclusive, upper exclusive (None: unbounded).
    lower: str | None = None
    upper: str | None = None
    # Exactly these threads (a --since scan reads only the threads written since then).
    thread_ids: tuple[str, ...] | None = None

    def conditions(self, column: str, placeholder: str, sqlite: bool, *, nullable: bool) -> tuple[list[str], list[Any]]:
        """SQL conditions on `column` and their parameters, in the reader's own dialect; `nullable`: the schema
        lets `column` hold NULL (False where its tables declare it NOT NULL, as the savers' do)."""
        clauses: list[str] = []
        parameters: list[Any] = []
        for value, operator in ((self.thread_id, "="), (self.lower, ">="), (self.upper, "<")):
            if value is None:
                continue
            if sqlite:
                # A thread id that is not UTF-8 (read losslessly) is bound as its stored bytes.
                bound, value = text_parameter(placeholder, value)
            elif not is_utf8(value):
                # Postgres text is always UTF-8: a name that is not (from argv) names no thread there.
                clauses.append("false")
                continue
            else:
                bound = placeholder
            clauses.append(f"{column} {operator} {bound}")
            parameters.append(value)
        if self.upper is not None and self.lower is None and nullable:
            # The first share also reads NULL thread ids (a schema without NOT NULL): no range holds them. Only
            # there: with the OR neither SQLite nor Postgres bounds its index scan by the range (the first of two
            # shares of a 1.4 GB SQLite store read 636 MB more than its own half).
            clauses[-1] = f"({clauses[-1]} OR {column} IS NULL)"
        if self.thread_ids is not None:
            # One parameter whatever the count: SQLite reads a JSON array, Postgres binds a text[].
            if sqlite:
                condition, array = key_in(column, placeholder, list(self.thread_ids))
                clauses.append(condition)
                parameters.append(array)
            else:
                clauses.append(f"{column} = ANY({placeholder})")
                parameters.append([thread_id for thread_id in self.thread_ids if is_utf8(thread_id)])
        return clauses, parameters


ALL_THREADS = ThreadSelection()
