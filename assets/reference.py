"""docs/reference/settings.md, rendered from the settings' one declaration, and the checks that
keep what a description says about a default equal to the default declared.

Regenerate the page (tests/assets/test_settings_reference.py fails while it differs):

    .venv/bin/python -m assets.reference docs/reference/settings.md

What is on the page comes from the Definitions, so nothing here lists modules or classes: every
run config an executable asset takes (its compute function's `config` annotation) and every
resource, grouped by the asset group of the first asset (in dependency order) that takes it;
before each config, the library dataclasses it derives from (assets.config.sources: the
settings of pipeline/ and training/, which the CLI's flags derive from too). A table per class:
field, type, default, description; descriptions are the field docstrings, read the way the
launchpad reads them (pipeline.settings.field_docs, pydantic's `use_attribute_docstrings`).

The default checks (`default_problems`), over the same classes:
- a description saying `default N` (`defaults to N`, `default: N`) names the declared default;
- a description giving the published value, `(published: 0.7)`, `(DeepChess: 5e-3)`,
  `(Sabatelli: depth 8)`, `(Lubeck: 2, 4, 6)`, names the declared default (the library's defaults
  are the published settings);
- a description saying which value defers to another's, `0 takes the profile's`,
  `(0 or -1: the profile's)`, declares that value as the default (an override that is on by
  default overrides always);
- a config derived from a dataclass (assets.config.config_from) has the dataclass's defaults.

Imported by nothing: it sits at the top of assets/ (it builds the Definitions to read them).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
import sys
import types
import typing
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import dagster as dg
from pydantic_core import PydanticUndefined

from assets.config import sources
from pipeline.settings import field_docs, field_type
from pipeline.store.store_files import atomic_path

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "settings.md"
COMMAND = ".venv/bin/python -m assets.reference docs/reference/settings.md"
RESOURCES = "resources"
"""The heading of the resources' section (they belong to no asset group)."""
GROUP_ORDER = ("ingest", "labels", "datasets", "models", "evaluation", "reproduction", "selfplay")
"""The asset groups in the order the page shows them (the pipeline's); a group not named here
follows them, by name."""


@dataclasses.dataclass(frozen=True)
class Setting:
    """One field as the page shows it and the checks read it."""

    name: str
    annotation: Any
    default: Any
    """The declared default; dataclasses.MISSING where the field is required."""
    description: str


# --- reading the classes -------------------------------------------------------------------------


def dataclass_settings(cls: type) -> list[Setting]:
    """The described fields of a library dataclass (a field without a docstring is the code's
    own, not a setting: LabelRun's run_id, shards)."""
    docs = field_docs(cls)
    out = []
    for f in dataclasses.fields(cls):
        if f.init and f.name in docs:
            if f.default is not dataclasses.MISSING:
                default = f.default
            elif f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            else:
                default = dataclasses.MISSING
            out.append(Setting(f.name, field_type(cls, f.name), default, docs[f.name]))
    return out


def config_settings(cls: type) -> list[Setting]:
    """Every field of a Dagster config or resource class (pydantic), inherited ones included."""
    out = []
    for name, info in cls.model_fields.items():
        if info.default is not PydanticUndefined:
            default = info.default
        elif info.default_factory is not None:
            default = info.default_factory()
        else:
            default = dataclasses.MISSING
        out.append(Setting(name, info.annotation, default, " ".join((info.description or "").split())))
    return out


def settings_of(cls: type) -> list[Setting]:
    return dataclass_settings(cls) if dataclasses.is_dataclass(cls) else config_settings(cls)


PACKAGES = ("pipeline", "training", "assets")


def where(cls: type) -> str:
    """module.name of a class."""
    return f"{cls.__module__}.{cls.__qualname__}"


