-- +goose Up
-- The logical relay's record of its slot (pkg/outbox, logical_slot.go): a
-- slot streams only what commits after it exists, so the relay that creates
-- it first publishes from the table the events committed before, up to
-- max_seq. drained says it finished; a relay that finds the slot with
-- drained false (its creator died mid-drain) drains again.
CREATE TABLE outbox_relay_slot (
    slot       TEXT PRIMARY KEY,
    max_seq    BIGINT      NOT NULL,
    drained    BOOLEAN     NOT NULL DEFAULT false,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE outbox_relay_slot;
