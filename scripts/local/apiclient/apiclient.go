// Package apiclient is a small client of the catalog's HTTP API, as a
// retailer, an admin or the storefront would use it: the demo and the
// end-to-end tests speak to the system only through it.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/retailcatalog/catalog/functions/operate/ops"
	"github.com/retailcatalog/catalog/functions/serve/control"
	"github.com/retailcatalog/catalog/functions/serve/read"
	"github.com/retailcatalog/catalog/functions/serve/upload"
)

// Client talks to one API.
type Client struct {
	BaseURL string
	HTTP    *http.Client // API calls
	// Transfer makes the presigned PUTs: no overall timeout, as a 5 GiB
	// upload takes as long as it takes [http.DefaultClient].
	Transfer *http.Client
	// MovingWait bounds how long Do retries a write refused with 429
	// retailer_moving (the few seconds of a move's switch; up to a lease,
	// 60 s, when the move's runner crashed then) after its Retry-After
	// [3m; negative: never retried].
	MovingWait time.Duration
}

// New returns a client of the API at baseURL. Its HTTP client follows the
// API's redirects (303 to a presigned GET of a large answer) without the
// token (withoutCredentialsElsewhere).
func New(baseURL string) *Client {
	return &Client{BaseURL: baseURL, HTTP: &http.Client{Timeout: 60 * time.Second, CheckRedirect: withoutCredentialsElsewhere}}
}

// withoutCredentialsElsewhere is a CheckRedirect that sends no
// Authorization header to any host but the API's (host and port: Go's
// client only compares host names, so locally, where the API and the S3
// stand-in are both on 127.0.0.1, it would forward the token). A
// presigned URL carries its own authentication, and S3 refuses a request
// with both (400 InvalidArgument); the retailer's token is no business of
// the bucket either. At most 10 redirects, as Go's default.
func withoutCredentialsElsewhere(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if req.URL.Host != via[0].URL.Host {
		req.Header.Del("Authorization")
	}
	return nil
}

// APIError is a non-2xx answer.
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("HTTP %d: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Code, e.Message)
}

// newAPIError reads an error answer: the API's {"error": {"code", "message"}},
// API Gateway's own {"message"} (429, 413, 5xx before the function), or
// whatever else came back, cut short.
func newAPIError(status int, body []byte) *APIError {
	var e struct {
		Error   struct{ Code, Message string } `json:"error"`
		Message string                         `json:"message"`
	}
	_ = json.Unmarshal(body, &e)
	out := &APIError{Status: status, Code: e.Error.Code, Message: e.Error.Message}
	if out.Code == "" && out.Message == "" {
		out.Message = e.Message
	}
	if out.Message == "" {
		out.Message = strings.TrimSpace(string(body))
		if len(out.Message) > 300 {
			out.Message = out.Message[:300] + "..."
		}
	}
	return out
}

// Do sends a request with an optional JSON body and bearer token and decodes
// a 2xx JSON answer into out (when not nil). A write refused with 429
// retailer_moving (nothing was done: the retailer is switching shards) is
// sent again after its Retry-After, for up to MovingWait.
func (c *Client) Do(ctx context.Context, method, path, token string, body, out any) error {
	var payload []byte
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		payload = b
	}
	wait := c.MovingWait
	if wait == 0 {
		wait = 3 * time.Minute
	}
	until := time.Now().Add(wait)
	for {
		retryAfter, err := c.do(ctx, method, path, token, payload, body != nil, out)
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.Status != http.StatusTooManyRequests || apiErr.Code != "retailer_moving" ||
			time.Now().Add(retryAfter).After(until) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(retryAfter):
		}
	}
}

