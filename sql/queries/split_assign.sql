-- Split a dataset's labelled rows (temp table `candidate`) by game: games with the same
-- start and move sequence form one group, and each group goes to test, val or train by a
-- hash of the seed and its moves (u in [0, 1)), so the split is deterministic for a seed, a
-- repeated game never straddles two splits, and a game keeps its split as the store grows.
-- A dataset of three groups or more whose split with a share would get no group by hash alone
-- (train always has a share) still gets one of each: the empty splits, train first, then test,
-- then val, take the groups with the largest hashes of the split holding the most groups (which
-- keeps at least one). Fewer groups than that keep the hash's split.
-- $by = 'position' splits rows instead (a hash of the seed, game and ply each), as the thesis
-- split its positions: repeated positions and games then straddle splits. For comparison only.
CREATE OR REPLACE TEMP TABLE assigned AS
WITH groups AS (
    SELECT g.game_id,
           ('0x' || substr(md5($seed::VARCHAR || '|' || coalesce(g.start_fen, '') || '|' || g.moves_uci), 1, 12))::UBIGINT
               / 281474976710656.0 AS u
    FROM games g
    SEMI JOIN candidate c ON c.game_id = g.game_id
), group_u AS (
    SELECT DISTINCT u FROM groups
), by_hash AS (
    SELECT u,
           CASE WHEN u < $test_fraction THEN 'test'
                WHEN u < $test_fraction + $val_fraction THEN 'val'
                ELSE 'train' END AS split
    FROM group_u
), ranked AS (
    SELECT u, split, row_number() OVER (PARTITION BY split ORDER BY u DESC) AS r FROM by_hash
), counts AS (
    SELECT count(*) AS n,
           count(*) FILTER (WHERE split = 'train') AS n_train,
           count(*) FILTER (WHERE split = 'val') AS n_val,
           count(*) FILTER (WHERE split = 'test') AS n_test
    FROM by_hash
), plan AS (
    SELECT n,
           list_concat(CASE WHEN n_train = 0 THEN ['train'] ELSE []::VARCHAR[] END,
                       CASE WHEN n_test = 0 AND $test_fraction > 0 THEN ['test'] ELSE []::VARCHAR[] END,
                       CASE WHEN n_val = 0 AND $val_fraction > 0 THEN ['val'] ELSE []::VARCHAR[] END) AS empty,
           CASE WHEN n_train >= n_val AND n_train >= n_test THEN 'train'
                WHEN n_val >= n_test THEN 'val'
                ELSE 'test' END AS donor
    FROM counts
), moved AS (
    SELECT k.u, p.empty[k.r] AS split
    FROM ranked k CROSS JOIN plan p
    WHERE p.n >= 3 AND k.split = p.donor AND k.r <= len(p.empty)
)
, split_u AS (
    SELECT c.*, m.split AS moved_split,
           CASE WHEN $by = 'position'
                THEN ('0x' || substr(md5($seed::VARCHAR || '|' || c.game_id::VARCHAR || '|' || c.ply::VARCHAR), 1, 12))::UBIGINT
                     / 281474976710656.0
                ELSE g.u END AS split_u
    FROM candidate c
    JOIN groups g USING (game_id)
    LEFT JOIN moved m ON m.u = g.u
    WHERE c.target IS NOT NULL
)
SELECT * EXCLUDE (moved_split, split_u),
       coalesce(CASE WHEN $by = 'game' THEN moved_split END,
                CASE WHEN split_u < $test_fraction THEN 'test'
                     WHEN split_u < $test_fraction + $val_fraction THEN 'val'
                     ELSE 'train' END) AS split
FROM split_u;
