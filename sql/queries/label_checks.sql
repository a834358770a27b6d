-- Integrity of one engine setting's labels: rows, positions labelled more than once,
-- and rows whose scores break the label contract.
SELECT
    count(*) AS rows,
    count(*) - count(DISTINCT (position_key, planes, side_to_move, castling, ep_square)) AS duplicates,
    count(*) FILTER (WHERE NOT (
        (cp IS NULL) <> (mate IS NULL)
        AND (cp IS NULL OR (abs(cp) < 30000 AND score = cp))
        AND (mate IS NULL OR (abs(mate) <= 250 AND abs(score) BETWEEN 31000 AND 32000
                              AND (mate = 0 OR sign(mate) = sign(score))))
        AND depth >= 0
        AND (limit_kind <> 'depth' OR depth <= limit_value OR mate IS NOT NULL)
    )) AS out_of_range,
    min(score) AS min_score,
    max(score) AS max_score
FROM labels
WHERE engine = $engine AND limit_kind = $limit_kind AND limit_value = $limit_value
  AND (limit_kind = 'static' OR coalesce(hash_cleared, $hash_cleared) = $hash_cleared);
