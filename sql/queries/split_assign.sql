-- Split a dataset's labelled rows (temp table `candidate`) by game: games with the same
-- start and move sequence form one group, and each group goes to test, val or train by a
-- hash of the seed and the group, so the split is deterministic for a seed and a repeated
-- game never straddles two splits.
CREATE OR REPLACE TEMP TABLE assigned AS
WITH groups AS (
    SELECT g.game_id,
           ('0x' || substr(md5($seed::VARCHAR || '|' || coalesce(g.start_fen, '') || '|' || g.moves_uci), 1, 12))::UBIGINT
               / 281474976710656.0 AS u
    FROM games g
    SEMI JOIN candidate c ON c.game_id = g.game_id
)
SELECT c.*,
       CASE WHEN u < $test_fraction THEN 'test'
            WHEN u < $test_fraction + $val_fraction THEN 'val'
            ELSE 'train' END AS split
FROM candidate c
JOIN groups USING (game_id)
WHERE c.target IS NOT NULL;
