-- Every materialised dataset split in one view: dataset, split, position_key, game_id, ply,
-- target (class index or regression value) and each dataset's further columns (NULL for
-- datasets without them). Check a split with plain SQL, e.g. that train and test share no
-- position:  SELECT count(*) FROM datasets a JOIN datasets b USING (dataset, position_key)
--            WHERE a.split = 'train' AND b.split = 'test';
CREATE OR REPLACE VIEW datasets AS
SELECT * FROM read_parquet({{parquet:datasets}}, union_by_name = true) WHERE {{store_guard}};
