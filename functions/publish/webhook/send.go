package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Delivery is one POST of an event to a webhook, signed already: what the
// webhooks consumer hands to whatever sends it (a Sender in process, or the
// webhook-sender function on AWS, which runs outside the VPC). It carries
// the signature, never the secret.
type Delivery struct {
	URL       string `json:"url"`
	EventID   string `json:"event_id"`
	Signature string `json:"signature"` // X-Catalog-Signature: sha256=<hex>
	Body      []byte `json:"body"`      // the event as published, byte for byte
}

// Result is how a delivery went.
type Result struct {
	// Status is the receiver's HTTP status; 0 when it did not answer (or
	// was not called).
	Status int `json:"status"`
	// Refused: the URL breaks the rules now (CheckURL, or the address the
	// connection reached): the receiver was not called.
	Refused bool `json:"refused,omitempty"`
	// Error says why the delivery failed; "" when the receiver answered
	// 2xx in time.
	Error string `json:"error,omitempty"`
}

// Delivered reports whether the receiver took the event.
func (r Result) Delivered() bool { return r.Error == "" }

// Sender POSTs deliveries under a Policy: Send checks the URL first; the
// client checks each connection's address, follows no redirect and waits
// at most Timeout for the whole exchange; anything but a 2xx is a failure.
type Sender struct {
	Policy Policy
	// Client sends the POSTs [Policy.Client()].
	Client *http.Client
	// Timeout is how long a receiver has to answer [Timeout, 10 s].
	Timeout time.Duration
}

// Refusal is the Result of a delivery to rawURL when the Policy refuses
// the URL now (refused); the receiver is not to be called.
func (p Policy) Refusal(ctx context.Context, rawURL string) (res Result, refused bool) {
	if _, err := p.CheckURL(ctx, rawURL); err != nil {
		return Result{Refused: true, Error: "the webhook URL is refused now: " + err.Error()}, true
	}
	return Result{}, false
}

// Send makes one delivery, its URL checked first (Refusal).
func (s Sender) Send(ctx context.Context, d Delivery) Result {
	if res, refused := s.Policy.Refusal(ctx, d.URL); refused {
		return res
	}
	return s.Post(ctx, d)
}

// Post makes one delivery whose URL the caller has checked (Send,
// Refusal); the address each connection reaches is still checked.
func (s Sender) Post(ctx context.Context, d Delivery) Result {
	client, timeout := s.Client, s.Timeout
	if client == nil {
		client = s.Policy.Client()
	}
	if timeout <= 0 {
		timeout = Timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(d.Body))
	if err != nil {
		return Result{Refused: true, Error: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "catalog-webhooks/1")
	req.Header.Set(HeaderEventID, d.EventID)
	req.Header.Set(HeaderSignature, d.Signature)
	resp, err := client.Do(req)
	if err != nil {
		return Result{Refused: errors.Is(err, errRefusedAddress), Error: fmt.Sprintf("post to webhook: %v", err)}
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Result{Status: resp.StatusCode, Error: "webhook answered " + resp.Status}
	}
	return Result{Status: resp.StatusCode}
}
