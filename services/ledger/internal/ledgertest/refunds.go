package ledgertest

// settledSQL is what the ledger settled for the transfer of marker m (a
// captured hold: its reservation r's captured amount), NULL when nothing.
const settledSQL = `CASE WHEN m.result = 'LIQUIDADA' THEN m.amount_cents WHEN r.state = 'captured' THEN r.captured_cents END`

// refundInvariants are the invariants of refunds (CONTRACTS.md section
// 10), queries that must return no rows, as invariants are.
var refundInvariants = []struct {
	name  string
	query string
}{
	{"the refunds settled of a transfer never exceed what the ledger settled for it", `
SELECT f.transfer_id || ' refunded ' || sum(f.amount_cents) || ' of ' || coalesce(max(` + settledSQL + `), 0)
FROM refund f
LEFT JOIN processed_transfer m ON m.transfer_id = f.transfer_id
LEFT JOIN reservation r ON r.transfer_id = f.transfer_id
WHERE f.result = 'LIQUIDADO'
GROUP BY f.transfer_id
HAVING sum(f.amount_cents) > coalesce(max(` + settledSQL + `), 0)`},
	// Each refund id posts at most once: the postings' natural key holds
	// one debit and one credit per refund, and this ties them to its
	// settled marker, of its amount, from its destination to its source.
	{"a settled refund has its two postings, from the destination to the source, of its amount; any other refund none", `
SELECT f.refund_id || ' ' || f.result FROM refund f
LEFT JOIN (SELECT entry_id,
                  max(account_id) FILTER (WHERE direction = 'D') AS debited,
                  max(account_id) FILTER (WHERE direction = 'C') AS credited,
                  max(amount_cents) AS amount
             FROM posting WHERE entry_type = 'REFUND' GROUP BY entry_id) p ON p.entry_id = f.refund_id
WHERE (f.result = 'LIQUIDADO') <> (p.entry_id IS NOT NULL)
   OR (p.entry_id IS NOT NULL AND (p.debited IS DISTINCT FROM f.dest_account OR p.credited IS DISTINCT FROM f.source_account
                                   OR p.amount <> f.amount_cents))`},
	{"every refund posting belongs to a settled refund", `
SELECT p.entry_id::text FROM posting p LEFT JOIN refund f ON f.refund_id = p.entry_id
WHERE p.entry_type = 'REFUND' AND f.result IS DISTINCT FROM 'LIQUIDADO'`},
	{"every decided refund has exactly one result event, of its result", `
SELECT f.refund_id || ' ' || f.result || ' events ' || count(e.id) FROM refund f
LEFT JOIN outbox_event e ON e.aggregate_type = 'refund' AND e.aggregate_id = f.refund_id::text
GROUP BY f.refund_id, f.result, f.reason, f.result_event_id
HAVING count(e.id) <> 1
    OR bool_or(e.id IS DISTINCT FROM f.result_event_id)
    OR bool_or(e.event_type IS DISTINCT FROM CASE f.result WHEN 'LIQUIDADO' THEN 'EstornoLiquidado'
                                                           WHEN 'REJEITADO' THEN 'EstornoRejeitado' END)
    OR bool_or(e.payload->>'estornoId' IS DISTINCT FROM f.refund_id::text)
    OR bool_or((e.payload->>'motivo') IS DISTINCT FROM f.reason)`},
}
