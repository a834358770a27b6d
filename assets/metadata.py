"""Helpers for asset metadata: images inline in Markdown, small tables."""

import base64

import dagster as dg


def png_md(png: bytes, alt: str) -> dg.MetadataValue:
    """A PNG shown inline in the Dagster UI (Markdown with a data URI)."""
    return dg.MetadataValue.md(f"![{alt}](data:image/png;base64,{base64.b64encode(png).decode()})")


def md_table(header: tuple[str, str], rows: dict) -> dg.MetadataValue:
    lines = [f"| {header[0]} | {header[1]} |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows.items()] or ["| (none) | 0 |"]
    return dg.MetadataValue.md("\n".join(lines))
