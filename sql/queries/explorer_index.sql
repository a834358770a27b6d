-- Where a position's rows are: per positions file, the row numbers the key-sorted position index
-- gives for any of $keys (a lookup reads only the index row groups whose key range holds one).
SELECT positions_file, list("row" ORDER BY "row") AS rows
FROM position_lookup
WHERE position_key IN (SELECT unnest($keys::UBIGINT[]))  -- typed, or no row group is skipped
GROUP BY positions_file
ORDER BY positions_file;
