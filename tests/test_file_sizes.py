"""One file, one concern, a few hundred lines: no Python file outside tests/ is over MAX_LINES
(docs/STYLE.md, issue 35). Read from the working tree, so a new file counts before it is committed."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 700
SKIP_DIRS = {"tests", "build", "dist", "node_modules", "__pycache__"}
"""Folders never counted (besides hidden ones such as .venv and .git, and *.egg-info)."""
BEING_SPLIT: set[str] = set()
"""Files over MAX_LINES that are being split now (issue 35); empty this set once they are."""


def python_files(root: Path) -> list[Path]:
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).parts
        if any(p in SKIP_DIRS or p.startswith(".") or p.endswith(".egg-info") for p in rel[:-1]):
            continue
        out.append(path)
    return out


def oversized(root: Path, limit: int = MAX_LINES) -> list[str]:
    """'path: N lines' for every counted Python file over limit lines, largest first."""
    sizes = []
    for path in python_files(root):
        with open(path, "rb") as f:
            n = sum(1 for _ in f)
        if n > limit:
            sizes.append((n, path.relative_to(root).as_posix()))
    return [f"{rel}: {n} lines" for n, rel in sorted(sizes, reverse=True)]


def test_the_count_sees_the_packages_and_leaves_out_tests_and_the_venv(tmp_path):
    for rel, lines in [("pipeline/big.py", 701), ("pipeline/ok.py", 700), ("tests/huge.py", 5000)]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x = 1\n" * lines)
    (tmp_path / ".venv/lib").mkdir(parents=True)
    (tmp_path / ".venv/lib/site.py").write_text("x = 1\n" * 5000)
    assert oversized(tmp_path) == ["pipeline/big.py: 701 lines"]
    counted = {p.relative_to(ROOT).as_posix() for p in python_files(ROOT)}
    assert {"pipeline/store/store.py", "deploy/cluster_test.py", "training/train.py"} <= counted
    assert not any(p.startswith(("tests/", ".venv/")) for p in counted)


def test_no_file_over_the_limit_besides_those_being_split():
    assert [o for o in oversized(ROOT) if o.split(":")[0] not in BEING_SPLIT] == []


def test_no_python_file_outside_tests_is_over_the_limit():
    assert oversized(ROOT) == []
