"""Declares the compiled judge; everything else about the package is in pyproject.toml.

The extension is optional: without a C compiler the install still succeeds and the scan reads every row
through the Python decoders (tests/test_native_peek.py fails in CI when it was not built). Where
libsqlite3's header and library are found, the compiled SQLite reader is built into it as well.
"""

import os
import tempfile
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CompileError, LinkError

SQLITE_READER = "deerflow_ckpt/native/_inert_sqlite.c"
READ_AHEAD = "deerflow_ckpt/native/_readahead.c"  # the VFS layer the SQLite reader opens its file through
SQLITE_PROBE = "#include <sqlite3.h>\nint probe(void) { return sqlite3_libversion_number(); }\n"


def _links_sqlite(compiler: Any) -> bool:
    """True when code that includes sqlite3.h compiles and links against libsqlite3.

    Linked as a shared object, as the extension is: the build's CFLAGS (a sanitizer, say) apply there too.
    """
    with tempfile.TemporaryDirectory() as scratch:
        source = os.path.join(scratch, "probe.c")
        with open(source, "w") as probe:
            probe.write(SQLITE_PROBE)
        try:
            objects = compiler.compile([source], output_dir=scratch)
            compiler.link_shared_object(objects, os.path.join(scratch, "probe.so"), libraries=["sqlite3"])
        except (CompileError, LinkError):
            return False
    return True


class BuildWithOptionalSqlite(build_ext):
    """Adds the SQLite reader to the judge when this compiler can link against libsqlite3."""

    def build_extension(self, ext: Extension) -> None:
        if _links_sqlite(self.compiler):
            ext.sources += [SQLITE_READER, READ_AHEAD]
            ext.libraries.append("sqlite3")
            ext.define_macros.append(("INERT_SQLITE", "1"))
        super().build_extension(ext)


setup(
    cmdclass={"build_ext": BuildWithOptionalSqlite},
    ext_modules=[
        Extension(
            "deerflow_ckpt.native._inert",
            sources=[
                "deerflow_ckpt/native/_inert.c",  # the module and the msgpack judge
                "deerflow_ckpt/native/_inert_json.c",  # the metadata reader
            ],
            depends=["deerflow_ckpt/native/_inert.h", SQLITE_READER, READ_AHEAD],
            optional=True,
        )
    ],
)
