-- The best label of each distinct position per engine (name + version): a search beats
-- the static evaluation, then a reproducible label (hash_cleared) beats a hash-kept one
-- whatever their depths (the two modes are never mixed), then the deepest, then the newest.
CREATE OR REPLACE VIEW best_labels AS
SELECT * FROM labels
QUALIFY row_number() OVER (
    PARTITION BY position_key, planes, side_to_move, castling, ep_square, engine
    ORDER BY limit_kind = 'static', hash_cleared IS NOT TRUE, depth DESC, labelled_at DESC
) = 1;
