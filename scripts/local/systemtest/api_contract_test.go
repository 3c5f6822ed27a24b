package systemtest_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
)

func requireStatus(t *testing.T, err error, status int) {
	t.Helper()
	var apiErr *apiclient.APIError
	require.True(t, errors.As(err, &apiErr), "want HTTP %d, got %v", status, err)
	require.Equal(t, status, apiErr.Status, apiErr.Error())
	require.NotEmpty(t, apiErr.Code)
}

func TestAuthAndBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{MaxUploadBytes: 1000})
	ctx := context.Background()
	tok1 := e.Onboard("r1")
	tok2 := e.Onboard("r2")
	api := e.API

	// admin route: none, wrong, a retailer's token, existing retailer, bad id
	_, err := api.CreateRetailer(ctx, "", "x")
	requireStatus(t, err, 401)
	_, err = api.CreateRetailer(ctx, "wrong", "x")
	requireStatus(t, err, 401)
	_, err = api.CreateRetailer(ctx, tok1, "x")
	requireStatus(t, err, 403)
	_, err = api.CreateRetailer(ctx, e.Stack.AdminToken, "r1")
	requireStatus(t, err, 409)
	_, err = api.CreateRetailer(ctx, e.Stack.AdminToken, "bad id!")
	requireStatus(t, err, 400)

	// retailer routes: missing, wrong and other-retailer tokens
	_, err = api.Reserve(ctx, "", "r1", "")
	requireStatus(t, err, 401)
	_, err = api.Reserve(ctx, "rt_wrong", "r1", "")
	requireStatus(t, err, 401)
	_, err = api.Reserve(ctx, tok2, "r1", "")
	requireStatus(t, err, 403)
	_, err = api.Status(ctx, tok2, "r1", 1)
	requireStatus(t, err, 403)
	_, err = api.Reserve(ctx, tok1, "r1", "xml")
	requireStatus(t, err, 400)
	_, err = api.Status(ctx, tok1, "r1", 99)
	requireStatus(t, err, 404)
	err = api.Do(ctx, http.MethodGet, "/v1/retailers/r1/snapshots/abc", tok1, nil, nil)
	requireStatus(t, err, 400)
	err = api.Do(ctx, http.MethodGet, "/v1/retailers/r1/snapshots?limit=0", tok1, nil, nil)
	requireStatus(t, err, 400)
	err = api.Do(ctx, http.MethodGet, "/v1/retailers/r1/snapshots?limit=1001", tok1, nil, nil)
	requireStatus(t, err, 400)
	err = api.Do(ctx, http.MethodGet, "/v1/retailers/"+strings.Repeat("a", 65)+"/snapshots", tok1, nil, nil)
	requireStatus(t, err, 400)

	// an upload over the size limit: 413, and nothing happens
	slot, err := api.Reserve(ctx, tok1, "r1", "csv")
	require.NoError(t, err)
	require.Equal(t, "PUT", slot.Upload.Method)
	requireStatus(t, api.Put(ctx, slot, make([]byte, 2000)), 413)
	require.Equal(t, "awaiting_upload", e.Status("r1", slot.Generation).State)

	// storefront: bad limit, unknown retailer, absent product, ETag
	err = api.Do(ctx, http.MethodGet, "/v1/retailers/r1/products?limit=0", "", nil, nil)
	requireStatus(t, err, 400)
	err = api.Do(ctx, http.MethodGet, "/v1/retailers/nobody/products", "", nil, nil)
	requireStatus(t, err, 404)
	_, err = api.Product(ctx, "r1", "nope")
	requireStatus(t, err, 404)
	err = api.Do(ctx, http.MethodGet, "/v1/nothing", "", nil, nil)
	requireStatus(t, err, 404)
}

func TestStorefrontReads(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{})
	e.Onboard("r1")
	c := fixtures.Generate("p", 250)
	c["a/b c"] = fixtures.Row("slash and space")
	require.Equal(t, "applied", e.Upload("r1", c.CSV(nil)).State)
	ctx := context.Background()

	p, err := e.API.Product(ctx, "r1", "a/b c")
	require.NoError(t, err)
	require.JSONEq(t, `{"title":"slash and space","brand":"","price":"","availability":"","description":""}`, string(p.Attributes))

	// pages: ordered by product_id bytes, next_after null on the last
	var ids []string
	after := ""
	for pages := 0; ; pages++ {
		var page struct {
			Items     []apiclient.Product `json:"items"`
			NextAfter *string             `json:"next_after"`
		}
		path := "/v1/retailers/r1/products?limit=100"
		if after != "" {
			path += "&after=" + after
		}
		require.NoError(t, e.API.Do(ctx, http.MethodGet, path, "", nil, &page))
		for _, it := range page.Items {
			ids = append(ids, it.ProductID)
		}
		if page.NextAfter == nil {
			require.Equal(t, 2, pages)
			break
		}
		after = *page.NextAfter
	}
	require.Equal(t, c.IDs(), ids)

	// ETag and 304
	resp, err := http.Get(e.Stack.APIURL + "/v1/retailers/r1/products/p-00001")
	require.NoError(t, err)
	resp.Body.Close()
	etag := resp.Header.Get("ETag")
	require.NotEmpty(t, etag)
	req, _ := http.NewRequest(http.MethodGet, e.Stack.APIURL+"/v1/retailers/r1/products/p-00001", nil)
	req.Header.Set("If-None-Match", etag)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotModified, resp.StatusCode)

	resp, err = http.Get(e.Stack.APIURL + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
}
