-- +goose Up
-- Minting per client, currency and UTC day, against
-- LEDGER_MAX_DEPOSIT_CENTS_PER_DAY: each deposit adds its amount to its
-- row in its own transaction, and the row's lock orders the concurrent
-- deposits of one client, so that together they cannot pass the ceiling.
-- Deposits already made are counted from the deposit table.
CREATE TABLE deposit_daily (
    client_id   TEXT   NOT NULL,
    currency    TEXT   NOT NULL CONSTRAINT deposit_daily_currency_shape CHECK (currency ~ '^[A-Z]{3}$'),
    day         DATE   NOT NULL,
    total_cents BIGINT NOT NULL CONSTRAINT deposit_daily_total_positive CHECK (total_cents > 0),
    PRIMARY KEY (client_id, currency, day)
);

INSERT INTO deposit_daily (client_id, currency, day, total_cents)
SELECT client_id, currency, (created_at AT TIME ZONE 'UTC')::date, sum(amount_cents)
FROM deposit
WHERE client_id IS NOT NULL
GROUP BY client_id, currency, (created_at AT TIME ZONE 'UTC')::date;

-- +goose Down
DROP TABLE deposit_daily;
