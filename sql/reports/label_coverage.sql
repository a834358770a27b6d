-- Label coverage by archive and engine setting: the share of each archive's position rows
-- whose position has a label under that setting, and the share of its distinct positions.
WITH settings AS (
    SELECT DISTINCT engine, limit_kind, limit_value FROM labels
), labelled AS (
    SELECT DISTINCT position_key, planes, side_to_move, castling, ep_square, engine, limit_kind, limit_value
    FROM labels
), rows AS (
    SELECT g.archive, p.position_key, p.planes, p.side_to_move, p.castling, p.ep_square
    FROM positions p JOIN games g USING (game_id)
)
SELECT r.archive, s.engine, s.limit_kind || ' ' || s.limit_value AS setting,
       count(*) AS positions,
       round(count(l.position_key) / count(*), 4) AS row_coverage,
       count(DISTINCT (r.position_key, r.planes, r.side_to_move, r.castling, r.ep_square)) AS distinct_positions,
       count(DISTINCT CASE WHEN l.position_key IS NOT NULL
                 THEN (l.position_key, l.planes, l.side_to_move, l.castling, l.ep_square) END) AS distinct_labelled
FROM rows r CROSS JOIN settings s
LEFT JOIN labelled l
    ON l.engine = s.engine AND l.limit_kind = s.limit_kind AND l.limit_value = s.limit_value
   AND l.position_key = r.position_key AND l.planes = r.planes AND l.side_to_move = r.side_to_move
   AND l.castling = r.castling AND l.ep_square IS NOT DISTINCT FROM r.ep_square
GROUP BY ALL
ORDER BY r.archive, s.engine, setting;
