"""Base classes of the asset boundary's run config and resources, and `config_from`, which
derives them from the library's dataclasses.

Each setting is declared once, in the plain dataclass of pipeline/ or training/ (name, type,
default, and the attribute docstring under the field as its description; pipeline/settings.py
says why). `config_from` turns such a dataclass into the `dg.Config` (or, with
base=DescribedResource, the `dg.ConfigurableResource`) the assets take: the same names, types
and defaults, and the docstrings as the fields' `description`, which Dagster puts in the
config schema (the UI's launchpad shows them). `to_dataclass` turns a config back into the
dataclass. A field declared by hand on a config class (one with no library dataclass behind
it) gets its description the same way: pydantic's `use_attribute_docstrings` copies the
string under it. tests/assets/test_ui_text.py checks that no field is left without one.

Dagster's config system takes no tuples: a `tuple[X, ...]` field is a `list[X]` in the
config and becomes a tuple again in `to_dataclass`.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable, Mapping
from typing import Any, get_args, get_origin

import dagster as dg
from pydantic import ConfigDict, Field, create_model

from pipeline.settings import field_docs, field_type

DOCSTRINGS = ConfigDict(use_attribute_docstrings=True)

_SOURCES: dict[type, tuple[tuple[type, dict[str, str]], ...]] = {}
"""config class made by config_from -> (dataclass, {config field: dataclass field}) it derives from."""


class _ToDataclass:
    def to_dataclass(self, cls: type | None = None, **overrides: Any) -> Any:
        """This config as the library dataclass it was derived from (`cls` where there are
        several), `overrides` over its values."""
        return to_dataclass(self, cls, **overrides)


class DescribedConfig(_ToDataclass, dg.Config):
    """A run config whose fields' docstrings are their launchpad descriptions."""

    model_config = DOCSTRINGS


class DescribedResource(_ToDataclass, dg.ConfigurableResource):
    """A resource whose fields' docstrings are their launchpad descriptions."""

    model_config = DOCSTRINGS


def _config_type(annotation: Any) -> Any:
    """The config field's type: the dataclass's, with tuple[X, ...] as list[X]."""
    if get_origin(annotation) is tuple:
        args = [a for a in get_args(annotation) if a is not Ellipsis]
        if len(set(args)) != 1:
            raise TypeError(f"only tuple[X, ...] maps onto Dagster config, got {annotation}")
        return list[args[0]]
    return annotation


def _default(f: dataclasses.Field, defaults: Mapping[str, Any]) -> Any:
    if f.name in defaults:
        value = defaults[f.name]
    elif f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return ...  # required
    return list(value) if isinstance(value, tuple) else value


def config_from(
    dataclass_cls: type,
    *,
    name: str | None = None,
    names: Iterable[str] | None = None,
    exclude: Iterable[str] = (),
    base: type = DescribedConfig,
    prefix: str = "",
    rename: Mapping[str, str] | None = None,
    defaults: Mapping[str, Any] | None = None,
    doc: str | None = None,
) -> type:
    """A `dg.Config` (base=DescribedConfig, or a subclass) or `dg.ConfigurableResource`
    (base=DescribedResource) class with one field per field of `dataclass_cls` (those in
    `names` if given, less `exclude`): the same type (tuples as lists), the same default (or
    `defaults[name]`), the field's docstring as its description (a field without one is an
    error: the launchpad would show it bare). A field is named `prefix + name`, or
    `rename[name]`. A base made by config_from carries its fields over, so two dataclasses
    compose into one config (chain the calls); `to_dataclass(config, cls)` picks one back.
    """
    fields = {f.name: f for f in dataclasses.fields(dataclass_cls)}
    rename = dict(rename or {})
    defaults = dict(defaults or {})
    unknown = [n for n in [*(names or ()), *exclude, *rename, *defaults] if n not in fields]
    if unknown:
        raise ValueError(f"{dataclass_cls.__name__} has no field(s) {', '.join(unknown)}")
    chosen = [n for n in (list(names) if names is not None else list(fields)) if n not in set(exclude)]
    docs = field_docs(dataclass_cls)
    if missing := [n for n in chosen if n not in docs]:
        raise ValueError(
            f"{dataclass_cls.__name__}: no docstring under field(s) {', '.join(missing)} (the launchpad's description)"
        )
    mapping = {rename.get(n, prefix + n): n for n in chosen}
    definitions = {
        key: (
            _config_type(field_type(dataclass_cls, n)),
            Field(default=_default(fields[n], defaults), description=docs[n]),
        )
        for key, n in mapping.items()
    }
    model = create_model(
        name or dataclass_cls.__name__,
        __base__=base,
        __module__=sys._getframe(1).f_globals.get("__name__", __name__),
        __doc__=doc or f"Derived from {dataclass_cls.__module__}.{dataclass_cls.__qualname__}.",
        **definitions,
    )
    _SOURCES[model] = ((dataclass_cls, mapping),)
    return model


def sources(config_cls: type) -> tuple[tuple[type, dict[str, str]], ...]:
    """The dataclasses a config class derives from (through config_from, its own or a base's),
    each with {config field: dataclass field}."""
    out: dict[type, dict[str, str]] = {}
    for klass in reversed(config_cls.__mro__):
        for dc, mapping in _SOURCES.get(klass, ()):
            out.setdefault(dc, {}).update(mapping)
    return tuple(out.items())


def to_dataclass(config: Any, cls: type | None = None, **overrides: Any) -> Any:
    """The library dataclass `cls` (the only one the config derives from, if not given) built
    from a config made by config_from: each derived field's value (lists back to tuples where
    the dataclass has a tuple), the dataclass's defaults for the fields the config leaves out,
    `overrides` over both. The dataclass's own checks (`__post_init__`) run here."""
    found = dict(sources(type(config)))
    if cls is None:
        if len(found) != 1:
            raise TypeError(
                f"{type(config).__name__} derives from {len(found)} dataclasses "
                f"({', '.join(c.__name__ for c in found) or 'none'}): name the one wanted"
            )
        cls = next(iter(found))
    if cls not in found:
        raise TypeError(f"{type(config).__name__} is not derived from {cls.__name__}")
    kwargs = {}
    for key, name in found[cls].items():
        value = getattr(config, key)
        if get_origin(field_type(cls, name)) is tuple and value is not None:
            value = tuple(value)
        kwargs[name] = value
    kwargs.update(overrides)
    return cls(**kwargs)
