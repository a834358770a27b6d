-- One row per mainline position (ply 0 .. N of every game), planes packed as 96 bytes.
CREATE OR REPLACE VIEW positions AS
SELECT * FROM read_parquet({{parquet:positions}}, union_by_name = true) WHERE {{store_guard}};

-- positions with the archive each row's file is the partition of. A filter on `archive` (a
-- constant or a bound list) is applied to the file names, so the files of other archives are
-- never opened: the explorer reads an archive's rows only where its position book lacks the
-- position. (The schema file outside any archive= folder reads as archive ''.)
CREATE OR REPLACE VIEW positions_by_archive AS
SELECT * EXCLUDE (filename), regexp_extract(filename, '/archive=([^/]+)/[^/]+$', 1) AS archive
FROM read_parquet({{parquet:positions}}, union_by_name = true, filename = true) WHERE {{store_guard}};
