-- Hui's checkmate positions: games that end in checkmate on the board, both players rated
-- over min_elo, positions from the last `gamestage` share of the game's plies (the final
-- mate included). target: 1 White delivered the mate, 0 Black did.
SELECT p.position_key, p.planes, p.side_to_move, p.castling, p.ep_square, p.halfmove_clock,
       p.fullmove_number, p.game_id, p.ply, g.source, g.white_elo, g.black_elo, g.outcome AS result,
       g.ply_count, g.ply_count - p.ply AS plies_to_mate,
       CASE g.result_board WHEN '1-0' THEN 1 ELSE 0 END AS target
FROM positions p
JOIN games g USING (game_id)
WHERE g.result_board IN ('1-0', '0-1')
  AND g.white_elo > $min_elo AND g.black_elo > $min_elo
  AND p.ply >= g.ply_count * (1 - $gamestage);
