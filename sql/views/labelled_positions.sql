-- Every position row (one per game and ply) with the single best label of that position
-- over all engines, or NULL label columns. Matched on the full position (key, planes, side
-- to move, castling, en passant; ep_square is NULL without an en-passant capture), so a
-- Zobrist collision cannot mix labels.
CREATE OR REPLACE VIEW labelled_positions AS
WITH best AS (
    SELECT * FROM labels
    QUALIFY row_number() OVER (
        PARTITION BY position_key, planes, side_to_move, castling, ep_square
        ORDER BY limit_kind = 'static', hash_cleared IS NOT TRUE, depth DESC, labelled_at DESC
    ) = 1
)
SELECT p.*, b.fen, b.engine, b.limit_kind, b.limit_value, b.cp, b.mate, b.score,
       b.best_move, b.pv, b.depth, b.labelled_at
FROM positions p
LEFT JOIN best b
    ON b.position_key = p.position_key AND b.planes = p.planes AND b.side_to_move = p.side_to_move
   AND b.castling = p.castling AND b.ep_square IS NOT DISTINCT FROM p.ep_square;
