-- +goose NO TRANSACTION
-- +goose Up
-- The running balance (CONTRACTS.md section 11): every posting keeps the
-- account's posted balance right after it (balance_after_cents), so that
-- the balance at an instant, a statement's opening and closing balances and
-- /lancamentos read one row instead of summing the account's history.
--
-- Postings of one account are inserted under that account's row lock, so
-- per account the id order is the commit order, and the running balance
-- follows it: balance_after_cents of a posting is that of the account's
-- previous posting (0 before the first) plus a credit or minus a debit.
-- The service computes it, in the statement that inserts the posting, from
-- the balances it read under those locks, and stamps created_at with the
-- database clock read in that same statement (after the locks), so that per
-- account created_at never goes back in id order and "the last posting at
-- or before an instant" is a prefix of the chain.
--
-- This migration runs outside a transaction (NO TRANSACTION): each
-- statement below commits on its own, and the backfill commits between its
-- batches, so that it never holds a lock for long while the service (the
-- version before this one, during a rolling update) keeps settling.
--
-- Step 1: the column, nullable for now (adding it rewrites nothing), and the
-- fill of a posting written without it. Binaries that predate this migration
-- insert postings without balance_after_cents; posting_fill_balance_after
-- gives each such row its value before it is written, from the account's
-- previous posting, or, while that one still waits for the backfill, from
-- the sum of the account's earlier postings. Both are exact: the insert runs
-- under the account's lock, so every earlier posting of the account is
-- committed, and amounts never change. This ALTER waits for the inserts in
-- flight (they hold a lock on posting until they commit): every posting
-- committed after it has its value, and every posting without one has a
-- smaller id than all of those (ids come from one sequence).
ALTER TABLE posting ADD COLUMN IF NOT EXISTS balance_after_cents BIGINT;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION posting_fill_balance_after() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    prev_after BIGINT;
    prev_at    TIMESTAMPTZ;
BEGIN
    -- A row trigger sees the rows its statement inserted before this one.
    SELECT balance_after_cents, created_at INTO prev_after, prev_at
      FROM posting WHERE account_id = NEW.account_id AND id < NEW.id
     ORDER BY id DESC LIMIT 1;
    IF FOUND AND prev_after IS NULL THEN
        SELECT coalesce(sum(CASE direction WHEN 'C' THEN amount_cents ELSE -amount_cents END), 0) INTO prev_after
          FROM posting WHERE account_id = NEW.account_id AND id < NEW.id;
    END IF;
    NEW.balance_after_cents := coalesce(prev_after, 0)
        + CASE NEW.direction WHEN 'C' THEN NEW.amount_cents ELSE -NEW.amount_cents END;
    NEW.created_at := greatest(clock_timestamp(), prev_at);
    RETURN NEW;
END
$$;
-- +goose StatementEnd

DROP TRIGGER IF EXISTS posting_fill_balance_after ON posting;

-- WHEN: a posting that comes with its running balance (every posting this
-- version writes) does not call the function.
CREATE TRIGGER posting_fill_balance_after BEFORE INSERT ON posting
    FOR EACH ROW WHEN (NEW.balance_after_cents IS NULL) EXECUTE FUNCTION posting_fill_balance_after();

-- Postings stay immutable, with one exception: the backfill below gives a
-- posting without a running balance its value, once, and may move its
-- stamp later (below).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION posting_immutable() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.balance_after_cents IS NULL AND NEW.balance_after_cents IS NOT NULL
       AND NEW.id = OLD.id AND NEW.entry_type = OLD.entry_type AND NEW.entry_id = OLD.entry_id
       AND NEW.account_id = OLD.account_id AND NEW.direction = OLD.direction
       AND NEW.amount_cents = OLD.amount_cents AND NEW.created_at >= OLD.created_at THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'postings are immutable: % on posting is not allowed', TG_OP
        USING ERRCODE = 'restrict_violation';
END
$$;
-- +goose StatementEnd

-- A customer account's running balance is never negative (funding accounts
-- are the ones named __FUNDING__<currency>, account_funding_name).
-- NOT VALID: enforced on every new row at once, checked on the old ones
-- once they have their value (below).
-- +goose StatementBegin
DO $$
BEGIN
    ALTER TABLE posting ADD CONSTRAINT posting_balance_after_non_negative
        CHECK (starts_with(account_id, '__FUNDING__') OR balance_after_cents >= 0) NOT VALID;
EXCEPTION WHEN duplicate_object THEN NULL;
END
$$;
-- +goose StatementEnd

