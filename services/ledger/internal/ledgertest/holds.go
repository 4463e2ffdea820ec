package ledgertest

// holdInvariants are the invariants of holds (CONTRACTS.md section 9),
// queries that must return no rows, as invariants are.
var holdInvariants = []struct {
	name  string
	query string
}{
	{"every account's reserved amount is between 0 and its balance (customer accounts)", `
SELECT id || ': reserved ' || reserved_cents || ', balance ' || balance_cents FROM account
WHERE reserved_cents < 0 OR (NOT funding AND reserved_cents > balance_cents)`},
	{"every account's reserved amount equals the sum of its open reservations", `
SELECT a.id || ': reserved ' || a.reserved_cents || ', open reservations ' || coalesce(o.total, 0) FROM account a
LEFT JOIN (SELECT source_account, sum(amount_cents) AS total FROM reservation WHERE state = 'open'
           GROUP BY source_account) o ON o.source_account = a.id
WHERE a.reserved_cents <> coalesce(o.total, 0)`},
	{"every reservation is the hold its marker decided, as asked, and captured at most what it reserved", `
SELECT r.transfer_id || ' ' || r.state FROM reservation r LEFT JOIN processed_transfer m ON m.transfer_id = r.transfer_id
WHERE m.result IS DISTINCT FROM 'RESERVADA' OR m.source_account <> r.source_account OR m.dest_account <> r.dest_account
   OR m.amount_cents <> r.amount_cents OR m.currency <> r.currency OR r.captured_cents > r.amount_cents`},
	// Released exactly once: one reservation row in one state, and one
	// closing event, whatever closed it.
	{"every hold has its reservation, its TransferenciaReservada and, once closed, exactly one closing event, of its closing", `
SELECT m.transfer_id || ' ' || coalesce(r.state, 'without reservation') || ' events ' || count(e.id)
FROM processed_transfer m
LEFT JOIN reservation r ON r.transfer_id = m.transfer_id
LEFT JOIN outbox_event e ON e.aggregate_id = m.transfer_id::text
WHERE m.result = 'RESERVADA'
GROUP BY m.transfer_id, m.result_event_id, m.source_account, r.state, r.closed_event_id, r.captured_cents
HAVING r.state IS NULL
    OR count(e.id) <> CASE r.state WHEN 'open' THEN 1 ELSE 2 END
    OR count(*) FILTER (WHERE e.id = m.result_event_id AND e.event_type = 'TransferenciaReservada') <> 1
    OR (r.state <> 'open' AND count(*) FILTER (
           WHERE e.id = r.closed_event_id
             AND e.event_type = CASE r.state WHEN 'captured' THEN 'TransferenciaLiquidada' ELSE 'TransferenciaCancelada' END
             AND (e.payload->>'motivo') IS NOT DISTINCT FROM
                 CASE r.state WHEN 'cancelled' THEN 'CANCELADA_PELO_CLIENTE' WHEN 'expired' THEN 'EXPIRADA' END
             AND (e.payload->>'valorEmCentavos')::bigint IS NOT DISTINCT FROM r.captured_cents) <> 1)
    OR bool_or(e.payload->>'transferenciaId' IS DISTINCT FROM m.transfer_id::text)
    OR bool_or(e.key <> m.source_account)`},
}
