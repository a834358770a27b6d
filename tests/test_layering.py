"""The layering the design asks for: pipeline/ and training/ never import Dagster (each module
imported in a fresh interpreter, so an import that another test already made cannot hide a
dependency), and the project's imports point one way, with no circle.

The import direction is read from the source (every import statement, those inside functions
too: an import moved into a function to dodge a circle is still the circle). The layers, lowest
first: pipeline; training; assets and explorer (neither imports the other); the CLI (cli/, with
the console script's entry point cli/launch.py); deploy. A module imports modules of its own
layer's package or of a lower layer, never upward, and no set of modules imports itself round.

Inside pipeline/ the same holds between its stage folders (pipeline/__init__.py lists them):
a stage imports only the stages before it in STAGES, and no set of stages and root helpers
imports itself round."""

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = {"pipeline": 0, "training": 1, "assets": 2, "explorer": 2, "cli": 3, "deploy": 4}
"""Package -> its layer: imports go to the same package or a lower layer."""
STAGES = ["store", "ingest", "labels", "research", "datasets", "play"]
"""pipeline/'s stage folders, lowest first: a stage imports only stages before it."""


def _modules(package: str) -> list[str]:
    """Every module of the package, its subpackages' too (not the compiled or private ones)."""
    return sorted(
        m.name
        for m in pkgutil.walk_packages([str(ROOT / package)], prefix=f"{package}.")
        if not m.ispkg and not m.name.rpartition(".")[2].startswith("_")
    )


LIBRARY_MODULES = _modules("pipeline") + _modules("training")


def test_the_library_packages_have_modules_to_check():
    assert {"pipeline.labels.engine", "pipeline.labels.labels", "pipeline.store.store", "training.train"} <= set(
        LIBRARY_MODULES
    )


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


def package_of(module: str) -> str:
    """The layer package of a dotted module name."""
    return module.split(".")[0]


def import_graph(root: Path, packages) -> dict[str, set[str]]:
    """module -> the project modules its source imports (anywhere in it), under root."""
    paths = {}
    for package in packages:
        for path in (root / package).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for module, path in paths.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = module.split(".")[: None if path.name == "__init__.py" else -1]
                    here = here[: len(here) - node.level + 1]
                    base = ".".join([*here, base] if base else here)
                names = [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                while name and name not in paths:  # a name imported from a module: the module
                    name = name.rpartition(".")[0]
                if name and name != module:
                    targets.add(name)
        graph[module] = targets
    return graph


def layering_problems(graph: dict[str, set[str]]) -> list[str]:
    """Upward imports and import circles of the graph, one line each."""
    problems = [
        f"{a} imports {b}: upward ({package_of(a)} -> {package_of(b)})"
        for a in sorted(graph)
        for b in sorted(graph[a])
        if package_of(a) != package_of(b) and LAYERS[package_of(b)] >= LAYERS[package_of(a)]
    ]
    # Circles: the strongly connected components of more than one module (Tarjan's algorithm).
    index, low, stack, on_stack, counter = {}, {}, [], set(), [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                problems.append(f"import circle: {', '.join(sorted(component))}")

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return problems


def test_imports_point_one_way_with_no_circle():
    graph = import_graph(ROOT, ["pipeline", "training", "assets", "explorer", "cli", "deploy"])
    assert {"assets.shared", "cli.app", "pipeline.labels.engine", "explorer.app"} <= set(graph)
    assert "assets.shared" in graph["assets.evaluation"]  # the graph sees the imports
    problems = layering_problems(graph)
    assert not problems, "\n".join(problems)


def test_the_layering_check_fails_on_a_planted_circle_and_an_upward_import(tmp_path):
    files = {
        "pipeline/__init__.py": "",
        "pipeline/low.py": "def helper():\n    from training.model import Net  # upward, inside a function\n",
        "training/__init__.py": "",
        "training/model.py": "from pipeline.low import helper\n\nNet = helper\n",
        "assets/__init__.py": "",
        "assets/a.py": "from assets import b\n",
        "assets/b.py": "def f():\n    from .c import g\n",
        "assets/c.py": "import assets.a\n",
        "cli/__init__.py": "from cli import app\n",
        "cli/app.py": "from assets.a import x\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    problems = layering_problems(import_graph(tmp_path, ["pipeline", "training", "assets"]))
    assert problems == [
        "pipeline.low imports training.model: upward (pipeline -> training)",
        "import circle: assets.a, assets.b, assets.c",
        "import circle: pipeline.low, training.model",
    ], problems


def unit_of(module: str) -> str | None:
    """The unit of pipeline/ a module belongs to: its stage folder, or itself for a root helper."""
    parts = module.split(".")
    if parts[0] != "pipeline" or len(parts) < 2:
        return None
    return f"pipeline.{parts[1]}"


def stage_problems(graph: dict[str, set[str]]) -> list[str]:
    """Imports between pipeline/'s stages that go up STAGES, and circles between its units
    (stage folders and root helpers), one line each."""
    units: dict[str, set[str]] = {}
    for a, targets in graph.items():
        ua = unit_of(a)
        if ua is None:
            continue
        units.setdefault(ua, set())
        for b in targets:
            ub = unit_of(b)
            if ub is not None and ub != ua:
                units[ua].add(ub)
                units.setdefault(ub, set())
    rank = {f"pipeline.{s}": i for i, s in enumerate(STAGES)}
    problems = [
        f"{a} imports {b}: upward (stages: {', '.join(STAGES)})"
        for a in sorted(units)
        for b in sorted(units[a])
        if a in rank and b in rank and rank[b] >= rank[a]
    ]
    return problems + [p.replace("import circle", "stage circle") for p in layering_problems(units) if "circle" in p]


def test_pipeline_stages_point_one_way_with_no_circle():
    graph = import_graph(ROOT, ["pipeline"])
    folders = {p.name for p in (ROOT / "pipeline").iterdir() if (p / "__init__.py").exists()}
    assert folders == set(STAGES), f"pipeline/ has stage folders {sorted(folders)}; STAGES names {STAGES}"
    problems = stage_problems(graph)
    assert not problems, "\n".join(problems)


def test_the_stage_check_fails_on_a_planted_upward_import_and_circle(tmp_path):
    files = {
        "pipeline/__init__.py": "",
        "pipeline/store/__init__.py": "",
        "pipeline/store/files.py": "from pipeline.progress import report\n",
        "pipeline/progress.py": "def report():\n    from pipeline.store.files import x\n",
        "pipeline/labels/__init__.py": "",
        "pipeline/labels/engine.py": "def f():\n    from pipeline.play.search import g\n",
        "pipeline/play/__init__.py": "",
        "pipeline/play/search.py": "from pipeline.labels import engine\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    problems = stage_problems(import_graph(tmp_path, ["pipeline"]))
    assert problems == [
        "pipeline.labels imports pipeline.play: upward (stages: store, ingest, labels, research, datasets, play)",
        "stage circle: pipeline.labels, pipeline.play",
        "stage circle: pipeline.progress, pipeline.store",
    ], problems