-- Step 2: the backfill of the postings written before step 1, account by
-- account, in id order, up to 10,000 postings a transaction, committing
-- between batches. It takes no account lock: a posting's running balance
-- depends only on the account's earlier postings, which never change, and
-- the postings it fills form a prefix (in id order) of each account's
-- history, the rows written since step 1 having theirs already. The only
-- locks it holds are those of the rows it updates, which nothing else
-- writes, for one batch. Run again after an interruption, it resumes: each
-- batch starts from the running balance of the posting before it.
--
-- It also mends the stamps of those postings. They were stamped with
-- now(), their transaction's start: a transaction that began first but
-- took the account's lock last posted later with an earlier stamp. Each
-- gets the latest stamp among the account's postings up to it. That
-- instant lies within its own transaction (the earlier posting's stamp is
-- before that posting's commit, which came before this transaction got
-- the lock), so it is still a true time of the posting, and per account
-- the stamps then follow the running balance, as they do for every
-- posting written since step 1.
-- +goose StatementBegin
DO $$
DECLARE
    acc     TEXT;
    last_id BIGINT;
    n       BIGINT;
    pending BIGINT := 0;
BEGIN
    FOR acc IN SELECT id FROM account ORDER BY id LOOP
        last_id := 0;
        LOOP
            WITH batch AS (
                SELECT id, created_at, CASE direction WHEN 'C' THEN amount_cents ELSE -amount_cents END AS signed
                  FROM posting
                 WHERE account_id = acc AND id > last_id AND balance_after_cents IS NULL
                 ORDER BY id LIMIT 10000
            ), prev AS (
                SELECT p.balance_after_cents AS balance, p.created_at AS at FROM posting p
                 WHERE p.account_id = acc AND p.id < (SELECT min(id) FROM batch)
                 ORDER BY p.id DESC LIMIT 1
            ), start AS (
                SELECT coalesce((SELECT balance FROM prev), 0) AS balance,
                       coalesce((SELECT at FROM prev), '-infinity') AS at
            ), filled AS (
                SELECT b.id, s.balance + sum(b.signed) OVER w AS after, greatest(s.at, max(b.created_at) OVER w) AS at
                  FROM batch b CROSS JOIN start s
                WINDOW w AS (ORDER BY b.id)
            ), done AS (
                UPDATE posting p SET balance_after_cents = f.after, created_at = f.at FROM filled f
                 WHERE p.account_id = acc AND p.id = f.id
                RETURNING p.id
            )
            SELECT count(*), coalesce(max(id), last_id) INTO n, last_id FROM done;
            EXIT WHEN n = 0;
            pending := pending + n;
            IF pending >= 10000 THEN
                COMMIT;
                pending := 0;
            END IF;
        END LOOP;
    END LOOP;
    COMMIT;
END
$$;
-- +goose StatementEnd

-- Step 3: NOT NULL without a long exclusive lock. VALIDATE scans the table
-- under a lock that lets inserts go on; SET NOT NULL then finds the valid
-- CHECK and skips its own scan.
-- +goose StatementBegin
DO $$
BEGIN
    ALTER TABLE posting ADD CONSTRAINT posting_balance_after_present CHECK (balance_after_cents IS NOT NULL) NOT VALID;
EXCEPTION WHEN duplicate_object THEN NULL;
END
$$;
-- +goose StatementEnd
ALTER TABLE posting VALIDATE CONSTRAINT posting_balance_after_present;
ALTER TABLE posting VALIDATE CONSTRAINT posting_balance_after_non_negative;
ALTER TABLE posting ALTER COLUMN balance_after_cents SET NOT NULL;
ALTER TABLE posting DROP CONSTRAINT posting_balance_after_present;

-- Step 4: the balance at an instant is one probe: the last posting of the
-- account at or before it. Built after the backfill (whose updates would
-- otherwise each add an entry) and without blocking writes.
DROP INDEX IF EXISTS posting_account_time;
CREATE INDEX CONCURRENTLY posting_account_time ON posting (account_id, created_at DESC, id DESC)
    INCLUDE (balance_after_cents);

-- +goose Down
DROP INDEX IF EXISTS posting_account_time;
DROP TRIGGER IF EXISTS posting_fill_balance_after ON posting;
DROP FUNCTION IF EXISTS posting_fill_balance_after();
ALTER TABLE posting DROP COLUMN IF EXISTS balance_after_cents;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION posting_immutable() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'postings are immutable: % on posting is not allowed', TG_OP
        USING ERRCODE = 'restrict_violation';
END
$$;
-- +goose StatementEnd
