-- The best label of each distinct position per engine (name + version): a search beats
-- the static evaluation, then the deepest search, then the newest label.
CREATE OR REPLACE VIEW best_labels AS
SELECT * FROM labels
QUALIFY row_number() OVER (
    PARTITION BY position_key, planes, side_to_move, castling, ep_square, engine
    ORDER BY limit_kind = 'static', depth DESC, labelled_at DESC
) = 1;
