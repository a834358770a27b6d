-- Stockfish's static evaluation (centipawns, White's view) of each row of one dataset split
-- file, by the row's place in the file; NULL where the store has no static label for the row's
-- position (the same position match as the datasets use).
SELECT s.file_row_number AS row, l.cp
FROM read_parquet($path, file_row_number = true) s
LEFT JOIN setting_labels('static', 0, '') l
    ON l.position_key = s.position_key AND l.planes = s.planes AND l.side_to_move = s.side_to_move
   AND l.castling = s.castling AND l.ep_square IS NOT DISTINCT FROM s.ep_square
WHERE s.file_row_number < $rows
ORDER BY s.file_row_number;
