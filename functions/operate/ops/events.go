package ops

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
)

// RedriveBudget bounds one redrive request, well inside API Gateway's 30 s:
// what is left is moved by the next request (catalogctl dlq redrive asks
// until the queue is empty).
const RedriveBudget = 20 * time.Second

// redriveStep is how many messages one Redriver call moves: the budget is
// checked between steps.
const redriveStep = 100

// maxRedrive is the most messages one redrive request may ask for.
const maxRedrive = 100000

// namedQueue is a work queue and its dead-letter queue, by the name
// operators use (catalogctl dlq list|redrive <queue>).
type namedQueue struct {
	Name, URL, DLQURL string
}

// named lists the queues that have a dead-letter queue, by name.
func (q Queues) named() []namedQueue {
	var out []namedQueue
	for _, n := range []namedQueue{
		{"arrivals", q.Arrivals, q.ArrivalsDLQ}, {"diff-jobs", q.DiffJobs, q.DiffJobsDLQ},
		{"apply-small", q.ApplySmall, q.ApplySmallDLQ}, {"apply-large", q.ApplyLarge, q.ApplyLargeDLQ},
		{"analytics", q.Analytics, q.AnalyticsDLQ}, {"webhooks", q.Webhooks, q.WebhooksDLQ},
		{"reconcile-jobs", q.Reconcile, q.ReconcileDLQ},
	} {
		if n.DLQURL != "" {
			out = append(out, n)
		}
	}
	return out
}

func (h *Handler) queueNamed(name string) (namedQueue, error) {
	var names []string
	for _, q := range h.cfg.Queues.named() {
		if q.Name == name {
			return q, nil
		}
		names = append(names, q.Name)
	}
	return namedQueue{}, catalog.Errorf(catalog.ErrNotFound, "queue_not_found", "no queue %q; the queues are %s", name, strings.Join(names, ", "))
}

// DeadLetterQueueJSON is a queue's dead-letter queue and how many messages it holds.
type DeadLetterQueueJSON struct {
	Queue string `json:"queue"` // the work queue, by the name catalogctl takes
	DLQ   string `json:"dlq"`   // its dead-letter queue's name
	Depth int    `json:"depth"` // approximate
}

// DeadLetterQueuesJSON is the answer of GET /v1/admin/dlq.
type DeadLetterQueuesJSON struct {
	Queues []DeadLetterQueueJSON `json:"queues"`
}

// DeadLettersJSON is the answer of GET /v1/admin/dlq/{queue}.
type DeadLettersJSON struct {
	DeadLetterQueueJSON
	Messages []DeadLetterJSON `json:"messages"` // oldest first
}

