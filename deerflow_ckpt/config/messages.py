"""DeerFlow's migration warnings, copied verbatim because operators grep for them.

Source: DatabaseConfig._migrate_legacy_snapshot_frequency (deerflow/config/database_config.py).
"""

BOTH_KEYS_SET = (
    "Both database.checkpoint_delta_snapshot_frequency (deprecated) and "
    "database.checkpoint_delta.snapshot_frequency are set; the nested key wins."
)
IGNORED_NON_MAPPING = (
    "Ignoring deprecated database.checkpoint_delta_snapshot_frequency because database.checkpoint_delta is already set."
)
# DeerFlow formats this with logging's %r: Python's repr of the value as DeerFlow read it.
CARRIED_FORWARD = (
    "database.checkpoint_delta_snapshot_frequency is deprecated; use "
    "database.checkpoint_delta.snapshot_frequency instead. Carried the legacy value (%r) forward."
)


# Python's repr refuses integers of more than 4300 digits (about 14,000 bits); DeerFlow's logging then
# reports a formatting error instead of this warning.
_PRINTABLE_BITS = 14_000


def carried_forward(value: object) -> str:
    """The carry-forward warning exactly as DeerFlow logs it for `value` (an integer too long to print
    is named instead: DeerFlow's own logging fails on it)."""
    if isinstance(value, int) and value.bit_length() > _PRINTABLE_BITS:
        return CARRIED_FORWARD.replace("%r", "an integer too long to print")
    return CARRIED_FORWARD % (value,)
