package opsapi

import (
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/httpapi"
)

// Paths of the shared dead-letter endpoints.
const (
	PathDLT       = "/ops/dlt"
	PathDLTReplay = "/ops/dlt/reenviar"
)

// DLTListLimit bounds the records listed per dead-letter topic.
const DLTListLimit = 50

// DLTTimeout bounds a listing or a replay of dead-letter topics, in place
// of the request deadline (HTTP_REQUEST_TIMEOUT): reading topics to their
// end takes longer than an API call, and a replay cut off halfway would
// leave the operator unsure what was replayed.
const DLTTimeout = time.Minute

// DLTs is the body of GET /ops/dlt: the service's dead-letter topics.
type DLTs struct {
	Topicos []DLTTopic `json:"topicos"`
}

// DLTTopic is one dead-letter topic with its oldest records.
type DLTTopic struct {
	Topico string `json:"topico"`
	// Registros are at most DLTListLimit records, oldest first; Mais says
	// there are more.
	Registros []DLTRecord `json:"registros"`
	Mais      bool        `json:"mais"`
}

// DLTRecord is one dead-lettered record (pkg/dlt.Record on the wire).
type DLTRecord struct {
	Particao     int    `json:"particao"`
	Offset       int64  `json:"offset"`
	Chave        string `json:"chave"`
	TopicoOrigem string `json:"topicoOrigem"`
	TipoEvento   string `json:"tipoEvento"`
	EventoID     string `json:"eventoId"`
	Excecao      string `json:"excecao"`
	Mensagem     string `json:"mensagem"`
	Tentativas   int    `json:"tentativas"`
	Em           string `json:"em"`
	ReenviadoEm  string `json:"reenviadoEm,omitempty"`
}

// Replayed is the body of POST /ops/dlt/reenviar.
type Replayed struct {
	Reenviados int `json:"reenviados"`
	// Destino is the topic the records went to: the DLT's main topic.
	Destino string `json:"destino"`
	// NaoVerificados counts the records replayed without matching their
	// original (only with semVerificacao=true).
	NaoVerificados int `json:"naoVerificados"`
}

// ParamUnverified is the query parameter of POST /ops/dlt/reenviar that
// replays records matching no original too ("true"); audited.
const ParamUnverified = "semVerificacao"

// dltHandler serves the dead-letter endpoints of one service.
type dltHandler struct {
	cfg    broker.Config
	topics []string
	log    *slog.Logger
}

// DLTRoutes returns the dead-letter routes on the service's own DLTs
// (topics), each behind operacoes: the records of each, and their replay
// (pkg/dlt.Prepare and Replay), one record (topico, particao, offset) or
// every record of a key (topico, chave). A replay goes to the DLT's main
// topic and nowhere else, whatever the records' headers say, and only
// records that match a record of that topic at the offset their headers
// name are replayed unless semVerificacao=true says otherwise (the audit
// line then counts them); anything else is a 409. Consumers deduplicate
// on the event id, so a record replayed twice has one effect. The broker
// writes with the service's own principal: where Kafka ACLs keep it from
// writing the main topic, the broker's refusal is the answer (503) and
// the CLI's `payments dlt replay` with its own credential is the way.
func DLTRoutes(cfg broker.Config, topics []string, log *slog.Logger) []auth.Route {
	h := &dltHandler{cfg: cfg, topics: topics, log: log}
	return []auth.Route{
		{Method: http.MethodGet, Pattern: PathDLT, Scope: auth.ScopeOperations, Handler: h.list},
		{Method: http.MethodPost, Pattern: PathDLTReplay, Scope: auth.ScopeOperations,
			Handler: auth.Audited(log, "dlt.replay", h.replay)},
	}
}

