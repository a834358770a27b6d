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


@pytest.mark.parametrize("module", LIBRARY_MODULES)
def test_library_module_imports_without_dagster(module):
    code = (
        f"import sys, importlib; importlib.import_module({module!r}); "
        "bad = sorted(m for m in sys.modules if m == 'dagster' or m.startswith('dagster.'))[:3]; "
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "", f"{module} imports Dagster: {out.stdout.strip()}"
