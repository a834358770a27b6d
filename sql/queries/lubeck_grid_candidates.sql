-- Candidate start positions for Lubeck's grid: one position a game, between plies $min_ply and
-- $max_ply, not in check and not the game's last; a deterministic sample by $seed. Callers
-- classify them (quiet / tactical) with Stockfish.
WITH picked AS (
    SELECT game_id, planes, side_to_move, castling, ep_square, halfmove_clock, fullmove_number
    FROM positions
    WHERE ply BETWEEN $min_ply AND $max_ply AND NOT is_check AND move_uci IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY game_id ORDER BY hash(position_key, $seed), ply) = 1
    ORDER BY hash(game_id, $seed), game_id
    LIMIT $candidates
)
SELECT fen(planes, side_to_move, castling, ep_square, halfmove_clock, fullmove_number) AS fen
FROM picked
ORDER BY hash(game_id, $seed), game_id;
