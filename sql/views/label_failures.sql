-- Positions an engine setting could not label (crash or timeout on every try, no static
-- evaluation in check, ...), with the reason. They are not retried unless a run asks.
CREATE OR REPLACE VIEW label_failures AS
SELECT * FROM read_parquet({{parquet:label_failures}}, union_by_name = true) WHERE {{store_guard}};