def discovered(defs: dg.Definitions) -> dict[str, list[type]]:
    """{section: [class, ...]} in page order: the resources, then each asset group (in the
    dependency order of its first asset) with the run configs its assets take, each config
    after the library dataclasses it derives from; every class once (by module and name: a
    config made per asset, as the published-split datasets' are, is one class here)."""
    graph = defs.resolve_asset_graph()
    by_key = {key: ad for ad in graph.assets_defs for key in ad.keys}
    sections: dict[str, list[type]] = {RESOURCES: []}
    placed: set[str] = set()

    def place(section: str, cls: type) -> None:
        for c in [*(source for source, _ in sources(cls)), cls]:
            if where(c) not in placed:
                placed.add(where(c))
                sections.setdefault(section, []).append(c)

    for resource in defs.resources.values():
        place(RESOURCES, type(resource))
    keys = graph.toposorted_asset_keys
    rank = {g: i for i, g in enumerate(GROUP_ORDER)}
    for key in sorted(keys, key=lambda k: (_group_rank(by_key[k].group_names_by_key[k], rank), keys.index(k))):
        ad = by_key[key]
        if ad.is_executable and (config := _config_of(ad)) is not None:
            place(ad.group_names_by_key[key], config)
    return sections


def _group_rank(group: str, rank: dict[str, int]) -> tuple[int, str]:
    return (rank.get(group, len(rank)), group)


def _config_of(ad: dg.AssetsDefinition) -> type | None:
    """The run config class an asset's compute function takes (its `config` parameter's)."""
    fn = ad.op.compute_fn.decorated_fn
    return typing.get_type_hints(fn).get("config")


def takers(defs: dg.Definitions) -> dict[str, list[str]]:
    """class (module.name) -> the assets that take it as run config, or its resource key."""
    out: dict[str, list[str]] = {}
    for key, resource in defs.resources.items():
        out.setdefault(where(type(resource)), []).append(f"resource `{key}`")
    for ad in defs.resolve_asset_graph().assets_defs:
        if ad.is_executable and (config := _config_of(ad)) is not None:
            out.setdefault(where(config), []).append(f"`{ad.op.name}`")
    return out


# --- rendering -----------------------------------------------------------------------------------


def show_type(annotation: Any) -> str:
    """A type as a reader says it: int, tuple[int, ...], one of `a`, `b`; `or none` for X | None."""
    origin = get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        shown = " or ".join(show_type(a) for a in args)
        return shown + " or none" if len(args) < len(get_args(annotation)) else shown
    if origin is Literal:
        return "one of " + ", ".join(f"`{v}`" for v in get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "one of " + ", ".join(f"`{m.value}`" for m in annotation)
    if origin is not None:
        args = ", ".join("..." if a is Ellipsis else show_type(a) for a in get_args(annotation))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def show_default(value: Any) -> str:
    if value is dataclasses.MISSING:
        return "required"
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, str):
        return f'`"{value}"`'
    if dataclasses.is_dataclass(value):
        return f"`{value}`"
    return f"`{value!r}`"


_CODE = re.compile(r"(`[^`]*`)")


def cell(text: str) -> str:
    """Text for a table cell: `|` escaped, and `<` outside code spans as `&lt;` (Markdown would
    take `<dataset>` for an HTML tag and show nothing)."""
    parts = _CODE.split(text)
    return "".join(p if p.startswith("`") else p.replace("<", "&lt;").replace(">", "&gt;") for p in parts).replace(
        "|", "\\|"
    )


def summary(cls: type) -> str:
    """The first paragraph of the class's docstring on one line, and a `Defaults:` paragraph
    (a variant's). Not config_from's "Derived from ..." (the page links the sources) nor the
    signature dataclasses writes where a class has no docstring."""
    paragraphs = [" ".join(p.split()) for p in (cls.__doc__ or "").strip().split("\n\n")]
    first = paragraphs[0]
    if first.startswith("Derived from ") or (dataclasses.is_dataclass(cls) and first.startswith(cls.__name__ + "(")):
        first = ""
    return " ".join([first, *(p for p in paragraphs[1:] if p.startswith("Defaults:"))]).strip()


