package systemtest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/s3server"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// uniformCSV is a CSV snapshot of n products p-0000000... whose price is
// value in every row (so that which file a row came from shows), written
// straight to bytes: large files cost no maps.
func uniformCSV(n int, price string) []byte {
	var b bytes.Buffer
	b.Grow(n * 48)
	b.WriteString("product_id,title,price\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "p-%07d,Product %d,%s\n", i, i, price)
	}
	return b.Bytes()
}

// livePrices counts a retailer's live rows by their price attribute, in the database.
func (e *env) livePrices(retailer string) map[string]int {
	e.T.Helper()
	rows, err := e.Stack.Stores.Shards[e.ShardOf(retailer)].Pool().Query(context.Background(),
		`SELECT attributes->>'price', count(*) FROM products WHERE retailer_id = $1 AND NOT deleted GROUP BY 1`, retailer)
	require.NoError(e.T, err)
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var price string
		var n int
		require.NoError(e.T, rows.Scan(&price, &n))
		out[price] = n
	}
	require.NoError(e.T, rows.Err())
	return out
}

// replaceUpload overwrites an upload behind the API's back, with the
// stack's own S3 credentials and no precondition, as the single-use URL
// cannot: the object-created event announces the new version.
func (e *env) replaceUpload(retailer string, gen int64, data []byte) {
	e.T.Helper()
	require.NoError(e.T, e.Stack.Blobs.Put(context.Background(), keys.Upload(retailer, gen), data))
}

func requireHTTPStatus(t *testing.T, err error, status int) {
	t.Helper()
	var apiErr *apiclient.APIError
	require.True(t, errors.As(err, &apiErr), "want HTTP %d, got %v", status, err)
	require.Equal(t, status, apiErr.Status, apiErr.Error())
}

// Defect 1: file B PUT to the upload URL of file A (300,000 rows) while A
// applies gets 412 and changes nothing; an S3 event announcing another
// version of the key is refused too (the diff pinned A's version); the
// generation ends applied and the catalog equals A.
func TestRePutWhileApplyingRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{HandlerTimeout: 20 * time.Second, VisibilityTimeout: 25 * time.Second})
	e.Onboard("r1")
	ctx := systemtest.Context(t, 4*time.Minute)
	const rows = 300000
	a, b := uniformCSV(rows, "A"), uniformCSV(rows, "B")
	slot, err := e.API.Reserve(ctx, e.Token("r1"), "r1", "csv")
	require.NoError(t, err)
	require.Equal(t, "*", slot.Upload.Headers["If-None-Match"], "the URL is single-use")
	require.NoError(t, e.API.Put(ctx, slot, a))
	_, err = e.API.WaitFor(ctx, e.Token("r1"), "r1", slot.Generation, func(s apiclient.Status) bool {
		return s.State == "applying" || apiclient.Settled(s.State)
	}, nil)
	require.NoError(t, err)

	requireHTTPStatus(t, e.API.Put(ctx, slot, b), http.StatusPreconditionFailed)
	// As if another version had been written anyway: its event is refused.
	ev := message.NewObjectCreatedEvent(stack.Region, e.Stack.Bucket, keys.Upload("r1", slot.Generation), int64(len(b)), time.Now())
	ev.Records[0].S3.Object.ETag = "0123456789abcdef0123456789abcdef"
	require.NoError(t, e.Stack.SendS3Event(ctx, ev))

	s, err := e.API.WaitSettled(ctx, e.Token("r1"), "r1", slot.Generation, nil)
	require.NoError(t, err)
	require.Equal(t, "applied", s.State, "%+v", s)
	require.EqualValues(t, rows, s.Changes.Inserted)
	require.Equal(t, s.Chunks.Total, s.Chunks.Applied)
	require.Equal(t, map[string]int{"A": rows}, e.livePrices("r1"))
	size, err := e.Stack.Blobs.Size(ctx, keys.Upload("r1", slot.Generation))
	require.NoError(t, err)
	require.EqualValues(t, len(a), size, "the upload is still A")
}

// Defect 1: a held upload replaced before its confirmation is refused: the
// generation ends rejected (upload_changed), confirming it is a conflict,
// and the catalog keeps the previous generation.
func TestHeldUploadReplacedBeforeConfirm(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 100})
	e.Onboard("r1")
	ctx := systemtest.Context(t, 2*time.Minute)
	base := fixtures.Generate("p", 150)
	require.Equal(t, "applied", e.Upload("r1", base.CSV(nil)).State)

	held := e.Upload("r1", nil)
	require.Equal(t, "held", held.State)
	require.Equal(t, "empty_snapshot", held.Error.Code)

	e.replaceUpload("r1", held.Generation, fixtures.Generate("evil", 150).CSV(nil))
	_, err := e.API.Confirm(ctx, e.Token("r1"), "r1", held.Generation)
	if err != nil {
		requireHTTPStatus(t, err, http.StatusConflict) // the replacement's event came first
	}
	s, err := e.API.WaitApplied(ctx, e.Token("r1"), "r1", held.Generation, nil)
	require.NoError(t, err)
	require.Equal(t, "rejected", s.State)
	require.Equal(t, "upload_changed", s.Error.Code)
	_, err = e.API.Confirm(ctx, e.Token("r1"), "r1", held.Generation)
	requireHTTPStatus(t, err, http.StatusConflict)
	e.RequireCatalog("r1", base)
}

// A held upload whose object vanished before its confirmation ends
// rejected (upload_missing), never stuck.
func TestConfirmedUploadGone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 100})
	e.Onboard("r1")
	ctx := systemtest.Context(t, 2*time.Minute)
	base := fixtures.Generate("p", 150)
	require.Equal(t, "applied", e.Upload("r1", base.CSV(nil)).State)
	held := e.Upload("r1", fixtures.Generate("p", 20).CSV(nil))
	require.Equal(t, "held", held.State)
	require.Equal(t, "mass_delete", held.Error.Code)
	client, err := s3server.NewS3Client(ctx, e.Stack.S3Endpoint)
	require.NoError(t, err)
	_, err = client.DeleteObject(ctx, &s3.DeleteObjectInput{
		Bucket: aws.String(e.Stack.Bucket), Key: aws.String(keys.Upload("r1", held.Generation))})
	require.NoError(t, err)
	_, err = e.API.Confirm(ctx, e.Token("r1"), "r1", held.Generation)
	require.NoError(t, err)
	s, err := e.API.WaitApplied(ctx, e.Token("r1"), "r1", held.Generation, nil)
	require.NoError(t, err)
	require.Equal(t, "rejected", s.State)
	require.Equal(t, "upload_missing", s.Error.Code)
	e.RequireCatalog("r1", base)
}
