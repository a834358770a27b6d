"""CLI flags derived from the settings they set, so each setting is declared once.

A flag named as its field comes from pipeline.settings.add_arguments (type, choices, default,
and the field's docstring as help). A flag the README and scripts know under another name
(`label --limit` sets LabelRun.max_positions, `--timeout` EngineSettings.timeout_s) comes from
`add_field_flag`: the same help, default and choices, from the same field, under its own name.
Fields of a Dagster config class declared by hand (e.g. LabelsConfig.max_minutes) give their
pydantic description and default the same way. The label setting (a pipeline.labels.uci.Limit) is
asked for by the same flags in every command: `add_limit_flags` and `limit_from_args`.
"""

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from pipeline.labels.uci import LIMIT_KINDS, Limit
from pipeline.settings import field_docs, field_type, literal_choices

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
"""../shared/data beside the repository: the default of the demo's and reproduce's --data
(SHARED_PGN, the archives) and --suites (SHARED_EPD: STS1-STS15, Kaufman's test)."""
SHARED_PGN = SHARED_DATA / "pgn"
SHARED_EPD = SHARED_DATA / "epd"


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value)) or "none"
    return "empty" if value == "" else str(value)


def field_facts(cls: type, name: str) -> tuple[str, Any, Any]:
    """(docstring on one line, default, annotation) of a field of a dataclass or of a pydantic
    model (a dg.Config)."""
    if dataclasses.is_dataclass(cls):
        f = {f.name: f for f in dataclasses.fields(cls)}[name]
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = None
        return field_docs(cls).get(name, ""), default, field_type(cls, name)
    f = cls.model_fields[name]
    return " ".join((f.description or "").split()), f.default, f.annotation


def add_field_flag(parser, cls: type, name: str, *flags: str, **kwargs) -> argparse.Action:
    """One flag (`flags`, e.g. "--limit") for field `name` of `cls`: its docstring and default
    as help ("... (default 0)"), its default, a Literal's values as choices; kwargs (type,
    metavar, action, default, help) over those (a help given may say "{default}")."""
    doc, default, annotation = field_facts(cls, name)
    choices = literal_choices(annotation)
    if kwargs.get("action") in ("store_true", "store_false"):
        kwargs.setdefault("default", not (kwargs["action"] == "store_true"))
    else:
        kwargs.setdefault("default", default)
        if choices is not None:
            kwargs.setdefault("choices", choices)
        elif "type" not in kwargs and annotation in (int, float, str):
            kwargs["type"] = annotation
    if "help" not in kwargs:
        kwargs["help"] = f"{doc} (default {_show(default)})" if doc else f"(default {_show(default)})"
    else:  # a help of its own may name the field's default as {default}
        kwargs["help"] = kwargs["help"].format(default=_show(default))
    kwargs["help"] = kwargs["help"].replace("%", "%%")
    return parser.add_argument(*flags, **kwargs)


def add_limit_flags(parser, help_of, default: Limit | None = None) -> None:
    """--depth N / --nodes N / --static: one pipeline.labels.uci.Limit, the label setting, in every
    command that asks for one (`label` labels with it, `datasets` and `reproduce` read its labels).
    help_of(kind) is each flag's help (it may say "{default}": the default setting's value); a
    default Limit adds "(default ...)" to its own kind's flag. Read back by limit_from_args."""
    one = parser.add_mutually_exclusive_group()
    for kind in LIMIT_KINDS:
        given = {"action": "store_true"} if kind == "static" else {"type": int, "metavar": "N"}
        text = help_of(kind)
        if default is not None and default.kind == kind:
            text += f" (default: {default})" if kind == "static" else f" (default {default.value})"
        one.add_argument(f"--{kind}", dest=f"limit_{kind}", default=None, help=text.replace("%", "%%"), **given)


def limit_from_args(args: argparse.Namespace, command: str, default: Limit | None = None) -> Limit | None:
    """The Limit the flags of add_limit_flags give (`default` when none is given); a bad value is
    one line naming the flag (SystemExit)."""
    for kind in LIMIT_KINDS:
        given = getattr(args, f"limit_{kind}", None)
        if given is None or given is False:
            continue
        try:
            return Limit(kind, 0 if given is True else given)
        except ValueError as e:
            raise SystemExit(f"chess-pipeline {command}: --{kind}: {e}") from None
    return default
