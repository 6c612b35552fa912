"""The `ckpt` console script: the command line loaded and left with the cycle collector out of the way.

Start-up allocates some hundred thousand objects (modules, classes, functions) and only a few hundred of them are
garbage in cycles; the collector's passes over them cost about 3 ms of a run. What the imports made lives as long
as the run, so it is frozen (no later pass walks it), and at exit what is still alive is frozen again: the
interpreter's last collection would walk it all (about 10 ms), though its memory goes with the process anyway.
So ckpt writes and closes every file within a `with`: one left to a finalizer at exit would not be flushed.
"""

from __future__ import annotations

import gc


def main() -> None:
    """Console-script entry point."""
    gc.disable()
    from deerflow_ckpt.cli.app import main as run

    gc.freeze()
    gc.enable()
    try:
        run()
    finally:
        gc.freeze()
