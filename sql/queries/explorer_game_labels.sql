-- The best Stockfish label (as best_labels orders them, over every engine) of each position of
-- one game, by ply; NULL label columns where a position has none.
WITH plies AS (
    SELECT ply, position_key, planes, side_to_move, castling, ep_square
    FROM positions
    WHERE game_id = $game_id
), best AS (
    SELECT l.*
    FROM labels l
    SEMI JOIN plies p
        ON l.position_key = p.position_key AND l.planes = p.planes AND l.side_to_move = p.side_to_move
       AND l.castling = p.castling AND l.ep_square IS NOT DISTINCT FROM p.ep_square
    QUALIFY row_number() OVER (
        PARTITION BY l.position_key, l.planes, l.side_to_move, l.castling, l.ep_square
        ORDER BY l.limit_kind = 'static', l.hash_cleared IS NOT TRUE, l.depth DESC, l.labelled_at DESC
    ) = 1
)
SELECT p.ply, b.engine, b.limit_kind, b.limit_value, b.score, b.depth
FROM plies p
LEFT JOIN best b
    ON b.position_key = p.position_key AND b.planes = p.planes AND b.side_to_move = p.side_to_move
   AND b.castling = p.castling AND b.ep_square IS NOT DISTINCT FROM p.ep_square
ORDER BY p.ply;
