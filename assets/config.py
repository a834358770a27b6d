"""Base classes of the asset boundary's run config and resources.

A field's attribute docstring (the string under it) is its description, written once:
pydantic's `use_attribute_docstrings` copies it into the field's `description`, Dagster puts
that in the config schema (the UI's launchpad shows it), and the CLI takes its help text from
the same place (`describe`). Every `dg.Config` and `dg.ConfigurableResource` of the
Definitions derives from these; tests/assets/test_ui_text.py checks that no field is left
without a description.
"""

import dagster as dg
from pydantic import ConfigDict

DOCSTRINGS = ConfigDict(use_attribute_docstrings=True)


class DescribedConfig(dg.Config):
    """A run config whose fields' docstrings are their launchpad descriptions."""

    model_config = DOCSTRINGS


class DescribedResource(dg.ConfigurableResource):
    """A resource whose fields' docstrings are their launchpad descriptions."""

    model_config = DOCSTRINGS


def describe(cls: type, name: str) -> str:
    """The description of one field of a config or resource class, on one line (CLI help)."""
    description = cls.model_fields[name].description
    if not description:
        raise ValueError(f"{cls.__name__}.{name} has no docstring")
    return " ".join(description.split())
