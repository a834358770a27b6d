"""Loading the Dagster definitions and starting the CLI stay cheap: no torch, no matplotlib.

Every `chess-pipeline` start, every Dagster code-server load and every Celery worker imports
assets.definitions or builds the CLI's parser; torch (~1.3 s) and matplotlib (~0.5 s) belong to
the functions that run a model or draw a chart, imported there. Checked in a fresh interpreter,
so an import another test already made cannot hide one.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

STARTUP = (
    "import json, sys\n"
    "from assets.definitions import build_defs\n"
    "assert build_defs({}).resolve_asset_graph().get_all_asset_keys()  # what the code server builds\n"
    "import cli.launch\n"
    "from cli import build_parser\n"
    "build_parser().format_help()  # what `chess-pipeline --help` builds: every command's flags\n"
    "print(json.dumps(sorted(m for m in ('torch', 'matplotlib') if m in sys.modules)))\n"
)
"""Build the definitions as a code server does, then the CLI's whole parser."""


@pytest.fixture(scope="module")
def heavy_at_startup() -> list[str]:
    out = subprocess.run([sys.executable, "-c", STARTUP], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module", ["matplotlib", "torch"])
def test_loading_the_definitions_and_the_cli_does_not_import(module, heavy_at_startup):
    assert module not in heavy_at_startup
