-- positions' keys sorted, one file per archive (position_index/archive=<key>/data.parquet): a
-- `position_key = ...` filter here reads only the row groups whose key range holds the key.
-- position_lookup adds where each row is: positions_file (its archive's positions file, where
-- file_row_number = row), for lookups that then read only those rows.
CREATE OR REPLACE VIEW position_lookup AS
SELECT position_key, "row",
       regexp_replace(filename, '/position_index/(archive=[^/]*/[^/]*)$', '/positions/\1') AS positions_file
FROM read_parquet({{parquet:position_index}}, union_by_name = true, filename = true) WHERE {{store_guard}};

CREATE OR REPLACE VIEW position_index AS SELECT position_key, "row" FROM position_lookup;
