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
)
-- Balances change with every settlement: room left in each page lets an
-- update stay on its page (a HOT update, no new index entry).
WITH (fillfactor = 50);

-- An account is never removed, and what identifies it (id, currency, kind)
-- never changes: only its balance moves. Postings rely on this (below).
-- +goose StatementBegin
CREATE FUNCTION account_permanent() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.id = OLD.id AND NEW.currency = OLD.currency
       AND NEW.funding = OLD.funding AND NEW.created_at = OLD.created_at THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'accounts are permanent: % of the identity of account % is not allowed', TG_OP, OLD.id
        USING ERRCODE = 'restrict_violation';
END
$$;
-- +goose StatementEnd

-- UPDATE OF: a balance update (the hot path) does not fire it.
CREATE TRIGGER account_no_delete_or_rename BEFORE UPDATE OF id, currency, funding, created_at OR DELETE ON account
    FOR EACH ROW EXECUTE FUNCTION account_permanent();
CREATE TRIGGER account_no_truncate BEFORE TRUNCATE ON account
    FOR EACH STATEMENT EXECUTE FUNCTION account_permanent();

-- Postings: double entry, one debit and one credit per settled transfer or
-- deposit, never changed or removed once written.
CREATE TABLE posting (
    -- Postings of one account are inserted under that account's row lock,
    -- so per account the id order is the commit order: keyset pagination on
    -- (account_id, id) never skips a posting.
    id           BIGINT GENERATED ALWAYS AS IDENTITY,
    entry_type   TEXT        NOT NULL CHECK (entry_type IN ('TRANSFER', 'DEPOSIT')),
    -- entry_id is the transfer id or the deposit id.
    entry_id     UUID        NOT NULL,
    -- The account must exist: checked once per statement by
    -- posting_account_exists below, not by a foreign key.
    account_id   TEXT COLLATE "C" NOT NULL,
    direction    CHAR(1)     NOT NULL CHECK (direction IN ('D', 'C')),
    amount_cents BIGINT      NOT NULL CHECK (amount_cents > 0),
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- The natural key: at most one debit and one credit per transfer or
    -- deposit, so a second settlement of the same transfer cannot be
    -- written. Nothing looks a posting up by id alone, so id has no index
    -- of its own; posting_account_newest serves the account statement.
    CONSTRAINT posting_one_per_side PRIMARY KEY (entry_type, entry_id, direction)
);

CREATE INDEX posting_account_newest ON posting (account_id, id DESC);

-- Referential integrity of posting.account_id, once per INSERT statement
-- instead of once per row: a foreign key runs one lookup and one KEY SHARE
-- lock per posting (measured: a third of the time of settling a batch of 50
-- transfers). Since accounts are permanent (account_permanent above), a
-- posting whose account exists at insert time references it forever, which
-- is what the foreign key guaranteed.
-- +goose StatementBegin
CREATE FUNCTION posting_account_exists() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    missing TEXT;
BEGIN
    SELECT n.account_id INTO missing
      FROM new_postings n
     WHERE NOT EXISTS (SELECT 1 FROM account a WHERE a.id = n.account_id)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'posting references account %, which does not exist', missing
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER posting_account_exists AFTER INSERT ON posting
    REFERENCING NEW TABLE AS new_postings
    FOR EACH STATEMENT EXECUTE FUNCTION posting_account_exists();

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
)
-- Each marker is updated once, right after its insert, with the result:
-- room left in every page lets that update stay on the page (a HOT update,
-- no new index entry).
WITH (fillfactor = 70);

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
DROP FUNCTION posting_account_exists();
DROP FUNCTION posting_immutable();
DROP TABLE account;
DROP FUNCTION account_permanent();
