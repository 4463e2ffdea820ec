package ledgertest

// historyInvariants are the invariants of the running balance
// (CONTRACTS.md section 11), queries that must return no rows, as
// invariants are. Per account the posting id order is the commit order
// (postings are inserted under the account's lock), so the chain is read
// in id order.
var historyInvariants = []struct {
	name  string
	query string
}{
	{"every account's last posting has the account's balance as its running balance (none: 0)", `
SELECT a.id || ': balance ' || a.balance_cents || ', last running balance ' || coalesce(l.balance_after_cents::text, 'none')
FROM account a
LEFT JOIN LATERAL (SELECT balance_after_cents FROM posting p WHERE p.account_id = a.id ORDER BY p.id DESC LIMIT 1) l ON true
WHERE a.balance_cents IS DISTINCT FROM coalesce(l.balance_after_cents, 0)`},
	{"each posting's running balance is the previous one's (0 before the first) plus a credit or minus a debit, and its time is not before the previous one's", `
SELECT account_id || ' posting ' || id || ': running balance ' || coalesce(balance_after_cents::text, 'NULL')
       || ', previous ' || prev || ' ' || direction || ' ' || amount_cents
       || CASE WHEN created_at < prev_at THEN ', stamped before the previous posting' ELSE '' END
FROM (SELECT id, account_id, direction, amount_cents, balance_after_cents, created_at,
             lag(balance_after_cents, 1, 0::bigint) OVER w AS prev, lag(created_at) OVER w AS prev_at
        FROM posting WINDOW w AS (PARTITION BY account_id ORDER BY id)) x
WHERE balance_after_cents IS DISTINCT FROM prev + CASE direction WHEN 'C' THEN amount_cents ELSE -amount_cents END
   OR created_at < prev_at`},
}
