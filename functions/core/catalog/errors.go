package catalog

import (
	"errors"
	"fmt"
	"time"
)

// Kinds of domain error. Handlers map each kind to one HTTP status in one table.
var (
	ErrInvalid      = errors.New("invalid")      // malformed or out-of-range input
	ErrUnauthorized = errors.New("unauthorized") // missing or wrong token
	ErrForbidden    = errors.New("forbidden")    // valid token without the right
	ErrNotFound     = errors.New("not found")    // no such retailer, generation or product
	ErrConflict     = errors.New("conflict")     // exists already, or not in the required state
	ErrTooLarge     = errors.New("too large")    // over a size limit
	ErrRateLimited  = errors.New("rate limited") // over a per-retailer rate limit
)

// Error is a domain error with a stable snake_case code and a message for people.
type Error struct {
	Kind    error
	Code    string
	Message string
	// RetryAfter, for ErrRateLimited, is when the request may succeed again.
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Message }

// Unwrap lets errors.Is match the kind.
func (e *Error) Unwrap() error { return e.Kind }

// Errorf builds a domain error of a kind.
func Errorf(kind error, code, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}

// ValidateRetailerID checks the contract's retailer_id pattern [A-Za-z0-9_-]{1,64}
// (by hand: it runs on every storefront request).
func ValidateRetailerID(id string) error {
	ok := len(id) >= 1 && len(id) <= 64
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
	}
	if !ok {
		return Errorf(ErrInvalid, "invalid_retailer_id", "retailer_id %q must match [A-Za-z0-9_-]{1,64}", id)
	}
	return nil
}

// Codes of a generation rejected because its pinned upload can no longer be
// read: the object was replaced by another version, or is gone.
const (
	CodeUploadChanged = "upload_changed"
	CodeUploadMissing = "upload_missing"
	// CodeUploadExpired: the upload arrived after its slot expired.
	CodeUploadExpired = "upload_expired"
)

// UploadCodes lists the codes of an upload that can no longer be read.
var UploadCodes = []string{CodeUploadChanged, CodeUploadMissing, CodeUploadExpired}

// Codes of a generation that could not be finished (I10): it ends rejected
// with one of them, and what it wrote is undone (Undo).
const (
	// CodeDiffFailed: the diff failed on every attempt, or ran past its
	// time budget on the last one.
	CodeDiffFailed = "diff_failed"
	// CodeApplyFailed: the database refused one of the generation's chunks
	// on every try, or its chunks made no progress through every re-drive.
	CodeApplyFailed = "apply_failed"
)

// FailureCodes lists the codes of a generation that could not be finished.
var FailureCodes = []string{CodeDiffFailed, CodeApplyFailed}

// TooManyReservations is the error of a reservation over a retailer's
// hourly limit; a slot frees after retryAfter.
func TooManyReservations(retailerID string, perHour int, retryAfter time.Duration) *Error {
	e := Errorf(ErrRateLimited, "too_many_reservations",
		"retailer %q has reserved %d generations in the last hour, the limit; the next reservation is possible in %s",
		retailerID, perHour, retryAfter.Round(time.Second))
	e.RetryAfter = retryAfter
	return e
}

// Offboarded is the error of a request about an offboarded retailer that
// would change something.
func Offboarded(retailerID string) *Error {
	return Errorf(ErrConflict, "retailer_offboarded", "retailer %q is offboarded", retailerID)
}

// NotApplied is the refusal of a rollback to a generation that was never
// applied (DESIGN 13).
func NotApplied(retailerID string, gen int64) *Error {
	return Errorf(ErrNotFound, "generation_not_applied",
		"generation %d of %s was never applied: only an applied generation can be rolled back to", gen, retailerID)
}
