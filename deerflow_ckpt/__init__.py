"""ckpt: the operator's command line for DeerFlow checkpoint storage."""

__version__ = "0.1.0"
