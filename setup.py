"""Declares the compiled judge; everything else about the package is in pyproject.toml.

The extension is optional: without a C compiler the install still succeeds and the scan reads every row
through the Python decoders (tests/test_native_peek.py fails in CI when it was not built).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "deerflow_ckpt.store._inert",
            sources=[
                "deerflow_ckpt/store/_inert.c",  # the module and the msgpack judge
                "deerflow_ckpt/store/_inert_json.c",  # the metadata reader
            ],
            depends=["deerflow_ckpt/store/_inert.h"],
            optional=True,
        )
    ]
)
