-- Split a dataset's labelled rows (temp table `candidate`) by game: games with the same
-- start and move sequence form one group, and each group goes to test, val or train by a
-- hash of the seed and its moves (u in [0, 1)), so the split is deterministic for a seed, a
-- repeated game never straddles two splits, and a game keeps its split as the store grows.
-- A dataset so small that a split with a share would get no group at all (three groups or
-- more) gives that split the group(s) with the largest hash instead.
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
), counts AS (
    SELECT count(*) AS n,
           count(*) FILTER (WHERE u < $test_fraction) AS n_test,
           count(*) FILTER (WHERE u >= $test_fraction AND u < $test_fraction + $val_fraction) AS n_val
    FROM group_u
), top AS (
    SELECT u, row_number() OVER (ORDER BY u DESC) AS r FROM group_u
), moved AS (
    SELECT t.u,
           CASE WHEN k.n_test = 0 AND $test_fraction > 0 AND t.r = 1 THEN 'test'
                WHEN k.n_val = 0 AND $val_fraction > 0
                     AND t.r = CASE WHEN k.n_test = 0 AND $test_fraction > 0 THEN 2 ELSE 1 END THEN 'val'
           END AS split
    FROM top t CROSS JOIN counts k
    WHERE k.n >= 3 AND t.r <= 2
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
