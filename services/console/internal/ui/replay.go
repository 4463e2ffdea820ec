package ui

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/opsapi"
)

// writesDLTs reports whether a service has dead-letter topics (its
// consumers dead-letter records): the ledger and notifications.
func writesDLTs(service string) bool { return service == "ledger" || service == "notifications" }

// ReplayConfirm asks to confirm a replay. Target is where the records go:
// the DLT's main topic (<topic>-dlt to <topic>), the only place the
// service replays to. Unverified asks to replay records that match no
// record of Target at the offset their headers name (the service refuses
// them otherwise); such a replay is audited as such.
type ReplayConfirm struct {
	Service, Topic, Target, Partition, Offset, Key string
	Unverified                                     bool
}

func (s *Server) confirmReplay(w http.ResponseWriter, r *http.Request, sess *session) {
	c, err := replayTarget(r.URL.Query().Get, s)
	if err != nil {
		s.message(w, r, sess, http.StatusBadRequest, "Refused", err.Error())
		return
	}
	s.render(w, r, sess, http.StatusOK, "replay", "Confirm replay", nil, c)
}

// replayTarget reads and checks a replay's choice: a service with DLTs, a
// dead-letter topic, and either one record (partition, offset) or a key.
func replayTarget(get func(string) string, s *Server) (ReplayConfirm, error) {
	c := ReplayConfirm{Service: get("service"), Topic: get("topic"), Partition: get("partition"), Offset: get("offset"), Key: get("key"),
		Unverified: get("unverified") == "on"}
	if _, ok := s.upstream(c.Service); !ok || !writesDLTs(c.Service) {
		return c, errors.New("unknown service or one without dead-letter topics: nothing was changed")
	}
	if c.Topic == "" || len(c.Topic) > 249 {
		return c, errors.New("a dead-letter topic is required: nothing was changed")
	}
	target, ok := events.MainOfDLT(c.Topic)
	if !ok {
		return c, errors.New("not a dead-letter topic (<topic>" + events.DLTSuffix + "): nothing was changed")
	}
	c.Target = target
	one := c.Partition != "" || c.Offset != ""
	if one == (c.Key != "") {
		return c, errors.New("choose one record (partition and offset) or a key: nothing was changed")
	}
	if one {
		if p, err := strconv.Atoi(c.Partition); err != nil || p < 0 {
			return c, errors.New("the partition must be a non-negative integer: nothing was changed")
		}
		if o, err := strconv.ParseInt(c.Offset, 10, 64); err != nil || o < 0 {
			return c, errors.New("the offset must be a non-negative integer: nothing was changed")
		}
	}
	return c, nil
}

func (s *Server) replay(w http.ResponseWriter, r *http.Request, sess *session, a *auth.AuditRecord) {
	c, err := replayTarget(r.PostFormValue, s)
	if err != nil {
		s.message(w, r, sess, http.StatusBadRequest, "Refused", err.Error())
		return
	}
	u, _ := s.upstream(c.Service)
	a.Resource("service", u.Name)
	a.Resource("topic", c.Topic)
	a.Resource("target", c.Target)
	q := url.Values{"topico": {c.Topic}}
	if c.Key != "" {
		q.Set("chave", c.Key)
		a.Resource("key", c.Key)
	} else {
		q.Set("particao", c.Partition)
		q.Set("offset", c.Offset)
		a.Resource("partition", c.Partition)
		a.Resource("offset", c.Offset)
	}
	if c.Unverified {
		q.Set(opsapi.ParamUnverified, "true")
		a.Resource("unverified_allowed", true)
	}
	var ans opsapi.Replayed
	if err := s.client.do(r.Context(), u, sess.token, http.MethodPost, opsapi.PathDLTReplay+"?"+q.Encode(), &ans); err != nil {
		if errors.Is(err, errNotFound) {
			s.message(w, r, sess, http.StatusNotFound, "Nothing replayed", "No record of "+c.Topic+" matches: nothing was changed.")
			return
		}
		s.upstreamFailed(w, r, sess, err)
		return
	}
	a.Resource("replayed", ans.Reenviados)
	a.Resource("unverified", ans.NaoVerificados)
	text := fmt.Sprintf("%d record(s) of %s replayed to %s.", ans.Reenviados, c.Topic, ans.Destino)
	if ans.NaoVerificados > 0 {
		text += fmt.Sprintf(" %d of them matched no original and were replayed because you asked (recorded).", ans.NaoVerificados)
	}
	s.render(w, r, sess, http.StatusOK, "message", "Replay", nil, Message{Heading: "Replay", Text: text, Back: "/backlogs"})
}
