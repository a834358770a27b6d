"""The compiled ingest loops (pipeline/_replay.c). Everything else is in pyproject.toml.

The extension is optional: where no C compiler is available the install still succeeds and
pipeline.replay and pipeline.games run their Python loops instead (slower, same results).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("pipeline._replay", ["pipeline/_replay.c"], optional=True, extra_compile_args=["-O3", "-std=c99"])
    ]
)
