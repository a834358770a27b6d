"""The layering the design asks for: pipeline/ and training/ never import Dagster.

Each module is imported in a fresh interpreter, so an import that another test already
made cannot hide a dependency.
"""

import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _modules(package: str) -> list[str]:
    return sorted(
        f"{package}.{m.name}" for m in pkgutil.iter_modules([str(ROOT / package)]) if not m.name.startswith("_")
    )


LIBRARY_MODULES = _modules("pipeline") + _modules("training")


def test_the_library_packages_have_modules_to_check():
    assert {"pipeline.engine", "pipeline.labels", "pipeline.store", "training.train"} <= set(LIBRARY_MODULES)


@pytest.mark.parametrize("package", ["pipeline", "training"])
def test_library_modules_import_without_dagster(package):
    """Every module of the package imported in one fresh interpreter (one per module cost the
    fast tier a minute); after each import the interpreter checks that Dagster is still absent,
    so a failure names the first module that pulled it in."""
    modules = [m for m in LIBRARY_MODULES if m.startswith(package + ".")]
    code = (
        "import sys, importlib\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "    bad = sorted(m for m in sys.modules if m == 'dagster' or m.startswith('dagster.'))[:3]\n"
        "    if bad:\n"
        "        print(name, ','.join(bad))\n"
        "        break\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "", f"imports Dagster: {out.stdout.strip()}"
