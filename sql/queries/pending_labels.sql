-- Distinct positions of the given shards with neither a label nor a recorded failure for one
-- engine setting, in first-seen order (game by game, ply by ply), so that an engine
-- labelling a run of them in the hash-kept setting reuses its hash between related positions.
-- (ep_square is NULL when no en-passant capture exists, hence IS NOT DISTINCT FROM.)
-- $archives: only positions whose key occurs in those archive partitions; empty: all.
WITH scope AS (
    SELECT DISTINCT p.position_key FROM positions p
    SEMI JOIN games g ON g.game_id = p.game_id AND list_contains($archives, g.archive)
    WHERE len($archives) > 0 AND in_shards(p.position_key, $shard_list, $shards)
), done AS (
    SELECT position_key, planes, side_to_move, castling, ep_square FROM labels
    WHERE engine = $engine AND limit_kind = $limit_kind AND limit_value = $limit_value
      AND (limit_kind = 'static' OR coalesce(hash_cleared, $hash_cleared) = $hash_cleared)
      AND in_shards(position_key, $shard_list, $shards)
    UNION ALL
    SELECT position_key, planes, side_to_move, castling, ep_square FROM label_failures
    WHERE engine = $engine AND limit_kind = $limit_kind AND limit_value = $limit_value
      AND (limit_kind = 'static' OR coalesce(hash_cleared, $hash_cleared) = $hash_cleared)
      AND in_shards(position_key, $shard_list, $shards) AND NOT $retry_failed
)
SELECT d.position_key, d.planes, d.side_to_move, d.castling, d.ep_square, d.occurrences
FROM shard_distinct_positions($shard_list, $shards) d
ANTI JOIN done x
    ON x.position_key = d.position_key AND x.planes = d.planes AND x.side_to_move = d.side_to_move
   AND x.castling = d.castling AND x.ep_square IS NOT DISTINCT FROM d.ep_square
WHERE len($archives) = 0 OR d.position_key IN (SELECT position_key FROM scope)
ORDER BY d.first_seen;
