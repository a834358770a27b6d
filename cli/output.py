"""Query results on stdout: a table for people, CSV or JSON for programs."""

import json
import sys
from typing import Literal

Format = Literal["table", "csv", "json"]


def print_table(table, fmt: Format = "table") -> None:
    """An Arrow table on stdout in the format asked for."""
    if fmt == "csv":
        import pyarrow.csv as pacsv

        pacsv.write_csv(csv_ready(table), sys.stdout.buffer)
        sys.stdout.flush()
    elif fmt == "json":
        print(json.dumps(table.to_pylist(), default=json_default, indent=1))
    else:
        import polars as pl

        with pl.Config(tbl_rows=200, tbl_cols=30, fmt_str_lengths=60, tbl_width_chars=200):
            print(pl.from_arrow(table))


def csv_ready(table):
    """CSV holds text: bytes (planes) as hex, as the JSON output gives them, and nested values
    (extra_headers' map, lists) as JSON, instead of Arrow's refusal to write them."""
    import pyarrow as pa

    for i, f in enumerate(table.schema):
        t = f.type
        if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
            values = [None if v is None else v.hex() for v in table.column(i).to_pylist()]
        elif pa.types.is_nested(t):
            as_map = pa.types.is_map(t)
            values = [
                None if v is None else json.dumps(dict(v) if as_map else v, default=json_default)
                for v in table.column(i).to_pylist()
            ]
        else:
            continue
        table = table.set_column(i, f.name, pa.array(values, pa.string()))
    return table


def json_default(v):
    if isinstance(v, bytes):
        return v.hex()
    return str(v)
