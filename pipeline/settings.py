"""Settings declared once: a plain dataclass is the schema, everything else is derived from it.

Why: a setting written out in three places (the library's dataclass, the asset's Dagster
config, the CLI's argparse), each with its own default and help text, drifts; the README
then describes a fourth version. Here the library's `@dataclass` is the only declaration of
a setting: its field gives the name, the annotation the type (a `Literal[...]` gives the
valid choices), the default the default, and the attribute docstring under the field (the
nanoGPT / nnue-pytorch habit) its description. From that one place

- `add_arguments` derives the CLI's flags (`--flag-name`, type, default, choices, help);
- `from_namespace` builds the dataclass back from the parsed arguments;
- `assets.config.config_from` derives the Dagster run config (pydantic), whose field
  descriptions the UI's launchpad shows.

The descriptions are read the way pydantic's `use_attribute_docstrings` reads them: the
class's source is parsed (`inspect.getsource` + `ast`) and the string literal right under an
annotated field is that field's docstring. The MRO is walked so an inherited field keeps the
docstring of the class that declared it (a subclass that redeclares a field may give it a new
one). This module imports neither Dagster nor pydantic: the library stays usable without them.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import enum
import functools
import inspect
import textwrap
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, Literal, get_args, get_origin

__all__ = ["add_arguments", "field_docs", "field_type", "flag_name", "from_namespace", "literal_choices"]


def _dataclass(cls: type) -> type:
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"{cls!r} is not a dataclass")
    return cls


@functools.cache
def _class_docs(klass: type) -> dict[str, str]:
    """The attribute docstrings declared in one class's own body (not its bases')."""
    try:
        source = textwrap.dedent(inspect.getsource(klass))
    except (OSError, TypeError):  # built in a REPL or by make_dataclass: no source to read
        return {}
    tree = ast.parse(source)
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == klass.__name__), None)
    if node is None:
        return {}
    docs = {}
    body = node.body
    for statement, following in zip(body, body[1:]):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[statement.target.id] = " ".join(following.value.value.split())
    return docs


def field_docs(cls: type, *, require: bool = False) -> dict[str, str]:
    """Each field of dataclass `cls` that has an attribute docstring, with that docstring on
    one line (whitespace collapsed). Inherited fields keep the docstring of the class that
    declared them. require=True: a field without a docstring is an error naming it."""
    fields = [f.name for f in dataclasses.fields(_dataclass(cls))]
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):  # the subclass's docstring wins over its base's
        if dataclasses.is_dataclass(klass):
            docs.update(_class_docs(klass))
    docs = {name: docs[name] for name in fields if docs.get(name)}
    if require and (missing := [name for name in fields if name not in docs]):
        raise ValueError(
            f"{cls.__name__}: no docstring under field(s) {', '.join(missing)}; "
            "write one line describing each under its declaration"
        )
    return docs


def field_type(cls: type, name: str) -> Any:
    """The resolved annotation of one field (string annotations evaluated)."""
    return _hints(_dataclass(cls))[name]


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _strip_optional(annotation: Any) -> Any:
    """X for `X | None` / `Optional[X]`, else the annotation itself."""
    if get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def literal_choices(annotation: Any) -> tuple | None:
    """The values of a `Literal[...]` annotation (also inside `| None`), else None."""
    annotation = _strip_optional(annotation)
    if get_origin(annotation) is Literal:
        return get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return tuple(member.value for member in annotation)
    return None


def flag_name(name: str, flag_prefix: str = "") -> str:
    """The CLI flag of a field: `--<prefix><name with dashes>`."""
    return "--" + (flag_prefix + name).replace("_", "-")


def _dest(name: str, flag_prefix: str) -> str:
    return (flag_prefix + name).replace("-", "_")


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _show(value: Any) -> str:
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (tuple, list)):
        return " ".join(map(str, value)) if value else "none"
    if value == "":
        return '""'
    return str(value)


def _scalar(cls: type, name: str, annotation: Any) -> dict:
    """argparse keywords (type, choices) for a scalar annotation."""
    choices = literal_choices(annotation)
    annotation = _strip_optional(annotation)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return {"type": type(choices[0]) if choices else str, "choices": choices}
    if choices is not None:
        kinds = {type(c) for c in choices}
        if len(kinds) != 1 or not kinds <= {str, int, float}:
            raise TypeError(f"{cls.__name__}.{name}: a Literal of one of str, int or float, got {annotation}")
        return {"type": kinds.pop(), "choices": choices}
    if annotation in (int, float, str):
        return {"type": annotation}
    raise TypeError(
        f"{cls.__name__}.{name}: no CLI flag for a field of type {annotation}; "
        "exclude it (exclude=...) or add its flag by hand"
    )


def _selected(cls: type, names: Iterable[str] | None, exclude: Iterable[str]) -> list[dataclasses.Field]:
    fields = {f.name: f for f in dataclasses.fields(_dataclass(cls))}
    unknown = [n for n in [*(names or ()), *exclude] if n not in fields]
    if unknown:
        raise ValueError(f"{cls.__name__} has no field(s) {', '.join(unknown)}; its fields: {', '.join(fields)}")
    exclude = set(exclude)
    chosen = list(names) if names is not None else list(fields)
    return [fields[n] for n in chosen if n not in exclude and fields[n].init]


def add_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    cls: type,
    names: Iterable[str] | None = None,
    *,
    exclude: Iterable[str] = (),
    defaults: Mapping[str, Any] | None = None,
    flag_prefix: str = "",
    choices: Mapping[str, Iterable[Any]] | None = None,
) -> None:
    """Add one `--flag-name` per field of dataclass `cls` (those in `names`, in that order, if
    given; less `exclude`) to an argparse parser or argument group.

    The type comes from the annotation (int, float, str; a Literal or Enum gives `choices`, so
    a misspelled value is refused with the valid ones listed; bool gives `--flag/--no-flag`;
    tuple[...] and list[...] take zero or more values), the default from the dataclass or
    `defaults[name]`, the help text from the field's docstring plus "(default X)". The dest is
    the field name (with `flag_prefix` before it), which `from_namespace` reads back.
    `choices[name]` gives the valid values of a str field that names an entry of a registry
    (a dict's keys) rather than a Literal.
    """
    fields = _selected(cls, names, exclude)
    defaults = dict(defaults or {})
    choices = {name: tuple(valid) for name, valid in (choices or {}).items()}
    for what, given in (("defaults", defaults), ("choices", choices)):
        if unknown := set(given) - {f.name for f in fields}:
            raise ValueError(f"{what} for field(s) not added from {cls.__name__}: {', '.join(sorted(unknown))}")
    docs = field_docs(cls)
    for f in fields:
        annotation = field_type(cls, f.name)
        default = defaults[f.name] if f.name in defaults else _default(f)
        kwargs: dict[str, Any] = {"dest": _dest(f.name, flag_prefix)}
        plain = _strip_optional(annotation)
        if plain is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif get_origin(plain) in (tuple, list):
            args = [a for a in get_args(plain) if a is not Ellipsis]
            if get_origin(plain) is tuple and len(set(args)) > 1:
                raise TypeError(f"{cls.__name__}.{f.name}: only tuple[X, ...] takes a CLI flag, got {annotation}")
            kwargs.update(_scalar(cls, f.name, args[0] if args else str), nargs="*")
        else:
            kwargs.update(_scalar(cls, f.name, annotation))
        if f.name in choices:
            kwargs["choices"] = choices[f.name]
        if kwargs.get("choices") is not None:
            kwargs["metavar"] = "{" + ",".join(map(str, kwargs["choices"])) + "}"
        if default is dataclasses.MISSING:
            kwargs["required"] = True
            tail = "(required)"
        else:
            kwargs["default"] = default
            tail = f"(default {_show(default)})"
        doc = docs.get(f.name, "")
        kwargs["help"] = (f"{doc} {tail}" if doc else tail).replace("%", "%%")
        parser.add_argument(flag_name(f.name, flag_prefix), **kwargs)


def _convert(annotation: Any, value: Any) -> Any:
    plain = _strip_optional(annotation)
    if value is None:
        return None
    if get_origin(plain) is tuple:
        return tuple(value)
    if get_origin(plain) is list:
        return list(value)
    if isinstance(plain, type) and issubclass(plain, enum.Enum):
        return plain(value)
    return value


def from_namespace(
    cls: type,
    namespace: argparse.Namespace | Mapping[str, Any],
    names: Iterable[str] | None = None,
    *,
    flag_prefix: str = "",
    **overrides: Any,
) -> Any:
    """The dataclass `cls` from parsed arguments: each of its fields added by `add_arguments`
    (all those present in `namespace`, or only `names`), the dataclass's own defaults for the
    others, `overrides` over both. Sequences become the tuple or list the annotation asks for.
    Fields added with a `flag_prefix` are read back with the same `flag_prefix`."""
    values = vars(namespace) if isinstance(namespace, argparse.Namespace) else dict(namespace)
    fields = _selected(cls, names, ())
    unknown = set(overrides) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise ValueError(f"{cls.__name__} has no field(s) {', '.join(sorted(unknown))}")
    kwargs = {}
    for f in fields:
        dest = _dest(f.name, flag_prefix)
        if dest in values:
            kwargs[f.name] = _convert(field_type(cls, f.name), values[dest])
        elif names is not None:
            raise ValueError(f"{flag_name(f.name, flag_prefix)} was not added to the parser (add_arguments)")
    kwargs.update(overrides)
    return cls(**kwargs)
