"""Which threads a reader streams: one thread, a half-open range of thread ids, or all of them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ThreadSelection:
    thread_id: str | None = None
    # Range bounds for a parallel scan's share: lower inclusive, upper exclusive (None: unbounded).
    lower: str | None = None
    upper: str | None = None

    def conditions(self, column: str, placeholder: str) -> tuple[list[str], list[str]]:
        """SQL conditions on `column` and their parameters, for the reader's own dialect."""
        clauses: list[str] = []
        parameters: list[str] = []
        for value, operator in ((self.thread_id, "="), (self.lower, ">="), (self.upper, "<")):
            if value is not None:
                clauses.append(f"{column} {operator} {placeholder}")
                parameters.append(value)
        return clauses, parameters


ALL_THREADS = ThreadSelection()