def table(settings: list[Setting]) -> list[str]:
    lines = ["| field | type | default | description |", "|---|---|---|---|"]
    for s in settings:
        cells = [f"`{s.name}`", show_type(s.annotation), show_default(s.default), s.description]
        lines.append("| " + " | ".join(cells[:1] + [cell(c) for c in cells[1:]]) + " |")
    return lines


def section(cls: type, used_by: list[str]) -> list[str]:
    if dataclasses.is_dataclass(cls):
        kind = "library setting"
    else:
        kind = "Dagster resource" if issubclass(cls, dg.ConfigurableResource) else "Dagster run config"
    lines = [f"### {cls.__name__}", "", f"`{where(cls)}`, {kind}."]
    if text := summary(cls):
        lines[-1] += " " + cell(text)
    derived = [f"[{s.__name__}](#{s.__name__.lower()})" for s, _ in sources(cls)]
    if derived:
        lines += ["", "Derived from " + ", ".join(derived) + "."]
    if used_by:
        lines += ["", "Taken by " + ", ".join(sorted(used_by)) + "."]
    settings = settings_of(cls)
    return [*lines, "", *(table(settings) if settings else ["No fields."]), ""]


INTRO = """\
# Settings

<!-- Generated from the code; do not edit. Regenerate with:
     {command}
     (tests/assets/test_settings_reference.py fails while this page differs.) -->

Every setting is declared once: a field of a library dataclass in `pipeline/` or `training/`
(its name, type, default, and the docstring under it as its description). The Dagster run
configs the assets take, and the resources, are derived from those dataclasses
(`assets.config.config_from`), and so are the CLI's flags (`pipeline.settings.add_arguments`:
`--flag-name` for `flag_name`). This page is rendered from them by `assets/reference.py`:
regenerate it with `{command}`.

Sections follow the asset groups in the order the pipeline runs them; a run config comes after
the library settings it derives from. In the Dagster UI the same descriptions show in the
launchpad; on the command line, in `chess-pipeline COMMAND --help`.
"""


def render(defs: dg.Definitions | None = None) -> str:
    """The whole page."""
    if defs is None:
        from assets.definitions import build_defs

        defs = build_defs({})
    sections = discovered(defs)
    names = [cls.__name__ for classes in sections.values() for cls in classes]
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise ValueError(f"two settings classes named {', '.join(twice)}: their sections' anchors would clash")
    used = takers(defs)
    lines = [INTRO.format(command=COMMAND)]
    for name, classes in sections.items():
        if not classes:
            continue
        title = "Resources" if name == RESOURCES else f"The {name} group"
        lines += [f"## {title}", ""]
        for cls in classes:
            lines += section(cls, used.get(where(cls), []))
    return "\n".join(lines).rstrip("\n") + "\n"


def page_problems(text: str, rendered: str) -> list[str]:
    if text == rendered:
        return []
    return [f"{PAGE.relative_to(PAGE.parents[2])} differs from the settings' declarations; run: {COMMAND}"]


# --- the default checks --------------------------------------------------------------------------

_NUM = r"-?\d+(?:\.\d+)?(?:e-?\d+)?"
_STATED = re.compile(rf"\bdefault(?:s to| is|:)?\s+(?P<values>{_NUM})\b")
_PUBLISHED = re.compile(
    rf"\((?P<who>published|[A-Z][A-Za-z]+(?: et al\.)?)(?: \d{{4}})?: (?:depth |nodes )?"
    rf"(?P<values>{_NUM}(?:, {_NUM})*)\)"
)
_DEFERS = re.compile(rf"(?<![\w.-])(?P<values>{_NUM}(?: or {_NUM})*)(?: takes|:) the [\w-]+'s\b")


def _numbers(text: str, sep: str) -> tuple[float, ...]:
    return tuple(float(v) for v in text.split(sep))


def _as_numbers(value: Any) -> tuple[float, ...] | None:
    """The declared default as numbers (a sequence of them, or one), None when it is not numeric."""
    items = list(value) if isinstance(value, (tuple, list)) else [value]
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
        return tuple(float(v) for v in items)
    return None