// do sends the request once; on an error answer, also how long its
// Retry-After says to wait (5 s when it says nothing).
func (c *Client) do(ctx context.Context, method, path, token string, payload []byte, hasBody bool, out any) (time.Duration, error) {
	var rd io.Reader
	if hasBody {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, rd)
	if err != nil {
		return 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if hasBody {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode/100 != 2 {
		retryAfter := 5 * time.Second
		if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && n >= 0 && n <= 600 {
			retryAfter = time.Duration(n) * time.Second
		}
		return retryAfter, newAPIError(resp.StatusCode, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return 0, fmt.Errorf("decode %s %s: %w", method, path, err)
		}
	}
	return 0, nil
}

// Costs returns the cost report of the UTC days from..to (YYYY-MM-DD) in
// format csv, html or json, as the API sends it (a large report is fetched
// from the link the API redirects to).
func (c *Client) Costs(ctx context.Context, adminToken, from, to, format string) ([]byte, error) {
	q := url.Values{"from": {from}, "to": {to}, "format": {format}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+"/v1/admin/costs?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := c.HTTP.Do(req) // follows a 303 to the stored report, without the token
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, newAPIError(resp.StatusCode, data)
	}
	return data, nil
}

// Retailer is an onboarded retailer.
type Retailer struct {
	RetailerID string `json:"retailer_id"`
	Token      string `json:"token"`
	Shard      int    `json:"shard"`
}

// CreateRetailer onboards a retailer with the admin token.
func (c *Client) CreateRetailer(ctx context.Context, adminToken, id string) (Retailer, error) {
	var r Retailer
	err := c.Do(ctx, http.MethodPost, "/v1/admin/retailers", adminToken, map[string]string{"retailer_id": id}, &r)
	return r, err
}

// RotateToken gives a retailer a new token with its current one (or the
// admin token); the old token stops working at once.
func (c *Client) RotateToken(ctx context.Context, token, retailerID string) (string, error) {
	var out struct {
		Token string `json:"token"`
	}
	err := c.Do(ctx, http.MethodPost, "/v1/retailers/"+retailerID+"/token", token, nil, &out)
	return out.Token, err
}

// RecoverToken gives a retailer that lost its token a new one, with the admin token.
func (c *Client) RecoverToken(ctx context.Context, adminToken, retailerID string) (string, error) {
	var out struct {
		Token string `json:"token"`
	}
	err := c.Do(ctx, http.MethodPost, "/v1/admin/retailers/"+retailerID+"/token", adminToken, nil, &out)
	return out.Token, err
}

// Offboarding is the answer of an offboarding: the generation that removes the catalog.
type Offboarding = control.OffboardResponse

// Offboard offboards a retailer with the admin token.
func (c *Client) Offboard(ctx context.Context, adminToken, retailerID string) (Offboarding, error) {
	var out Offboarding
	err := c.Do(ctx, http.MethodDelete, "/v1/admin/retailers/"+retailerID, adminToken, nil, &out)
	return out, err
}

// Settings are a retailer's hold thresholds in percent.
type Settings = control.Settings

// PutSettings sets a retailer's hold thresholds (nil leaves one as it is).
func (c *Client) PutSettings(ctx context.Context, token, retailerID string, deletePct, updatePct *float64) (Settings, error) {
	var out Settings
	err := c.Do(ctx, http.MethodPut, "/v1/retailers/"+retailerID+"/settings", token,
		Settings{HoldDeletePct: deletePct, HoldUpdatePct: updatePct}, &out)
	return out, err
}

// Slot is a reserved generation with its presigned upload.
type Slot struct {
	RetailerID string `json:"retailer_id"`
	Generation int64  `json:"generation"`
	Upload     struct {
		Method    string            `json:"method"`
		URL       string            `json:"url"`
		Headers   map[string]string `json:"headers"`
		ExpiresAt time.Time         `json:"expires_at"`
	} `json:"upload"`
}

// Reserve reserves the next generation; format may be "".
func (c *Client) Reserve(ctx context.Context, token, retailerID, format string) (Slot, error) {
	var s Slot
	var body any
	if format != "" {
		body = map[string]string{"format": format}
	}
	err := c.Do(ctx, http.MethodPost, "/v1/retailers/"+url.PathEscape(retailerID)+"/snapshots", token, body, &s)
	return s, err
}

// ReserveOptions are what a reservation may ask besides its format
// (DESIGN 13).
type ReserveOptions struct {
	Mode   string // "" or "full": a full snapshot; "delta": a delta upload
	DryRun bool   // a preview: read and diffed, never applied
}

// ReserveWith reserves the next generation with opts; format may be "".
func (c *Client) ReserveWith(ctx context.Context, token, retailerID, format string, opts ReserveOptions) (Slot, error) {
	var s Slot
	body := map[string]any{}
	if format != "" {
		body["format"] = format
	}
	if opts.Mode != "" {
		body["mode"] = opts.Mode
	}
	if opts.DryRun {
		body["dry_run"] = true
	}
	err := c.Do(ctx, http.MethodPost, "/v1/retailers/"+url.PathEscape(retailerID)+"/snapshots", token, body, &s)
	return s, err
}

// ReserveMode reserves the next generation of a mode ("" or "full": a full
// snapshot, "delta": a delta upload, DESIGN 13); format may be "".
func (c *Client) ReserveMode(ctx context.Context, token, retailerID, format, mode string) (Slot, error) {
	return c.ReserveWith(ctx, token, retailerID, format, ReserveOptions{Mode: mode})
}

// ReserveDryRun reserves a dry run (DESIGN 13): a slot whose upload is
// previewed, never applied; format may be "".
func (c *Client) ReserveDryRun(ctx context.Context, token, retailerID, format string) (Slot, error) {
	return c.ReserveWith(ctx, token, retailerID, format, ReserveOptions{DryRun: true})
}

// PlanItem is one product of a plan: its op and the attributes that
// differ, each from and to (JSON; null when absent).
type PlanItem struct {
	ProductID string `json:"product_id"`
	Op        string `json:"op"`
	Fields    map[string]struct {
		From json.RawMessage `json:"from"`
		To   json.RawMessage `json:"to"`
	} `json:"fields"`
}

// PlanPage is a page of a generation's plan.
type PlanPage struct {
	Items     []PlanItem `json:"items"`
	NextAfter *string    `json:"next_after"`
}

// Plan reads a page of a generation's plan: at most limit items (0: the
// route's default) after product id after ("" from the first).
func (c *Client) Plan(ctx context.Context, token, retailerID string, gen int64, after string, limit int) (PlanPage, error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := fmt.Sprintf("/v1/retailers/%s/snapshots/%d/plan", url.PathEscape(retailerID), gen)
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var p PlanPage
	err := c.Do(ctx, http.MethodGet, path, token, nil, &p)
	return p, err
}

// Put uploads data through the slot's presigned request.
func (c *Client) Put(ctx context.Context, s Slot, data []byte) error {
	return c.PutBody(ctx, s, bytes.NewReader(data), int64(len(data)))
}

// PutBody uploads size bytes read from body through the slot's presigned
// request, streaming, with the slot's headers exactly as given. S3 takes a
// PUT only with a known length, so size must be exact. A non-2xx answer is an
// *APIError with S3's error code (PreconditionFailed, EntityTooLarge, ...)
// when its XML names one, else "upload_failed".
func (c *Client) PutBody(ctx context.Context, s Slot, body io.Reader, size int64) error {
	if size == 0 {
		body = http.NoBody // a nil-length body with a reader would be sent chunked
	}
	req, err := http.NewRequestWithContext(ctx, s.Upload.Method, s.Upload.URL, body)
	if err != nil {
		return err
	}
	req.ContentLength = size
	for k, v := range s.Upload.Headers {
		if strings.EqualFold(k, "Host") {
			req.Host = v // net/http sends req.Host, never a Host header
			continue
		}
		req.Header.Set(k, v)
	}
	client := c.Transfer
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode/100 != 2 {
		var e struct{ Code, Message string }
		if xml.Unmarshal(answer, &e) != nil || e.Code == "" {
			e.Code, e.Message = "upload_failed", strings.TrimSpace(string(answer))
		}
		return &APIError{Status: resp.StatusCode, Code: e.Code, Message: e.Message}
	}
	return nil
}

// Upload reserves a generation and uploads data to it.
func (c *Client) Upload(ctx context.Context, token, retailerID, format string, data []byte) (int64, error) {
	s, err := c.Reserve(ctx, token, retailerID, format)
	if err != nil {
		return 0, err
	}
	return s.Generation, c.Put(ctx, s, data)
}

// Status is an upload's status: the upload function's own type.
type Status = upload.Status

// Status reads one upload's status.
func (c *Client) Status(ctx context.Context, token, retailerID string, gen int64) (Status, error) {
	var s Status
	err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/v1/retailers/%s/snapshots/%d", url.PathEscape(retailerID), gen), token, nil, &s)
	return s, err
}

// List lists a retailer's uploads, newest first.
func (c *Client) List(ctx context.Context, token, retailerID string, limit int) ([]Status, error) {
	var out struct {
		Items []Status `json:"items"`
	}
	err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/v1/retailers/%s/snapshots?limit=%d", url.PathEscape(retailerID), limit), token, nil, &out)
	return out.Items, err
}

// Confirm confirms a held upload.
func (c *Client) Confirm(ctx context.Context, token, retailerID string, gen int64) (Status, error) {
	var s Status
	err := c.Do(ctx, http.MethodPost, fmt.Sprintf("/v1/retailers/%s/snapshots/%d/confirm", url.PathEscape(retailerID), gen), token, nil, &s)
	return s, err
}

// Rollback reserves a rollback of the retailer to applied generation to
// and returns its generation's status.
func (c *Client) Rollback(ctx context.Context, token, retailerID string, to int64) (Status, error) {
	var s Status
	err := c.Do(ctx, http.MethodPost, fmt.Sprintf("/v1/retailers/%s/rollback", url.PathEscape(retailerID)), token,
		map[string]any{"to_generation": to}, &s)
	return s, err
}

// Settled reports whether a state is final or waiting for a person.
func Settled(state string) bool {
	switch state {
	case "applied", "superseded", "rejected", "held", "previewed":
		return true
	}
	return false
}

// WaitSettled polls an upload until it is applied, superseded, rejected or held.
func (c *Client) WaitSettled(ctx context.Context, token, retailerID string, gen int64, progress func(Status)) (Status, error) {
	return c.WaitFor(ctx, token, retailerID, gen, func(s Status) bool { return Settled(s.State) }, progress)
}

// WaitApplied polls a confirmed upload until it is applied, superseded or rejected.
func (c *Client) WaitApplied(ctx context.Context, token, retailerID string, gen int64, progress func(Status)) (Status, error) {
	return c.WaitFor(ctx, token, retailerID, gen, func(s Status) bool { return Settled(s.State) && s.State != "held" }, progress)
}

// WaitFor polls an upload until done says so, calling progress on every change.
func (c *Client) WaitFor(ctx context.Context, token, retailerID string, gen int64, done func(Status) bool, progress func(Status)) (Status, error) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := ""
	for {
		s, err := c.Status(ctx, token, retailerID, gen)
		if err != nil {
			return s, err
		}
		if progress != nil && fmt.Sprint(s.State, s.Chunks) != last {
			last = fmt.Sprint(s.State, s.Chunks)
			progress(s)
		}
		if done(s) {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return s, fmt.Errorf("generation %d of %s still %s: %w", gen, retailerID, s.State, ctx.Err())
		case <-tick.C:
		}
	}
}

// Product is a product as the storefront sees it: the read function's own type.
type Product = read.Product

// Product reads one product.
func (c *Client) Product(ctx context.Context, retailerID, productID string) (Product, error) {
	var p Product
	err := c.Do(ctx, http.MethodGet, "/v1/retailers/"+retailerID+"/products/"+url.PathEscape(productID), "", nil, &p)
	return p, err
}

// Catalog reads every product of a retailer, page by page.
func (c *Client) Catalog(ctx context.Context, retailerID string) ([]Product, error) {
	var all []Product
	after := ""
	for {
		var page struct {
			Items     []Product `json:"items"`
			NextAfter *string   `json:"next_after"`
		}
		path := "/v1/retailers/" + retailerID + "/products?limit=1000"
		if after != "" {
			path += "&after=" + url.QueryEscape(after)
		}
		if err := c.Do(ctx, http.MethodGet, path, "", nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Items...)
		if page.NextAfter == nil {
			return all, nil
		}
		after = *page.NextAfter
	}
}

// Why asks why a retailer's catalog (with productID, that product) does not
// show what is expected (GET /v1/admin/retailers/{id}/why).
func (c *Client) Why(ctx context.Context, adminToken, retailerID, productID string) (ops.Why, error) {
	path := "/v1/admin/retailers/" + url.PathEscape(retailerID) + "/why"
	if productID != "" {
		path += "?product_id=" + url.QueryEscape(productID)
	}
	var out ops.Why
	err := c.Do(ctx, http.MethodGet, path, adminToken, nil, &out)
	return out, err
}

// Reconcile starts a reconciliation of one retailer ("" for every one) and
// returns its run id (POST /v1/admin/reconcile).
func (c *Client) Reconcile(ctx context.Context, adminToken, retailerID string, repair bool) (string, error) {
	body := map[string]any{"repair": repair}
	if retailerID != "" {
		body["retailer_id"] = retailerID
	}
	var out struct {
		RunID string `json:"run_id"`
	}
	err := c.Do(ctx, http.MethodPost, "/v1/admin/reconcile", adminToken, body, &out)
	return out.RunID, err
}

// ReconcileReport reads a reconciliation run (GET /v1/admin/reconcile/{run_id}).
func (c *Client) ReconcileReport(ctx context.Context, adminToken, runID string) (ops.ReconcileRunReport, error) {
	var out ops.ReconcileRunReport
	err := c.Do(ctx, http.MethodGet, "/v1/admin/reconcile/"+url.PathEscape(runID), adminToken, nil, &out)
	return out, err
}

// WaitReconciled polls a run until it is done (or ctx ends).
func (c *Client) WaitReconciled(ctx context.Context, adminToken, runID string) (ops.ReconcileRunReport, error) {
	for {
		rep, err := c.ReconcileReport(ctx, adminToken, runID)
		if err != nil || rep.State == "done" {
			return rep, err
		}
		select {
		case <-ctx.Done():
			return rep, fmt.Errorf("reconciliation %s not done: %w", runID, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
