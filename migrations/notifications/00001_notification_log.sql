-- +goose Up
-- The notification log: one row per result event, keyed by its event id, so
-- that an event redelivered after its notification succeeded sends nothing
-- again. The row is locked for the duration of a send, so two concurrent
-- deliveries of one event (the main topic and a replay, say) send once.
CREATE TABLE notification (
    event_id        UUID        PRIMARY KEY,
    transfer_id     UUID        NOT NULL,
    event_type      TEXT        NOT NULL,
    -- source_account is the record key (contaOrigem): it routes the webhook.
    source_account  TEXT        NOT NULL,
    channel         TEXT        NOT NULL,
    status          TEXT        NOT NULL DEFAULT 'PENDING'
                    CHECK (status IN ('PENDING', 'DELIVERED', 'FAILED', 'NO_DESTINATION')),
    attempts        INT         NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    delivered_at    TIMESTAMPTZ,
    last_error      TEXT,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    CHECK ((status = 'DELIVERED') = (delivered_at IS NOT NULL))
);

-- Operators look up a transfer's notifications and the failing ones.
CREATE INDEX notification_transfer ON notification (transfer_id);
CREATE INDEX notification_failed ON notification (updated_at) WHERE status = 'FAILED';

-- +goose Down
DROP TABLE notification;
