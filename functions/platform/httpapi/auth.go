package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/finance/metering"
)

// Bearer is the request's bearer token ("" when none).
func Bearer(r *http.Request) string {
	v := r.Header.Get("Authorization")
	if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		return strings.TrimSpace(v[7:])
	}
	return ""
}

// HashToken is how a retailer token is stored and looked up.
func HashToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// IsAdmin reports whether token is the admin token (in constant time).
func IsAdmin(token, adminToken string) bool {
	return adminToken != "" && subtle.ConstantTimeCompare([]byte(token), []byte(adminToken)) == 1
}

// TokenOwner finds the retailer whose token has a hash ("" when none).
type TokenOwner func(ctx context.Context, hash []byte) (string, error)

// AuthAdmin checks an admin route's token: none or a wrong token 401, a
// retailer's token 403.
func AuthAdmin(r *http.Request, adminToken string, owner TokenOwner) error {
	token := Bearer(r)
	if token == "" {
		return catalog.Errorf(catalog.ErrUnauthorized, "missing_token", "an Authorization: Bearer token is required")
	}
	if IsAdmin(token, adminToken) {
		return nil
	}
	id, err := owner(r.Context(), HashToken(token))
	if err != nil {
		return err
	}
	if id != "" {
		return catalog.Errorf(catalog.ErrForbidden, "forbidden", "this route needs the admin token")
	}
	return catalog.Errorf(catalog.ErrUnauthorized, "invalid_token", "the token is not valid")
}

// AuthRetailer checks a retailer route: the path's retailer_id is valid
// and the token is that retailer's (or the admin's). A bad id 400, none or
// a wrong token 401, another retailer's token 403. It returns the id.
func AuthRetailer(r *http.Request, adminToken string, owner TokenOwner) (string, error) {
	id := r.PathValue("retailer_id")
	if err := catalog.ValidateRetailerID(id); err != nil {
		return "", err
	}
	token := Bearer(r)
	if token == "" {
		return "", catalog.Errorf(catalog.ErrUnauthorized, "missing_token", "an Authorization: Bearer token is required")
	}
	if IsAdmin(token, adminToken) {
		return id, nil
	}
	got, err := owner(r.Context(), HashToken(token))
	if err != nil {
		return "", err
	}
	if got == "" {
		return "", catalog.Errorf(catalog.ErrUnauthorized, "invalid_token", "the token is not valid")
	}
	if got != id {
		return "", catalog.Errorf(catalog.ErrForbidden, "forbidden", "this token belongs to another retailer")
	}
	return id, nil
}

// RetailerStore finds retailers: by token hash, and by id.
type RetailerStore interface {
	// RetailerByTokenHash returns the retailer whose token has this hash, or "" when none.
	RetailerByTokenHash(ctx context.Context, hash []byte) (string, error)
	// Retailer returns a registered retailer; catalog.ErrNotFound when unknown.
	Retailer(ctx context.Context, retailerID string) (catalog.Retailer, error)
}

// Retailer is AuthRetailer, then the retailer it names, counted as an API
// request of that retailer (metering, DESIGN 10).
func Retailer(r *http.Request, adminToken string, store RetailerStore) (catalog.Retailer, error) {
	id, err := AuthRetailer(r, adminToken, store.RetailerByTokenHash)
	if err != nil {
		return catalog.Retailer{}, err
	}
	ret, err := store.Retailer(r.Context(), id)
	if err == nil {
		metering.For(r.Context(), id)
	}
	return ret, err
}
