package control

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/retailcatalog/catalog/functions/finance/usage"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/finance/costs"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
)

// UsageSource reads the metered usage of a range of UTC days.
// pgstore.Stores implements it.
type UsageSource interface {
	// Usage returns one record per retailer-day of [from, to].
	Usage(ctx context.Context, from, to time.Time) ([]usage.DayUsage, error)
}

// ReportStore keeps a report too large for an API answer (Lambda answers
// at most 6 MB) and hands out a link to it. s3blob.Store implements it.
type ReportStore interface {
	// Put writes an object.
	Put(ctx context.Context, key string, body []byte) error
	// PresignGet returns a URL that GETs key without credentials until ttl passes.
	PresignGet(ctx context.Context, key string, ttl time.Duration) (string, error)
}

// CostsConfig is what GET /v1/admin/costs needs (DESIGN 10).
type CostsConfig struct {
	Usage  UsageSource
	Pricer costs.Pricer
	// Deployment sizes the shared fixed costs (CATALOG_COST_DEPLOYMENT).
	Deployment costs.Deployment
	// ReadsNote says how exact the metered counters are.
	ReadsNote string
	// Reports, when set, keeps answers over MaxInlineReportBytes under
	// ReportPrefix and the route redirects (303) to a link valid
	// ReportLinkTTL; without it such a report is refused (413).
	Reports ReportStore
	// MaxInlineBytes overrides MaxInlineReportBytes (tests).
	MaxInlineBytes int
}

// Limits of the costs route.
const (
	// MaxInlineReportBytes is the largest report answered directly: API
	// Gateway and Lambda cap an answer at 6 MB (and a report whose escaped
	// body would pass httpapi.MaxLambdaBodyBytes is linked too).
	MaxInlineReportBytes = 5 << 20
	// MaxReportRetailerDays bounds a report's rows (the function's memory).
	MaxReportRetailerDays = 500_000
	// ReportPrefix is where large reports are kept; the bucket expires them
	// after a day.
	ReportPrefix  = "reports/costs/"
	ReportLinkTTL = 15 * time.Minute
)

// costsReport serves GET /v1/admin/costs?from=YYYY-MM-DD&to=YYYY-MM-DD&format=csv|html|json.
func (h *Handler) costsReport(w http.ResponseWriter, r *http.Request) {
	if err := h.authAdmin(r); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	c := h.cfg.Costs
	if c == nil || c.Usage == nil {
		httpapi.WriteJSON(w, http.StatusServiceUnavailable, httpapi.ErrorBody{Error: httpapi.ErrorDetail{
			Code: "costs_not_configured", Message: "this deployment serves no cost reports"}})
		return
	}
	body, contentType, ext, err := h.renderCosts(r)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	limit := MaxInlineReportBytes
	if c.MaxInlineBytes > 0 {
		limit = c.MaxInlineBytes
	}
	if !reportFitsInline(body, limit) {
		h.redirectToStored(w, r, body, ext)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}

// reportFitsInline says whether a report is answered directly: at most
// limit bytes, and within what a Lambda proxy response holds once the body
// is escaped into it (a quote-heavy JSON report grows ~20%).
func reportFitsInline(body []byte, limit int) bool {
	return len(body) <= limit && httpapi.FitsLambdaResponse(body)
}

// renderCosts builds the report the query asks for.
func (h *Handler) renderCosts(r *http.Request) (body []byte, contentType, ext string, err error) {
	c := h.cfg.Costs
	q := r.URL.Query()
	day := func(name string) (time.Time, error) {
		v := q.Get(name)
		if v == "" {
			return time.Time{}, catalog.Errorf(catalog.ErrInvalid, "invalid_date", "%s is required, as YYYY-MM-DD (a UTC day)", name)
		}
		d, err := usage.ParseDay(v)
		if err != nil {
			return time.Time{}, catalog.Errorf(catalog.ErrInvalid, "invalid_date", "%s: %v", name, err)
		}
		return d, nil
	}
	from, err := day("from")
	if err != nil {
		return nil, "", "", err
	}
	to, err := day("to")
	if err != nil {
		return nil, "", "", err
	}
	if to.Before(from) {
		return nil, "", "", catalog.Errorf(catalog.ErrInvalid, "invalid_range", "to (%s) is before from (%s)", q.Get("to"), q.Get("from"))
	}
	if days := int(to.Sub(from)/(24*time.Hour)) + 1; days > costs.MaxReportDays {
		return nil, "", "", catalog.Errorf(catalog.ErrInvalid, "invalid_range", "%d days: at most %d in one report", days, costs.MaxReportDays)
	}
	format := q.Get("format")
	switch format {
	case "":
		format = "json"
	case "csv", "html", "json":
	default:
		return nil, "", "", catalog.Errorf(catalog.ErrInvalid, "invalid_format", "format %q: want csv, html or json", format)
	}
	usage, err := c.Usage.Usage(r.Context(), from, to)
	if err != nil {
		return nil, "", "", err
	}
	if len(usage) > MaxReportRetailerDays {
		return nil, "", "", catalog.Errorf(catalog.ErrTooLarge, "report_too_large",
			"%d retailer-days in %s..%s, over %d: ask for fewer days", len(usage), q.Get("from"), q.Get("to"), MaxReportRetailerDays)
	}
	rep, err := c.Pricer.BuildReport(costs.ReportInput{From: from, To: to, Usage: usage, Deployment: c.Deployment, ReadsNote: c.ReadsNote})
	if err != nil {
		return nil, "", "", catalog.Errorf(catalog.ErrInvalid, "invalid_range", "%v", err)
	}
	var buf bytes.Buffer
	switch format {
	case "csv":
		err, contentType = rep.WriteCSV(&buf), "text/csv; charset=utf-8"
	case "html":
		err, contentType = rep.WriteHTML(&buf), "text/html; charset=utf-8"
	default:
		err, contentType = rep.WriteJSON(&buf), "application/json"
	}
	if err != nil {
		return nil, "", "", fmt.Errorf("costs report: %w", err)
	}
	return buf.Bytes(), contentType, format, nil
}

// redirectToStored keeps a large report in the bucket and answers 303 with
// a link to it (HTTP clients follow it; catalogctl does).
func (h *Handler) redirectToStored(w http.ResponseWriter, r *http.Request, body []byte, ext string) {
	c := h.cfg.Costs
	if c.Reports == nil {
		httpapi.WriteError(w, r, h.log, catalog.Errorf(catalog.ErrTooLarge, "report_too_large",
			"the report has %d bytes, over what an API answer may have: ask for fewer days", len(body)))
		return
	}
	nonce := make([]byte, 8)
	rand.Read(nonce)
	q := r.URL.Query()
	key := fmt.Sprintf("%s%s_%s_%s.%s", ReportPrefix, q.Get("from"), q.Get("to"), hex.EncodeToString(nonce), ext)
	if err := c.Reports.Put(r.Context(), key, body); err != nil {
		httpapi.WriteError(w, r, h.log, fmt.Errorf("keep report: %w", err))
		return
	}
	url, err := c.Reports.PresignGet(r.Context(), key, ReportLinkTTL)
	if err != nil {
		httpapi.WriteError(w, r, h.log, errors.Join(errors.New("link to report"), err))
		return
	}
	w.Header().Set("Location", url)
	w.Header().Set("Cache-Control", "no-store")
	httpapi.WriteJSON(w, http.StatusSeeOther, map[string]string{"url": url, "expires_in": ReportLinkTTL.String()})
}
