package postgres

// The listing's queries, whose plans the tests check.
const (
	HistoryByPartySQL   = historyByPartySQL
	HistoryAllSQL       = historyAllSQL
	HistoryByAccountSQL = historyByAccountSQL
)
