"""docs/reference/settings.md is the settings' declarations rendered (assets/reference.py), as
docs/STORE.md is pipeline/store/schemas.py's; and no description says a default its declaration
contradicts (the library dataclasses, the run configs and resources derived from them, and the
CLI's own configs)."""

import dataclasses
import importlib
import inspect
import pkgutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from assets.config import DescribedConfig, config_from
from assets.definitions import build_defs
from assets.reference import (
    COMMAND,
    PAGE,
    all_classes,
    default_problems,
    page_problems,
    render,
    section,
    where,
)
from cli.demo import DemoConfig
from cli.reproduce_config import ReproduceConfig

ROOT = Path(__file__).resolve().parents[2]

NOT_SETTINGS = {
    "training.data.LoaderConfig": "built by the training loop from TrainConfig's batch_size and shuffle_buffer",
    "training.autoencoder.PretrainConfig": "built by the training loop from TrainConfig's pretraining fields",
    "pipeline.store.storage.S3Settings": "read from the environment (docs/deploy.md names the variables)",
    "pipeline.ingest.sample_archive.SampleArchiveConfig": "the demo's Stockfish sample games (demo --games)",
}
"""Dataclasses named like settings that no run config, resource or flag sets, and why."""


@pytest.fixture(scope="module")
def defs():
    return build_defs({})


@pytest.fixture(scope="module")
def rendered(defs) -> str:
    return render(defs)


def test_the_settings_page_is_the_rendering_of_the_declarations(rendered):
    assert page_problems(PAGE.read_text(encoding="utf-8"), rendered) == [], f"run: {COMMAND}"
    assert COMMAND in rendered  # the page says how to regenerate it


def test_a_page_that_differs_from_the_rendering_fails_with_the_command(rendered):
    stale = rendered.replace("| `workers` | int | `0` |", "| `workers` | int | `4` |", 1)
    assert stale != rendered
    assert page_problems(stale, rendered) == [
        f"docs/reference/settings.md differs from the settings' declarations; run: {COMMAND}"
    ]


def test_the_page_has_every_field_of_every_run_config_and_resource(defs, rendered):
    """Independent of the renderer's discovery: each executable asset's config schema and each
    resource's, read from Dagster, has a row per field under its class's heading."""
    from tests.assets.test_ui_text import config_fields

    fields = list(config_fields(defs))
    assert len(fields) > 100
    for where_, name, _ in fields:
        if "." in name:  # a nested shape's inner field: its row is the outer field's
            continue
        assert f"| `{name}` |" in rendered, f"{where_}: {name}"
    for heading in ("### LabelsConfig", "### TrainRunConfig", "### StockfishResource", "### StoreResource"):
        assert heading in rendered


def test_every_settings_dataclass_of_the_library_is_on_the_page(rendered):
    """Walks pipeline/ and training/ (subpackages too): a dataclass named *Config, *Settings or
    *Params has a section, or NOT_SETTINGS says why not. A module moved or a class added is
    caught here, whatever the page lists."""
    found = {}
    for package in ("pipeline", "training"):
        for info in pkgutil.walk_packages([str(ROOT / package)], prefix=package + "."):
            module = importlib.import_module(info.name)
            for name, obj in vars(module).items():
                if (
                    inspect.isclass(obj)
                    and dataclasses.is_dataclass(obj)
                    and obj.__module__ == module.__name__
                    and name.endswith(("Config", "Settings", "Params"))
                ):
                    found[where(obj)] = obj
    assert {"training.config.TrainConfig", "pipeline.datasets.datasets.SplitConfig"} <= set(found)
    missing = sorted(w for w, cls in found.items() if w not in NOT_SETTINGS and f"`{w}`" not in rendered)
    assert not missing, f"settings classes not on the page (add them to a run config, or to NOT_SETTINGS): {missing}"
    assert set(NOT_SETTINGS) <= set(found), "NOT_SETTINGS names classes that no longer exist"


def test_no_described_default_differs_from_its_declaration(defs):
    classes = [*all_classes(defs), ReproduceConfig, DemoConfig]
    assert len(classes) > 40
    assert default_problems(classes) == []


# --- the checks on planted mismatches ----------------------------------------------------------


