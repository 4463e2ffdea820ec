package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/paysuite/payments/pkg/dlt"
)

// replayCommand is "payments dlt replay".
func replayCommand(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string, mains []string) error {
	fs := newFlagSet("replay", "Usage: dlt replay --topic <dlt> (--partition P --offset O | --key K | --from T | --to T | --all) [--rate R] [--dry-run] [--unverified]\n\n"+
		"Re-publishes the selected records of a dead-letter topic <topic>-dlt to <topic>, and to no other topic\n"+
		"whatever their headers say, with their original headers and a "+`"dlt-replayed-at"`+" marker, at most --rate records per second.\n"+
		"Each record must match the record at the partition and offset its headers name on <topic> (same key and value);\n"+
		"one that does not (forged, or its original past retention) is refused unless --unverified, and is then marked "+`"`+dlt.HeaderUnverified+`"`+".\n"+
		"Consumers deduplicate on the event id, so replaying a record twice has no second effect.", stdout)
	var sel selection
	sel.register(fs, getenv, 0)
	rate := fs.Float64("rate", 10, "records per second at most (0: no limit)")
	all := fs.Bool("all", false, "replay every record of the topic (when no other selection is given)")
	dryRun := fs.Bool("dry-run", false, "show what would be replayed and where, publish nothing")
	unverified := fs.Bool("unverified", false, "also replay records that match no original on the main topic (each marked "+dlt.HeaderUnverified+")")
	if help, err := parseDLTFlags(fs, args); help || err != nil {
		return err
	}
	f, err := sel.filter()
	if err != nil {
		return fmt.Errorf("dlt replay: %w", err)
	}
	selective := f.Key != "" || !f.From.IsZero() || !f.To.IsZero() || len(f.Partitions) > 0 || len(f.Offsets) > 0 || f.Limit > 0
	if !selective && !*all {
		return errors.New("dlt replay: select records with --partition/--offset, --key, --from, --to or --limit, or pass --all")
	}
	if *rate < 0 {
		return errors.New("dlt replay: --rate must not be negative")
	}
	if _, err := dlt.MainTopic(f.Topic, mains); err != nil {
		return fmt.Errorf("dlt replay: %w", err)
	}
	cfg, err := sel.brokerConfig(getenv)
	if err != nil {
		return fmt.Errorf("dlt replay: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, sel.timeout)
	defer cancel()
	if len(f.Offsets) > 0 && len(f.Partitions) != 1 {
		parts, err := dlt.Partitions(ctx, cfg, f.Topic)
		if err != nil {
			return err
		}
		if len(parts) > 1 && len(f.Partitions) == 0 {
			return fmt.Errorf("dlt replay: %s has %d partitions: say which with --partition", f.Topic, len(parts))
		}
	}
	recs, err := dlt.List(ctx, cfg, f)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		return errors.New("dlt replay: no record matches the selection")
	}
	if err := writeTable(stdout, recs); err != nil {
		return err
	}
	plan, err := dlt.Prepare(ctx, cfg, f.Topic, mains, recs)
	if err != nil {
		return fmt.Errorf("dlt replay: %w", err)
	}
	if err := writeChecks(stdout, plan); err != nil {
		return err
	}
	nu := plan.Unverified()
	if *dryRun {
		_, err := fmt.Fprintf(stdout, "dry run: %d record(s) would be replayed to %s (%d unverified%s)\n",
			len(recs), plan.Target, nu, unverifiedNote(nu, *unverified))
		return err
	}
	if nu > 0 && !*unverified {
		return fmt.Errorf("dlt replay: refused: %d of %d record(s) match no record of %s at the offset their headers name; "+
			"nothing was replayed (pass --unverified to replay them anyway)", nu, len(recs), plan.Target)
	}
	n, err := dlt.Replay(ctx, cfg, nil, plan, dlt.Options{Rate: *rate, Unverified: *unverified})
	if _, werr := fmt.Fprintf(stdout, "replayed %d of %d record(s) to %s (%d unverified%s)\n",
		n, len(recs), plan.Target, nu, unverifiedNote(nu, *unverified)); werr != nil && err == nil {
		err = werr
	}
	return err
}

// unverifiedNote is what the summary says of unverified records.
func unverifiedNote(n int, forced bool) string {
	switch {
	case n == 0:
		return ""
	case forced:
		return ", replayed with --unverified and marked " + dlt.HeaderUnverified
	default:
		return ", refused without --unverified"
	}
}

// writeChecks prints where a replay goes and why each record that did not
// match its original did not.
func writeChecks(w io.Writer, p dlt.Plan) error {
	if _, err := fmt.Fprintf(w, "target: %s\n", printable(p.Target)); err != nil {
		return err
	}
	for _, c := range p.Checks {
		if c.Verified {
			continue
		}
		if _, err := fmt.Fprintf(w, "UNVERIFIED %d/%d: %s\n", c.Record.Partition, c.Record.Offset, cell(c.Problem, 200)); err != nil {
			return err
		}
	}
	return nil
}
