// Package webhooks is the webhooks consumer (DESIGN 8): for each
// catalog.snapshot.* event of a retailer with a webhook, it POSTs the event
// to the webhook's URL, signed with the retailer's secret. A delivery that
// fails (no 2xx within 10 s, or a URL that breaks the rules now) is retried
// with exponential backoff for at least 24 h (CATALOG_BACKOFF_BASE doubling
// to 15 min; the queue's redrive count covers the schedule), then parked in
// the dead-letter queue.
//
// No database transaction is open while a delivery is made (I12), so a
// slow receiver holds no database connection: the consumer reads whether
// the event was delivered (the consumers' version state, keyed by event
// id; a read, no lock), POSTs, and on a 2xx records the event as
// delivered (one statement; a record that finds it recorded is fine). A
// duplicate or a replay of a delivered event sends nothing. Delivery is at
// least once: two deliveries of one event at once may both POST, and a
// record that fails after the POST makes the retry POST again; receivers
// deduplicate by X-Catalog-Event-Id (docs/RETAILERS.md).
//
// A slow receiver does not hold the consumer either: a retailer whose
// receiver answered in over 2 s, or not at all, is paced (pacing.go) so
// that its events do not hold batch after batch for the timeout.
//
// The consumer signs; a Poster makes the POST: in process locally, and on
// AWS the webhook-sender function (functions/publish/webhooksend), which runs
// outside the VPC, so that no delivery can reach into it whatever a URL
// resolves to, and no NAT gateway is needed. The consumer itself stays in
// the VPC, next to the databases. The secret never leaves it.
package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/platform/retry"
	"github.com/retailcatalog/catalog/functions/publish/webhook"
)

// Consumer names the webhooks consumer's version state.
const Consumer = "webhooks"

// Store is what the consumer asks of the databases. pgstore.Stores
// implements it.
type Store interface {
	// Webhook returns a retailer's webhook; catalog.ErrNotFound when it has none.
	Webhook(ctx context.Context, retailerID string) (catalog.Webhook, error)
	// NewerVersions reports, for keys of a retailer, whether each
	// generation is higher than the one recorded (none recorded: it is).
	// It only reads. The consumer's keys are event ids, so an event is
	// newer until its delivery is recorded.
	NewerVersions(ctx context.Context, consumer, retailerID string, keys []string, generations []int64) ([]bool, error)
	// RecordVersions records each generation where it is higher than the
	// one recorded, and leaves the others (recording twice is fine).
	RecordVersions(ctx context.Context, consumer, retailerID string, keys []string, generations []int64) error
}

// Poster sends a signed delivery and says how it went: webhook.Sender in
// process (the local stack), or the webhook-sender function on AWS, which
// runs outside the VPC (lambdainvoke.Poster). An error means the delivery
// could not be attempted; a failed attempt is a Result with Error set.
type Poster interface {
	Post(ctx context.Context, d webhook.Delivery) (webhook.Result, error)
}

// Config is what the webhooks function is told at start.
type Config struct {
	QueueURL string         // its queue, whose messages' visibility a retry changes
	Retry    retry.Schedule // the delays between deliveries of a failed event
	Policy   webhook.Policy // which URLs may be called
	Secrets  *webhook.SecretBox
	// Client sends the POSTs of the default Poster [Policy.Client()].
	Client *http.Client
	// Timeout is how long a receiver has to answer [webhook.Timeout, 10 s].
	Timeout time.Duration
	// Poster makes the deliveries [a webhook.Sender with Policy, Client
	// and Timeout].
	Poster Poster
	// SlowAnswer is how long a receiver may take to answer before its
	// retailer is paced [DefaultSlowAnswer, 2 s]: see pacing.
	SlowAnswer time.Duration
	// Now is the clock of the pacing [time.Now].
	Now func() time.Time
}

// SenderPoster is a webhook.Sender as a Poster: the deliveries are made in
// process, on URLs the consumer has checked already.
type SenderPoster webhook.Sender

// Post makes the delivery.
func (p SenderPoster) Post(ctx context.Context, d webhook.Delivery) (webhook.Result, error) {
	return webhook.Sender(p).Post(ctx, d), nil
}

// Handler delivers lifecycle events to webhooks.
type Handler struct {
	cfg   Config
	store Store
	queue retry.Visibility
	log   *slog.Logger
	pace  *pacing
	// Metrics counts deliveries and failed attempts (WebhookDeliveries,
	// WebhookFailures by Reason: status, no_answer, url_refused; nil: none).
	Metrics *metrics.Recorder
}