def _same(stated: tuple[float, ...], declared: tuple[float, ...] | None) -> bool:
    return declared is not None and len(stated) == len(declared) and all(map(math.isclose, stated, declared))


def documented_default_problems(owner: str, setting: Setting) -> list[str]:
    """What one field's description says about its default that its declaration contradicts."""
    declared = _as_numbers(setting.default) if setting.default is not dataclasses.MISSING else None
    shown = "none (required)" if setting.default is dataclasses.MISSING else repr(setting.default)
    problems = []
    for m in _STATED.finditer(setting.description):
        if not _same(_numbers(m.group("values"), ","), declared):
            problems.append(
                f"{owner}.{setting.name}: the description says {m.group(0)!r}, the declared default is {shown}"
            )
    for m in _PUBLISHED.finditer(setting.description):
        if not _same(_numbers(m.group("values"), ","), declared):
            problems.append(
                f"{owner}.{setting.name}: the description gives the published value {m.group(0)!r}, "
                f"the declared default is {shown}"
            )
    for m in _DEFERS.finditer(setting.description):
        values = _numbers(m.group("values"), " or ")
        if declared is None or len(declared) != 1 or not any(math.isclose(v, declared[0]) for v in values):
            problems.append(
                f"{owner}.{setting.name}: the description says {m.group(0)!r}, so that is the default; "
                f"the declared default is {shown}"
            )
    return problems


def derived_default_problems(config_cls: type) -> list[str]:
    """Fields of a config made by config_from whose default is not their dataclass's."""
    problems = []
    fields = config_cls.model_fields
    for dataclass_cls, mapping in sources(config_cls):
        declared = {s.name: s.default for s in dataclass_settings(dataclass_cls)}
        for key, name in mapping.items():
            if name not in declared or key not in fields:
                continue
            want = list(declared[name]) if isinstance(declared[name], tuple) else declared[name]
            got = next(s.default for s in config_settings(config_cls) if s.name == key)
            if got != want and not _declared_variant(config_cls, key):
                problems.append(
                    f"{where(config_cls)}.{key}: default {got!r}, but {where(dataclass_cls)}.{name} "
                    f"(which it derives from) declares {declared[name]!r}"
                )
    return problems


def _declared_variant(config_cls: type, key: str) -> bool:
    """A subclass that redeclares a derived field and says so: its docstring has a paragraph
    `Defaults: ...` (the published-split dataset configs: the published protocol's split)."""
    for klass in config_cls.__mro__:
        if key in klass.__dict__.get("__annotations__", {}):
            return any(p.strip().startswith("Defaults:") for p in (klass.__doc__ or "").split("\n\n"))
    return False


def default_problems(classes: Iterable[type]) -> list[str]:
    """Every default check over these classes (dataclasses, Dagster configs and resources)."""
    problems = []
    for cls in classes:
        for setting in settings_of(cls):
            problems += documented_default_problems(where(cls), setting)
        if not dataclasses.is_dataclass(cls):
            problems += derived_default_problems(cls)
    return problems


def all_classes(defs: dg.Definitions) -> Iterator[type]:
    for classes in discovered(defs).values():
        yield from classes


def main(argv: list[str] | None = None) -> int:
    """`python -m assets.reference docs/reference/settings.md`: rewrite the page."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(f"usage: {COMMAND} (rewrites the settings page from the code)", file=sys.stderr)
        return 2
    from assets.definitions import build_defs

    path = Path(args[0])
    defs = build_defs({})
    new = render(defs)
    old = path.read_text(encoding="utf-8") if path.is_file() else None
    if new != old:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            tmp.write_text(new, encoding="utf-8")
    print(f"{path}: {'rewritten' if new != old else 'already matches the code'}")
    problems = default_problems(all_classes(defs))
    for problem in problems:
        print(f"documented default differs: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
