-- The part files whose position book (sql/queries/position_book.sql) holds one full position:
-- the explorer reads their figures from the book and skips those positions files. The book's
-- rows are sorted by key, so its row groups' statistics leave one or two to read.
SELECT DISTINCT part
FROM position_book_by_part
WHERE position_key = $key AND planes = $planes AND side_to_move = $side AND castling = $castling
  AND ep_square IS NOT DISTINCT FROM $ep
ORDER BY part;