// dlqQueues lists every queue's dead-letter queue and how many messages it holds.
func (h *Handler) dlqQueues(w http.ResponseWriter, r *http.Request) {
	if err := h.authAdmin(r); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	out := DeadLetterQueuesJSON{Queues: []DeadLetterQueueJSON{}}
	for _, q := range h.cfg.Queues.named() {
		d := DeadLetterQueueJSON{Queue: q.Name, DLQ: path.Base(q.DLQURL)}
		if h.inspector != nil {
			n, err := h.inspector.Depth(r.Context(), q.DLQURL)
			if err != nil {
				httpapi.WriteError(w, r, h.log, fmt.Errorf("depth of %s: %w", d.DLQ, err))
				return
			}
			d.Depth = n
		}
		out.Queues = append(out.Queues, d)
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// DeadLetterJSON is one message of a dead-letter queue as dlq list shows it.
type DeadLetterJSON struct {
	ID       string          `json:"id"`
	SentAt   *time.Time      `json:"sent_at"`
	Receives int             `json:"receives"`
	GroupID  string          `json:"group_id,omitempty"`
	Body     json.RawMessage `json:"body"` // the message, JSON (a string when it is not JSON)
}

// dlqList shows up to ?limit= (1-100, default 20) messages of a queue's
// dead-letter queue without consuming them.
func (h *Handler) dlqList(w http.ResponseWriter, r *http.Request) {
	if err := h.authAdmin(r); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	q, err := h.queueNamed(r.PathValue("queue"))
	limit := 20
	if err == nil {
		limit, err = limitParam(r, 20, 100)
	}
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	if h.inspector == nil {
		dlqNotConfigured(w, "this deployment reads no queues")
		return
	}
	depth, err := h.inspector.Depth(r.Context(), q.DLQURL)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	peeked, err := h.inspector.Peek(r.Context(), q.DLQURL, limit)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	out := DeadLettersJSON{DeadLetterQueueJSON{Queue: q.Name, DLQ: path.Base(q.DLQURL), Depth: depth}, []DeadLetterJSON{}}
	for _, m := range peeked {
		d := DeadLetterJSON{ID: m.ID, Receives: m.Receives, GroupID: m.GroupID, Body: json.RawMessage(m.Body)}
		if !m.SentAt.IsZero() {
			t := m.SentAt.UTC()
			d.SentAt = &t
		}
		if !json.Valid([]byte(m.Body)) {
			d.Body, _ = json.Marshal(m.Body)
		}
		out.Messages = append(out.Messages, d)
	}
	// Oldest first (a message without a send time last).
	slices.SortStableFunc(out.Messages, func(a, b DeadLetterJSON) int {
		switch {
		case a.SentAt == nil || b.SentAt == nil:
			return cmp.Compare(boolInt(a.SentAt == nil), boolInt(b.SentAt == nil))
		default:
			return a.SentAt.Compare(*b.SentAt)
		}
	})
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// RedriveResponse is the answer of POST /v1/admin/dlq/{queue}/redrive.
type RedriveResponse struct {
	Queue string `json:"queue"`
	Moved int    `json:"moved"` // messages moved back to the queue by this request
	Left  int    `json:"left"`  // messages the dead-letter queue holds now (approximate; -1 unknown)
}

// dlqRedrive moves a queue's dead letters back to it: every one, or up to
// {"limit": N}, for at most RedriveBudget (the answer says how many are
// left). Safe to run any number of times: every consumer is idempotent.
func (h *Handler) dlqRedrive(w http.ResponseWriter, r *http.Request) {
	if err := h.authAdmin(r); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	q, err := h.queueNamed(r.PathValue("queue"))
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	var req struct {
		Limit *int `json:"limit"`
	}
	if err := httpapi.DecodeJSON(r, 1<<10, &req); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	limit, err := redriveLimit(req.Limit)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	if h.Redriver == nil || q.URL == "" {
		dlqNotConfigured(w, "this deployment cannot move messages back to "+q.Name)
		return
	}
	deadline := h.cfg.Now().Add(RedriveBudget)
	moved := 0
	for moved < limit && h.cfg.Now().Before(deadline) {
		n, err := h.Redriver.Redrive(r.Context(), q.DLQURL, q.URL, min(redriveStep, limit-moved))
		moved += n
		if err != nil {
			httpapi.WriteError(w, r, h.log, fmt.Errorf("re-drive %s (%d moved): %w", q.Name, moved, err))
			return
		}
		if n == 0 {
			break
		}
	}
	left := 0
	if h.inspector != nil {
		if left, err = h.inspector.Depth(r.Context(), q.DLQURL); err != nil {
			left = -1
		}
	}
	h.log.InfoContext(r.Context(), "dead letters re-driven", "queue", q.Name, "moved", moved, "left", left)
	httpapi.WriteJSON(w, http.StatusOK, RedriveResponse{Queue: q.Name, Moved: moved, Left: left})
}

// ReplayResponse is the answer of POST /v1/admin/retailers/{id}/replay.
type ReplayResponse struct {
	RetailerID string    `json:"retailer_id"`
	Since      time.Time `json:"since"`
	Changes    int       `json:"changes"`   // chunks whose change events are published again
	Lifecycle  int       `json:"lifecycle"` // generations whose lifecycle event is
}

// replay writes a retailer's change events since {"since": RFC 3339} back
// into its outbox, under their original ids: the relay publishes them
// within a minute, and consumers ignore what they have already seen.
func (h *Handler) replay(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("retailer_id")
	if err := catalog.ValidateRetailerID(id); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	if err := h.authAdmin(r); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	var req struct {
		Since string `json:"since"`
	}
	if err := httpapi.DecodeJSON(r, 1<<10, &req); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	since, err := time.Parse(time.RFC3339Nano, req.Since)
	if err != nil {
		httpapi.WriteError(w, r, h.log, catalog.Errorf(catalog.ErrInvalid, "invalid_since", `"since" %q must be an RFC 3339 time, like 2026-11-30T00:00:00Z`, req.Since))
		return
	}
	if _, err := h.store.Retailer(r.Context(), id); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	changes, lifecycle, err := h.store.Replay(r.Context(), id, since)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	h.log.InfoContext(r.Context(), "events replayed into the outbox", "retailer_id", id, "since", since, "changes", changes, "lifecycle", lifecycle)
	httpapi.WriteJSON(w, http.StatusAccepted, ReplayResponse{RetailerID: id, Since: since.UTC(), Changes: changes, Lifecycle: lifecycle})
}

// dlqNotConfigured answers 503: the deployment lacks the queues (or the
// redriver) a dead-letter route needs.
func dlqNotConfigured(w http.ResponseWriter, message string) {
	httpapi.WriteJSON(w, http.StatusServiceUnavailable, httpapi.ErrorBody{Error: httpapi.ErrorDetail{
		Code: "dlq_not_configured", Message: message}})
}

func limitParam(r *http.Request, def, maxLimit int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxLimit {
		return 0, catalog.Errorf(catalog.ErrInvalid, "invalid_limit", "limit %q must be an integer from 1 to %d", v, maxLimit)
	}
	return n, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// redriveLimit is a redrive's {"limit"}: maxRedrive when not given, else a
// number from 1 to maxRedrive (invalid_limit otherwise).
func redriveLimit(given *int) (int, error) {
	if given == nil {
		return maxRedrive, nil
	}
	if *given < 1 || *given > maxRedrive {
		return 0, catalog.Errorf(catalog.ErrInvalid, "invalid_limit", "limit %d must be from 1 to %d", *given, maxRedrive)
	}
	return *given, nil
}
