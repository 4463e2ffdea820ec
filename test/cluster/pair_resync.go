package cluster

import (
	"fmt"
	"os"
	"path/filepath"
)

// Resync rebuilds the standby from the current primary and, in the
// synchronous modes, makes it the synchronous standby again, so that the
// pair can fail over once more. A former primary fenced by FenceOld often
// cannot follow the new timeline (its WAL went past the point the standby
// was promoted at, which a kill -9 under load makes likely even with a
// synchronous standby: the primary writes its WAL before sending it), so
// the standby is a fresh base backup (pg_basebackup -R -X stream) rather
// than the fenced copy, as a failover manager rebuilds a replica
// (pg_rewind or a new base backup). The rebuilt standby streams from the
// primary directly, not through the proxy: CutReplication applies to the
// pair as started only.
func (p *Pair) Resync() {
	p.tb.Helper()
	if p.old >= 0 {
		p.tb.Fatal("Resync: fence the former primary first (FenceOld)")
	}
	sb, cur := p.Standby(), p.Primary()
	if len(sb.pids()) > 0 {
		sb.Kill()
	}
	if err := os.RemoveAll(sb.Data()); err != nil {
		p.tb.Fatalf("Resync: remove %s: %v", sb.Data(), err)
	}
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=postgres application_name=%s", cur.port, sb.name)
	if out, err := asPG(filepath.Join(sb.bin, "pg_basebackup"), "-d", conninfo, "-D", sb.Data(),
		"-R", "-X", "stream", "-c", "fast").CombinedOutput(); err != nil {
		p.tb.Fatalf("Resync: pg_basebackup from %s: %v: %s", cur.name, err, out)
	}
	sb.Start()
	if p.mode != Async {
		// Promote cleared it on the new primary; the rebuilt standby is the
		// synchronous one again once the setting is back.
		p.alterSystem(cur, "SET synchronous_standby_names = "+quoteLiteral(SyncStandbyNames))
	}
	p.WaitStreaming()
}
