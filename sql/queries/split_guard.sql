-- The leakage guard: a position key in test is removed from val and train, one in val from
-- train, so no position of test or val is in train and val and test share none.
CREATE OR REPLACE TEMP TABLE split_rows AS
WITH held_test AS (SELECT DISTINCT position_key FROM assigned WHERE split = 'test'),
     held_val AS (SELECT DISTINCT position_key FROM assigned WHERE split = 'val')
SELECT a.* FROM assigned a
WHERE NOT (a.split IN ('train', 'val') AND a.position_key IN (SELECT position_key FROM held_test))
  AND NOT (a.split = 'train' AND a.position_key IN (SELECT position_key FROM held_val));
