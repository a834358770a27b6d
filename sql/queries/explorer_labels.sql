-- Stockfish labels of one position (matched on the full position), the best of each setting
-- (engine, limit, hash mode) first: a search before the static evaluation, a reproducible
-- label before a hash-kept one, then the deepest, then the newest (as best_labels orders them).
SELECT engine, limit_kind, limit_value, hash_cleared, cp, mate, score, best_move, pv, depth, labelled_at
FROM labels
WHERE position_key = $key AND planes = $planes AND side_to_move = $side AND castling = $castling
  AND ep_square IS NOT DISTINCT FROM $ep
QUALIFY row_number() OVER (PARTITION BY engine, limit_kind, limit_value, hash_cleared IS NOT TRUE
                           ORDER BY depth DESC, labelled_at DESC) = 1
ORDER BY limit_kind = 'static', hash_cleared IS NOT TRUE, depth DESC, labelled_at DESC;
