"""Every module-level constant of pipeline/ and training/ is used somewhere (issue 14, item 6:
pipeline.encoding.FEATURE_VERSION was declared and read by nothing, so it versioned nothing).

A constant counts as used when its name appears in any Python file of the project besides its
own definition."""

import ast
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ("pipeline", "training")
READERS = ("pipeline", "training", "assets", "tests", "benchmarks", "scripts")


def constants(path: Path) -> list[str]:
    names = []
    for node in ast.parse(path.read_text()).body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        names += [t.id for t in targets if isinstance(t, ast.Name) and re.fullmatch(r"[A-Z][A-Z0-9_]*", t.id)]
    return names


def test_every_library_constant_is_read_somewhere():
    here = Path(__file__).resolve()
    sources = [p.read_text() for d in READERS for p in (ROOT / d).rglob("*.py") if p.resolve() != here]
    # Occurrences of each word (a maximal run of word characters: what \bNAME\b matches), counted
    # in one pass over the sources instead of one regex scan of every file per constant.
    words = Counter(word for text in sources for word in re.findall(r"\w+", text))
    unused = []
    for folder in LIBRARY:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for name in constants(path):
                if words[name] < 2:
                    unused.append(f"{path.relative_to(ROOT)}: {name}")
    assert not unused, "declared and never read (use them or remove them): " + ", ".join(unused)


def test_the_check_sees_a_constant_nobody_reads(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('PLANES = "PNBRQK"\nVERSION: int = 1\nlower = 2\n\n\ndef f():\n    return PLANES\n')
    assert constants(module) == ["PLANES", "VERSION"]
