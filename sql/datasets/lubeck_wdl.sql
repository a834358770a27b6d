-- Lubeck's win/draw/loss data: every position of games whose players average over min_avg_elo
-- (engine games too), target the game's result from White's point of view:
-- 0 Black won, 1 draw, 2 White won. Unfinished games ('*') are left out.
SELECT p.position_key, p.planes, p.side_to_move, p.castling, p.ep_square, p.halfmove_clock,
       p.fullmove_number, p.game_id, p.ply, g.source, g.white_elo, g.black_elo, g.outcome AS result,
       CASE g.outcome WHEN '0-1' THEN 0 WHEN '1/2-1/2' THEN 1 ELSE 2 END AS target
FROM positions p
JOIN games g USING (game_id)
WHERE g.outcome IN ('1-0', '0-1', '1/2-1/2')
  AND ((g.white_elo + g.black_elo) / 2.0 > $min_avg_elo OR g.source IN ('ccrl', 'selfplay'));
