-- +goose Up
-- The outbox is a queue: every event is inserted, leased and marked
-- published, two non-HOT updates (status is in the partial indexes'
-- predicates), so its dead tuples and dead entries in the unpublished index
-- grow with the rate, and every claim's index scan walks them. With the
-- default thresholds (20% of a table that keeps a week of published events)
-- and cost limits, autovacuum fell behind at 400 events/s within minutes:
-- claims slowed down, the relay fell behind, the backlog made claims slower
-- still (make bench-e2e, a 5-minute step). Vacuum it after a fixed number of
-- dead tuples, whatever its size, without cost delay; analyze it as often,
-- since its statistics always lag behind a queue.
ALTER TABLE outbox_event SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 5000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 5000,
    autovacuum_analyze_scale_factor = 0,
    autovacuum_analyze_threshold = 5000,
    autovacuum_vacuum_cost_delay = 0
);

-- +goose Down
ALTER TABLE outbox_event RESET (
    autovacuum_vacuum_scale_factor,
    autovacuum_vacuum_threshold,
    autovacuum_vacuum_insert_scale_factor,
    autovacuum_vacuum_insert_threshold,
    autovacuum_analyze_scale_factor,
    autovacuum_analyze_threshold,
    autovacuum_vacuum_cost_delay
);
