-- +goose Up
-- The ledger's own tables. The outbox and inbox come from the platform set.

-- Accounts. Customer accounts never go negative (CHECK); the one funding
-- account per currency ('__FUNDING__' || currency) is the other side of every
-- deposit, so it is the only account allowed below zero: for each currency the
-- sum of all balances, funding included, is zero.
CREATE TABLE account (
    -- COLLATE "C": byte order, the same for every session, so that
    -- "ORDER BY id FOR UPDATE" locks rows in one global order.
    id            TEXT COLLATE "C" PRIMARY KEY,
    currency      TEXT        NOT NULL,
    funding       BOOLEAN     NOT NULL DEFAULT false,
    balance_cents BIGINT      NOT NULL DEFAULT 0,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT account_id_shape CHECK (id ~ '^[A-Za-z0-9._-]{1,32}$'),
    CONSTRAINT account_currency_shape CHECK (currency ~ '^[A-Z]{3}$'),
    CONSTRAINT account_funding_name CHECK (funding = starts_with(id, '__FUNDING__')),
    CONSTRAINT account_funding_currency CHECK (NOT funding OR id = '__FUNDING__' || currency),
    CONSTRAINT account_balance_non_negative CHECK (funding OR balance_cents >= 0)
);

-- Postings: double entry, one debit and one credit per settled transfer or
-- deposit, never changed or removed once written.
CREATE TABLE posting (
    -- Postings of one account are inserted under that account's row lock,
    -- so per account the id order is the commit order: keyset pagination on
    -- id never skips a posting.
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    entry_type   TEXT        NOT NULL CHECK (entry_type IN ('TRANSFER', 'DEPOSIT')),
    -- entry_id is the transfer id or the deposit id.
    entry_id     UUID        NOT NULL,
    account_id   TEXT COLLATE "C" NOT NULL REFERENCES account (id),
    direction    CHAR(1)     NOT NULL CHECK (direction IN ('D', 'C')),
    amount_cents BIGINT      NOT NULL CHECK (amount_cents > 0),
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- At most one debit and one credit per transfer or deposit: a second
    -- settlement of the same transfer cannot be written.
    CONSTRAINT posting_one_per_side UNIQUE (entry_type, entry_id, direction)
);

CREATE INDEX posting_account_newest ON posting (account_id, id DESC);

-- +goose StatementBegin
CREATE FUNCTION posting_immutable() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'postings are immutable: % on posting is not allowed', TG_OP
        USING ERRCODE = 'restrict_violation';
END
$$;
-- +goose StatementEnd

CREATE TRIGGER posting_no_update_delete BEFORE UPDATE OR DELETE ON posting
    FOR EACH ROW EXECUTE FUNCTION posting_immutable();
CREATE TRIGGER posting_no_truncate BEFORE TRUNCATE ON posting
    FOR EACH STATEMENT EXECUTE FUNCTION posting_immutable();

-- One row per transfer the ledger has decided (the seed's
-- transferencia_processada). It is inserted first, in the settlement
-- transaction, with ON CONFLICT DO NOTHING: a redelivery finds it and does
-- nothing, a concurrent delivery waits for it. A rejection is remembered like
-- a settlement, so a redelivered rejected transfer is never settled later.
CREATE TABLE processed_transfer (
    transfer_id     UUID PRIMARY KEY,
    result          TEXT        NOT NULL
                    CHECK (result IN ('EM_PROCESSAMENTO', 'LIQUIDADA', 'REJEITADA')),
    reason          TEXT
                    CHECK (reason IN ('CONTA_INEXISTENTE', 'MOEDA_INCOMPATIVEL', 'SALDO_INSUFICIENTE')),
    -- What was asked, as received (for audit; not constrained, since a
    -- malformed account id is a rejection, not an error).
    source_account  TEXT        NOT NULL,
    dest_account    TEXT        NOT NULL,
    amount_cents    BIGINT      NOT NULL,
    currency        TEXT        NOT NULL,
    -- evento-id of the TransferenciaAnalisada, and of the result event.
    event_id        UUID        NOT NULL,
    result_event_id UUID,
    processed_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT processed_transfer_reason CHECK ((result = 'REJEITADA') = (reason IS NOT NULL))
);

-- Deposits: keyed by the client's Idempotency-Key. The stored request
-- (account, amount) and response (balance after) make a replay return the
-- first response.
CREATE TABLE deposit (
    id                  UUID PRIMARY KEY,
    account_id          TEXT COLLATE "C" NOT NULL REFERENCES account (id),
    amount_cents        BIGINT      NOT NULL CHECK (amount_cents BETWEEN 1 AND 1000000000000000),
    balance_after_cents BIGINT      NOT NULL,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE deposit;
DROP TABLE processed_transfer;
DROP TABLE posting;
DROP FUNCTION posting_immutable();
DROP TABLE account;
