"""The compiled ingest loops (pipeline/ingest/_replay.c). Everything else is in pyproject.toml.

The extension is optional: where no C compiler is available the install still succeeds and
pipeline.ingest.replay and pipeline.ingest.games run their Python loops instead (slower, same results).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "pipeline.ingest._replay",
            ["pipeline/ingest/_replay.c"],
            optional=True,
            extra_compile_args=["-O3", "-std=c99"],
        )
    ]
)