// New builds the handler.
func New(cfg Config, store Store, queue retry.Visibility, log *slog.Logger) *Handler {
	if cfg.Poster == nil {
		cfg.Poster = SenderPoster{Policy: cfg.Policy, Client: cfg.Client, Timeout: cfg.Timeout}
	}
	if cfg.SlowAnswer <= 0 {
		cfg.SlowAnswer = DefaultSlowAnswer
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Handler{cfg: cfg, store: store, queue: queue, log: log, pace: newPacing(cfg.Retry, cfg.SlowAnswer, cfg.Now)}
}

// HandleSQS is the Lambda entry: the batch's events are delivered at once;
// each that fails is retried later.
func (h *Handler) HandleSQS(ctx context.Context, ev lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error) {
	failures := retry.Failures{Schedule: h.cfg.Retry, Queue: h.queue, QueueURL: h.cfg.QueueURL, Log: h.log}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, msg := range ev.Records {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := h.deliver(ctx, msg); err != nil {
				var wait deferred
				errors.As(err, &wait)
				mu.Lock()
				failures.FailAfter(ctx, msg, err, wait.wait)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return failures.Response(), nil
}

// deliver delivers one message's event, unless it was delivered before or
// its retailer has no webhook.
func (h *Handler) deliver(ctx context.Context, msg lambdaevents.SQSMessage) error {
	var env message.Envelope
	if err := json.Unmarshal([]byte(msg.Body), &env); err != nil {
		return fmt.Errorf("message %s is not a change event: %w", msg.MessageId, err)
	}
	if !strings.HasPrefix(env.Type, message.SnapshotTypePrefix) {
		return nil // the subscription filters these out
	}
	if err := env.Validate(); err != nil {
		return err
	}
	log := h.log.With("retailer_id", env.RetailerID, "generation", env.Generation, "event_id", env.ID)
	hook, err := h.store.Webhook(ctx, env.RetailerID)
	if errors.Is(err, catalog.ErrNotFound) {
		log.DebugContext(ctx, "no webhook; event not delivered")
		return nil
	}
	if err != nil {
		return err
	}
	secret, err := h.cfg.Secrets.Open(env.RetailerID, hook.SecretSealed)
	if err != nil {
		return err
	}
	// Delivered before? A read: no transaction stays open while the
	// receiver takes its time.
	keys, gens := []string{env.ID}, []int64{env.Generation}
	newer, err := h.store.NewerVersions(ctx, Consumer, env.RetailerID, keys, gens)
	if err != nil {
		return fmt.Errorf("deliver %s: %w", env.ID, err)
	}
	if !newer[0] {
		log.InfoContext(ctx, "event delivered before; not sent again")
		return nil
	}
	attempt := retry.ReceiveCount(msg)
	// The URL is checked here: a refused one is not even handed on (the
	// webhook-sender function checks it again; in process it is not).
	start := time.Now()
	fields := metrics.Fields{RetailerID: env.RetailerID, Generation: env.Generation}
	res, refused := h.cfg.Policy.Refusal(ctx, hook.URL)
	if !refused {
		if ok, wait := h.pace.begin(env.RetailerID); !ok {
			log.InfoContext(ctx, "receiver slow; delivery deferred", "url", hook.URL, "attempt", attempt, "wait_s", int(wait.Seconds()))
			return deferred{retailerID: env.RetailerID, wait: wait}
		}
		body := []byte(msg.Body)
		if res, err = h.cfg.Poster.Post(ctx, webhook.Delivery{URL: hook.URL, EventID: env.ID,
			Signature: webhook.Sign(secret, body), Body: body}); err != nil {
			h.pace.abort(env.RetailerID)
			return fmt.Errorf("deliver %s: %w", env.ID, err)
		}
		h.pace.end(env.RetailerID, res.Status > 0, time.Since(start))
	}
	if !res.Delivered() {
		log.WarnContext(ctx, "webhook delivery failed", "url", hook.URL, "attempt", attempt, "status", res.Status,
			"elapsed_ms", time.Since(start).Milliseconds(), "err", res.Error)
		h.Metrics.Emit(ctx, fields, metrics.Count(metrics.WebhookFailures, 1).By("Reason", failureReason(res)))
		return errors.New(res.Error)
	}
	log.InfoContext(ctx, "webhook delivered", "url", hook.URL, "attempt", attempt, "status", res.Status,
		"elapsed_ms", time.Since(start).Milliseconds())
	h.Metrics.Emit(ctx, fields, metrics.Count(metrics.WebhookDeliveries, 1))
	if err := h.store.RecordVersions(ctx, Consumer, env.RetailerID, keys, gens); err != nil {
		// Delivered, not recorded: the retry delivers it again (at least
		// once; the receiver deduplicates by event id).
		return fmt.Errorf("record delivery of %s: %w", env.ID, err)
	}
	return nil
}

// failureReason names a failed attempt for the metric: its URL was refused
// before the POST (or the address it reached), the receiver answered with
// a status that is not 2xx, or it did not answer (or could not be reached).
func failureReason(r webhook.Result) string {
	switch {
	case r.Refused:
		return "url_refused"
	case r.Status > 0:
		return "status"
	default:
		return "no_answer"
	}
}
