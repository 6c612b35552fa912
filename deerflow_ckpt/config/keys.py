"""Names and defaults of the DeerFlow config keys ckpt reads; mirrors database_config.py."""

DATABASE = "database"
# Deprecated flat key: recognised by DeerFlow only directly under `database:`.
LEGACY_CADENCE_KEY = "checkpoint_delta_snapshot_frequency"
DELTA_SECTION = "checkpoint_delta"
CADENCE_KEY = "snapshot_frequency"
CHANNEL_MODE_KEY = "checkpoint_channel_mode"
LEGACY_CHECKPOINTER = "checkpointer"

DEFAULT_CADENCE = 10
# DeerFlow's model default; absence of the key means full mode.
DEFAULT_CHANNEL_MODE = "full"
CHANNEL_MODES = ("full", "delta")
# Applied by AppConfig.from_file when database: is a mapping (CONFIG_FILE_DATABASE_DEFAULTS).
FILE_DATABASE_DEFAULTS = {"backend": "sqlite", "sqlite_dir": ".deer-flow/data"}
