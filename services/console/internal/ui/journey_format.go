package ui

import (
	"fmt"
	"strings"
	"time"
)

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// humanDuration says d in words a person reads at a glance: "850 ms",
// "42 s", "3 min 5 s", "2 h 10 min".
func humanDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min %d s", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%d h %d min", int(d.Hours()), int(d.Minutes())%60)
	}
}

func money(cents int64, currency string) string {
	sign := ""
	if cents < 0 {
		sign, cents = "-", -cents
	}
	return fmt.Sprintf("%s%d.%02d %s", sign, cents/100, cents%100, currency)
}

// isRetryTopic tells a retry topic (main-retry-<ms>, pkg/broker.RetryTopic)
// from a main topic.
func isRetryTopic(topic string) bool {
	i := strings.LastIndex(topic, "-retry-")
	if i < 0 || i+len("-retry-") == len(topic) {
		return false
	}
	for _, c := range topic[i+len("-retry-"):] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// possessive is how the stuck wording names a service's outbox.
func possessive(service string) string {
	if strings.HasSuffix(service, "s") {
		return "the " + service + "'"
	}
	return "the " + service + "'s"
}

// outboxStep fills st from the service's outbox events of the given types:
// published (a fact line), waiting or DEAD (in words, with the requeue
func clock(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
}

func requestIDPart(id string) string {
	if id == "" {
		return ""
	}
	return ", request id " + id
}

// marks places each step with a time on a 1000-wide line, in proportion
// to its time since the first step.
func marks(steps []Step) []Mark {
	var first, last time.Time
	for _, s := range steps {
		if s.At.IsZero() {
			continue
		}
		if first.IsZero() || s.At.Before(first) {
			first = s.At
		}
		if s.At.After(last) {
			last = s.At
		}
	}
	span := last.Sub(first)
	var out []Mark
	for i, s := range steps {
		x := 40 + i*920/max(len(steps)-1, 1) // no time: evenly spaced
		if !s.At.IsZero() && span > 0 {
			x = 40 + int(float64(s.At.Sub(first))/float64(span)*920)
		}
		label := s.Title
		if !s.At.IsZero() && !first.IsZero() {
			label += " +" + humanDuration(s.At.Sub(first))
		}
		out = append(out, Mark{X: x, Label: label, State: s.State})
	}
	return out
}