func (h *dltHandler) list(w http.ResponseWriter, r *http.Request) {
	out := DLTs{Topicos: []DLTTopic{}}
	for _, t := range h.topics {
		ctx, cancel := httpapi.Detached(r, DLTTimeout)
		recs, err := dlt.List(ctx, h.cfg, dlt.Filter{Topic: t, Limit: DLTListLimit + 1})
		cancel()
		if err != nil {
			httpapi.WriteError(w, r, h.log, errkind.Errorf(errkind.Unavailable, "the dead-letter topic %s cannot be read now", t))
			h.log.WarnContext(r.Context(), "list dead-letter topic", "topic", t, "err", err)
			return
		}
		dt := DLTTopic{Topico: t, Registros: []DLTRecord{}, Mais: len(recs) > DLTListLimit}
		for _, rec := range recs[:min(len(recs), DLTListLimit)] {
			dt.Registros = append(dt.Registros, DLTRecord{
				Particao: rec.Partition, Offset: rec.Offset, Chave: string(rec.Key), TopicoOrigem: rec.Origin.Topic,
				TipoEvento: rec.EventType, EventoID: rec.EventID, Excecao: rec.ExceptionType, Mensagem: rec.ExceptionMessage,
				Tentativas: rec.Attempts, Em: Time(rec.Time), ReenviadoEm: rec.ReplayedAt,
			})
		}
		out.Topicos = append(out.Topicos, dt)
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

func (h *dltHandler) replay(w http.ResponseWriter, r *http.Request, _ auth.Principal, a *auth.AuditRecord) {
	q := r.URL.Query()
	topic := q.Get("topico")
	if !slices.Contains(h.topics, topic) {
		httpapi.WriteError(w, r, h.log, &errkind.Error{Kind: errkind.Validation, Detail: "not a dead-letter topic of this service",
			Fields: []errkind.FieldError{{Field: "topico", Message: "must be one of the service's dead-letter topics"}}})
		return
	}
	f := dlt.Filter{Topic: topic}
	switch key := q.Get("chave"); {
	case key != "" && q.Get("offset") == "" && q.Get("particao") == "":
		f.Key = key
	case key == "":
		p, perr := strconv.Atoi(q.Get("particao"))
		o, oerr := strconv.ParseInt(q.Get("offset"), 10, 64)
		if perr != nil || oerr != nil || p < 0 || o < 0 {
			httpapi.WriteError(w, r, h.log, &errkind.Error{Kind: errkind.Validation, Detail: "choose one record (particao and offset) or a key (chave)",
				Fields: []errkind.FieldError{{Field: "offset", Message: "particao and offset must be non-negative integers"}}})
			return
		}
		f.Partitions, f.Offsets = []int{p}, []int64{o}
	default:
		httpapi.WriteError(w, r, h.log, &errkind.Error{Kind: errkind.Validation, Detail: "choose one record (particao and offset) or a key (chave), not both"})
		return
	}
	a.Resource("topic", topic)
	ctx, cancel := httpapi.Detached(r, DLTTimeout)
	defer cancel()
	recs, err := dlt.List(ctx, h.cfg, f)
	if err != nil {
		h.log.WarnContext(r.Context(), "list dead-letter topic", "topic", topic, "err", err)
		httpapi.WriteError(w, r, h.log, errkind.Errorf(errkind.Unavailable, "the dead-letter topic cannot be read now"))
		return
	}
	if len(recs) == 0 {
		httpapi.WriteError(w, r, h.log, errkind.Errorf(errkind.NotFound, "no record of %s matches", topic))
		return
	}
	unverified := q.Get(ParamUnverified) == "true"
	plan, err := dlt.Prepare(ctx, h.cfg, topic, h.mains(), recs)
	if err != nil {
		if errors.Is(err, dlt.ErrRefused) {
			a.Resource("refused", "origin")
			httpapi.WriteError(w, r, h.log, err)
			return
		}
		h.log.WarnContext(r.Context(), "check dead-letter records against their originals", "topic", topic, "err", err)
		httpapi.WriteError(w, r, h.log, errkind.Errorf(errkind.Unavailable, "the records' originals cannot be read now"))
		return
	}
	a.Resource("target", plan.Target)
	a.Resource("unverified", plan.Unverified())
	if plan.Unverified() > 0 && !unverified {
		a.Resource("refused", "unverified")
		httpapi.WriteError(w, r, h.log, errkind.Errorf(errkind.Conflict,
			"replay refused: %d of %d record(s) match no record of %s at the offset their headers name (%s); "+
				"replay them anyway with %s=true (audited)", plan.Unverified(), len(plan.Checks), plan.Target,
			firstProblem(plan), ParamUnverified))
		return
	}
	n, err := dlt.Replay(ctx, h.cfg, nil, plan, dlt.Options{Unverified: unverified})
	a.Resource("replayed", n)
	if err != nil {
		h.log.WarnContext(r.Context(), "replay dead-letter records", "topic", topic, "replayed", n, "err", err)
		httpapi.WriteError(w, r, h.log, &errkind.Error{Kind: errkind.Unavailable,
			Detail: "the broker refused the replay after " + strconv.Itoa(n) + " record(s)"})
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, Replayed{Reenviados: n, Destino: plan.Target, NaoVerificados: plan.Unverified()})
}

// mains are the main topics of the service's DLTs, by the naming rule.
func (h *dltHandler) mains() []string {
	out := make([]string, 0, len(h.topics))
	for _, t := range h.topics {
		if m, ok := events.MainOfDLT(t); ok {
			out = append(out, m)
		}
	}
	return out
}

// firstProblem is why the first unverified record of p is not verified.
func firstProblem(p dlt.Plan) string {
	for _, c := range p.Checks {
		if !c.Verified {
			return c.Problem
		}
	}
	return ""
}
