-- The explorer's hits in one archive: its positions file's rows that the position index names
-- ($rows, from position_index: positions_file = $file), read by row number, so only the row
-- groups holding them are read. A position is matched in full (planes, side to move, castling,
-- en passant), so a Zobrist collision never mixes two positions; with $placement_only, on its
-- pieces alone (the index was searched with the key of every side to move / castling / en
-- passant the placement allows).
SELECT game_id, ply, move_uci, result, white_elo, black_elo
FROM read_parquet($file, file_row_number = true)
WHERE file_row_number IN (SELECT unnest($rows)) AND planes = $planes
  AND ($placement_only
       OR (side_to_move = $side AND castling = $castling AND ep_square IS NOT DISTINCT FROM $ep));