@dataclass(frozen=True)
class Planted:
    depth: int = 6
    """Search depth (default 8)."""
    lam: float = 0.5
    """Lambda (published: 0.7)."""
    value: int = 6
    """Depth of the labels (Sabatelli: depth 8)."""
    depths: tuple[int, ...] = (2, 4)
    """Search depths (Lubeck: 2, 4, 6)."""
    epochs: int = 5
    """Most epochs; 0 takes the profile's."""
    rows: int = 0
    """Rows (0 or -1: the profile's)."""
    fine: int = 8
    """Search depth (default 8; published: 8), 0: none; -1 takes the profile's? no: (Hui: 8)."""


def test_each_default_check_fails_on_a_planted_mismatch():
    problems = default_problems([Planted])
    owner = where(Planted)
    assert problems == [
        f"{owner}.depth: the description says 'default 8', the declared default is 6",
        f"{owner}.lam: the description gives the published value '(published: 0.7)', the declared default is 0.5",
        f"{owner}.value: the description gives the published value '(Sabatelli: depth 8)', the declared default is 6",
        f"{owner}.depths: the description gives the published value '(Lubeck: 2, 4, 6)', "
        "the declared default is (2, 4)",
        f'{owner}.epochs: the description says "0 takes the profile\'s", so that is the default; '
        "the declared default is 5",
        f'{owner}.fine: the description says "-1 takes the profile\'s", so that is the default; '
        "the declared default is 8",
    ], problems


def test_the_checks_pass_where_description_and_default_agree():
    @dataclass
    class Agreeing:
        depth: int = 8
        """Search depth (default 8)."""
        lam: float = 0.005
        """Learning rate (DeepChess: 5e-3)."""
        depths: tuple[int, ...] = (2, 4, 6)
        """Depths (Lubeck: 2, 4, 6)."""
        rows: int = -1
        """Rows (0: all); -1 takes the profile's."""
        openings: int = 20
        """Openings (0: one per core; 0 skips)."""

    assert default_problems([Agreeing]) == []


def test_a_derived_config_whose_default_differs_from_its_dataclass_fails():
    @dataclass(frozen=True)
    class Source:
        depth: int = 8
        """Search depth."""
        kind: Literal["a", "b"] = "a"
        """Kind."""

    derived = config_from(Source, name="Derived")
    assert default_problems([derived]) == []

    class Redeclared(derived):
        depth: int = 6
        """Search depth."""

    assert default_problems([Redeclared]) == [
        f"{where(Redeclared)}.depth: default 6, but {where(Source)}.depth (which it derives from) declares 8"
    ]

    class Variant(derived):
        """A variant.

        Defaults: depth 6, for the variant's protocol."""

        depth: int = 6
        """Search depth."""

    assert default_problems([Variant]) == []  # a variant that says so
    assert default_problems([config_from(Source, name="Shifted", defaults={"depth": 7})]) == [
        f"{__name__}.Shifted.depth: default 7, but {where(Source)}.depth (which it derives from) declares 8"
    ]


def test_a_section_is_a_table_of_field_type_default_and_description():
    class Hand(DescribedConfig):
        """Hand-written.

        Not shown."""

        path: str = ""
        """Folder of `<store>/x` files; empty: <home> | the store's."""
        kind: Literal["depth", "nodes"] = "depth"
        """depth or nodes."""
        depths: list[int] = [1, 2]
        """Depths."""

    assert section(Hand, ["`an_asset`"]) == [
        "### Hand",
        "",
        f"`{where(Hand)}`, Dagster run config. Hand-written.",
        "",
        "Taken by `an_asset`.",
        "",
        "| field | type | default | description |",
        "|---|---|---|---|",
        '| `path` | str | `""` | Folder of `<store>/x` files; empty: &lt;home&gt; \\| the store\'s. |',
        '| `kind` | one of `depth`, `nodes` | `"depth"` | depth or nodes. |',
        "| `depths` | list[int] | `[1, 2]` | Depths. |",
        "",
    ]


def test_the_command_rewrites_the_page(tmp_path, rendered):
    out = tmp_path / "settings.md"
    done = subprocess.run(
        [sys.executable, "-m", "assets.reference", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert out.read_text(encoding="utf-8") == rendered
    assert "rewritten" in done.stdout
