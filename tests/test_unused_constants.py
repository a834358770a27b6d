"""Every module-level constant of pipeline/ and training/ is used somewhere (issue 14, item 6:
pipeline.ingest.encoding.FEATURE_VERSION was declared and read by nothing, so it versioned nothing),
and so is every module-level function and class of the project's packages (issue 36: five
functions were referenced nowhere).

A name counts as used when it appears in any Python file of the project besides its own
definition (or in pyproject.toml or the Makefile, which name entry points). A decorated function
or class is registered by its decorator (a Dagster asset, a route, a dataclass) and counts as used."""

import ast
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ("pipeline", "training")
READERS = ("pipeline", "training", "assets", "cli", "tests", "benchmarks", "scripts")
PACKAGES = ("pipeline", "training", "assets", "cli", "explorer", "deploy")


def constants(path: Path) -> list[str]:
    names = []
    for node in ast.parse(path.read_text()).body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        names += [t.id for t in targets if isinstance(t, ast.Name) and re.fullmatch(r"[A-Z][A-Z0-9_]*", t.id)]
    return names


def functions(path: Path) -> list[str]:
    """The module's undecorated top-level functions and classes."""
    return [
        node.name
        for node in ast.parse(path.read_text()).body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.decorator_list
    ]


def word_counts(folders: tuple[str, ...], extra: tuple[str, ...] = ()) -> Counter:
    """Occurrences of each word (a maximal run of word characters: what \bNAME\b matches) in the
    folders' Python files and the extra files, counted in one pass instead of one regex scan of
    every file per name."""
    here = Path(__file__).resolve()
    sources = [p.read_text() for d in folders for p in (ROOT / d).rglob("*.py") if p.resolve() != here]
    sources += [(ROOT / f).read_text() for f in extra]
    return Counter(word for text in sources for word in re.findall(r"\w+", text))


def test_every_library_constant_is_read_somewhere():
    words = word_counts(READERS)
    unused = []
    for folder in LIBRARY:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for name in constants(path):
                if words[name] < 2:
                    unused.append(f"{path.relative_to(ROOT)}: {name}")
    assert not unused, "declared and never read (use them or remove them): " + ", ".join(unused)


def test_every_function_and_class_is_used_somewhere():
    words = word_counts(tuple(dict.fromkeys(READERS + PACKAGES)), ("pyproject.toml", "Makefile"))
    unused = [
        f"{path.relative_to(ROOT)}: {name}"
        for folder in PACKAGES
        for path in sorted((ROOT / folder).rglob("*.py"))
        for name in functions(path)
        if words[name] < 2
    ]
    assert not unused, "defined and never used (use them or remove them): " + ", ".join(unused)


def test_the_check_sees_a_function_nobody_calls(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "import dataclasses\n\n\ndef used():\n    return 1\n\n\ndef _tcp_answers(port):\n    return used()\n\n\n"
        "@dataclasses.dataclass\nclass Registered:\n    x: int = 0\n\n\nclass Plain:\n    pass\n"
    )
    assert functions(module) == ["used", "_tcp_answers", "Plain"]
    words = Counter(re.findall(r"\w+", module.read_text()))
    assert [name for name in functions(module) if words[name] < 2] == ["_tcp_answers", "Plain"]


def test_the_check_sees_a_constant_nobody_reads(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('PLANES = "PNBRQK"\nVERSION: int = 1\nlower = 2\n\n\ndef f():\n    return PLANES\n')
    assert constants(module) == ["PLANES", "VERSION"]
