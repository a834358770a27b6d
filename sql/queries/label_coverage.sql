-- Distinct positions of the given shards ($shard_list, by position_key % $shards), and how
-- many have a label / only a recorded failure for one engine setting.
WITH l AS (
    SELECT DISTINCT position_key, planes, side_to_move, castling, ep_square FROM labels
    WHERE engine = $engine AND limit_kind = $limit_kind AND limit_value = $limit_value
      AND (limit_kind = 'static' OR coalesce(hash_cleared, $hash_cleared) = $hash_cleared)
      AND in_shards(position_key, $shard_list, $shards)
), f AS (
    SELECT DISTINCT position_key, planes, side_to_move, castling, ep_square FROM label_failures
    WHERE engine = $engine AND limit_kind = $limit_kind AND limit_value = $limit_value
      AND (limit_kind = 'static' OR coalesce(hash_cleared, $hash_cleared) = $hash_cleared)
      AND in_shards(position_key, $shard_list, $shards)
), status AS (
    SELECT l.position_key IS NOT NULL AS labelled, f.position_key IS NOT NULL AS failed
    FROM shard_distinct_positions($shard_list, $shards) d
    LEFT JOIN l ON l.position_key = d.position_key AND l.planes = d.planes AND l.side_to_move = d.side_to_move
               AND l.castling = d.castling AND l.ep_square IS NOT DISTINCT FROM d.ep_square
    LEFT JOIN f ON f.position_key = d.position_key AND f.planes = d.planes AND f.side_to_move = d.side_to_move
               AND f.castling = d.castling AND f.ep_square IS NOT DISTINCT FROM d.ep_square
)
SELECT (SELECT count(*) FROM positions WHERE in_shards(position_key, $shard_list, $shards)) AS positions,
       count(*) AS distinct_positions,
       count(*) FILTER (WHERE labelled) AS labelled,
       count(*) FILTER (WHERE failed AND NOT labelled) AS failed
FROM status;
