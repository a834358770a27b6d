-- One stored game with every header the store keeps (the explorer's PGN and game view).
SELECT game_id, archive, game_index, event, site, date, round, white, black, white_elo, black_elo, result,
       time_control, termination, eco, ply_count, moves_uci, start_fen, extra_headers
FROM games
WHERE game_id = $game_id;
