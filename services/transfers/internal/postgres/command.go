package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	pg "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// commandRecordSQL reads the idempotency record of the command with a key.
const commandRecordSQL = `SELECT cliente_id, hash_requisicao, resposta_status, resposta_corpo FROM comando_transferencia WHERE id = $1`

// commandLockSQL locks the transfer a command is for, so that its status
// and its commands are read and written by one command at a time.
const commandLockSQL = `SELECT ` + transferColumns + ` FROM transferencia WHERE id = $1 FOR UPDATE`

// commandExistsSQL tells whether the transfer has a command already.
const commandExistsSQL = `SELECT EXISTS (SELECT 1 FROM comando_transferencia WHERE transferencia_id = $1)`

const commandInsertSQL = `
INSERT INTO comando_transferencia (id, transferencia_id, tipo, valor_centavos, cliente_id, evento_id,
                                   hash_requisicao, resposta_status, resposta_corpo)
VALUES ($1, $2, $3, NULLIF($4, 0), $5, $6, $7, $8, $9)`

// commandOnePerTransfer is the constraint that keeps a transfer to one
// command (migrations/transfers/00007_holds.sql).
const commandOnePerTransfer = "comando_transferencia_um_por_transferencia"

// Command implements transfer.Store. Its claim is Create's (an advisory
// lock on the key, taken without waiting); the transfer's row lock then
// orders the commands of one transfer, so that of two commands with
// different keys the second sees the first and is refused
// (ErrCommandInProgress); the table's one-command-per-transfer constraint
// says the same should the lock ever be skipped. The command row and its
// outbox row are written in this one transaction, or neither is.
func (s *Store) Command(ctx context.Context, id, transferID uuid.UUID, decide func(transfer.Transfer) (transfer.CommandCreation, error)) (*transfer.Record, error) {
	var rec *transfer.Record
	err := s.db.InTx(ctx, func(tx pgx.Tx) error {
		rec = nil
		r, t, err := s.claimAndLock(ctx, tx, id, transferID, commandRecordSQL)
		if err != nil || r != nil {
			rec = r
			return err // nothing written: the commit only releases the claim
		}
		c, err := decide(t)
		if err != nil {
			return err
		}
		var taken bool
		if err := tx.QueryRow(ctx, commandExistsSQL, transferID).Scan(&taken); err != nil {
			return fmt.Errorf("read commands of transfer %s: %w", transferID, err)
		}
		if taken {
			return transfer.ErrCommandInProgress
		}
		_, err = tx.Exec(ctx, commandInsertSQL, c.ID, c.TransferID, string(c.Kind), c.AmountCents, c.Client, c.Event.ID,
			c.Fingerprint[:], int16(c.Response.StatusCode), c.Response.Body) //nolint:gosec // HTTP status codes fit
		if pg.Code(err) == pg.CodeUniqueViolation && pg.ConstraintName(err) == commandOnePerTransfer {
			return transfer.ErrCommandInProgress
		}
		if err != nil {
			return fmt.Errorf("insert command %s: %w", c.ID, err)
		}
		return s.outbox.Enqueue(ctx, tx, c.Event)
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// claim takes the key id's claim in tx (see Store): ErrInProgress when
// another transaction holds it.
func (s *Store) claim(ctx context.Context, tx pgx.Tx, id uuid.UUID) error {
	var claimed bool
	var timeout string
	if err := tx.QueryRow(ctx, claimSQL, lockKey(id), s.claimTimeout).Scan(&claimed, &timeout); err != nil {
		return fmt.Errorf("claim key %s: %w", id, err)
	}
	if !claimed {
		return transfer.ErrInProgress
	}
	return nil
}

// claimAndLock is how a command or a refund with key id on transfer
// transferID starts in tx: the key's claim, then its idempotency record
// (recordSQL; when there is one, it is returned and nothing else is
// done), then the transfer locked FOR UPDATE (ErrNotFound when there is
// none).
func (s *Store) claimAndLock(ctx context.Context, tx pgx.Tx, id, transferID uuid.UUID, recordSQL string) (*transfer.Record, transfer.Transfer, error) {
	if err := s.claim(ctx, tx, id); err != nil {
		return nil, transfer.Transfer{}, err
	}
	r, err := readRecord(ctx, tx, recordSQL, id)
	if err != nil || r != nil {
		return r, transfer.Transfer{}, err
	}
	t, err := scanTransfer(tx.QueryRow(ctx, commandLockSQL, transferID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, t, fmt.Errorf("transfer %s: %w", transferID, transfer.ErrNotFound)
	}
	if err != nil {
		return nil, t, fmt.Errorf("lock transfer %s: %w", transferID, err)
	}
	return nil, t, nil
}
