"""The `ckpt` console script: the command line loaded and left with the cycle collector out of the way.

Start-up allocates some hundred thousand objects (modules, classes, functions), none of them cyclic garbage, and
the collector's passes over them cost about 3 ms of a run; at exit, the interpreter's last collection walks them
all again (about 10 ms). Freezing them first leaves them to the operating system, as their memory goes anyway.
"""

from __future__ import annotations

import gc


def main() -> None:
    """Console-script entry point."""
    gc.disable()
    from deerflow_ckpt.cli.app import main as run

    # What the imports made lives as long as the run: out of the collector's reach, not walked by its first pass.
    gc.freeze()
    gc.enable()
    try:
        run()
    finally:
        # Every object still alive is moved out of the collector's reach: the exit's collection skips them.
        gc.freeze()
