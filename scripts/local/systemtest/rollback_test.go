package systemtest_test

import (
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/s3server"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// requireCode requires err to be an API error of status and code.
func requireCode(t *testing.T, err error, status int, code string) {
	t.Helper()
	var apiErr *apiclient.APIError
	require.True(t, errors.As(err, &apiErr), "want HTTP %d %s, got %v", status, code, err)
	require.Equal(t, status, apiErr.Status, apiErr.Error())
	require.Equal(t, code, apiErr.Code, apiErr.Error())
}

// A rollback (DESIGN 13) is a new generation whose content is an applied
// generation's catalog: after two uploads, rolling back to the first makes
// the catalog the first's exactly, through the normal diff and chunks,
// with mode rollback and source_generation; a rollback to the current
// generation changes nothing; one to a generation never applied is 404
// generation_not_applied, to one whose snapshot is gone 409
// snapshot_expired, and anything but a positive integer 400.
func TestRollbackToAnAppliedGeneration(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 10, ReservationsPerHour: 6})
	e.Onboard("r1")
	ctx := systemtest.Context(t, 2*time.Minute)
	tok := e.Token("r1")
	day1 := fixtures.Generate("p", 40)
	g1 := e.Upload("r1", day1.CSV(nil))
	require.Equal(t, "applied", g1.State)
	day2 := day1.Clone()
	for id := range day2 {
		day2[id]["price"] = "1.00"
	}
	delete(day2, "p-00003")
	day2["p-new"] = map[string]string{"title": "new", "price": "2.00"}
	g2 := e.Upload("r1", day2.CSV(nil))
	require.Equal(t, "applied", g2.State)
	bad := e.Upload("r1", []byte("product_id,title\nsame,1\nsame,2\n"))
	require.Equal(t, "rejected", bad.State)

	back, err := e.API.Rollback(ctx, tok, "r1", g1.Generation)
	require.NoError(t, err)
	require.Equal(t, "rollback", back.Mode)
	require.NotNil(t, back.SourceGeneration)
	require.Equal(t, g1.Generation, *back.SourceGeneration)
	require.Greater(t, back.Generation, bad.Generation)
	s := e.Wait("r1", back.Generation)
	require.Equal(t, "applied", s.State, "%+v", s.Error)
	require.EqualValues(t, 1, s.Changes.Inserted, "p-00003 back")
	require.EqualValues(t, 1, s.Changes.Deleted, "p-new gone")
	require.EqualValues(t, 39, s.Changes.Updated, "every price back")
	e.RequireCatalog("r1", day1)

	same, err := e.API.Rollback(ctx, tok, "r1", back.Generation)
	require.NoError(t, err)
	s = e.Wait("r1", same.Generation)
	require.Equal(t, "applied", s.State)
	require.Zero(t, s.Changes.Inserted+s.Changes.Updated+s.Changes.Deleted, "a rollback to the current generation changes nothing")
	e.RequireCatalog("r1", day1)

	// A rollback is a reservation of the retailer's: the sixth of the hour
	// is taken, the seventh refused.
	sixth, err := e.API.Rollback(ctx, tok, "r1", g1.Generation)
	require.NoError(t, err)
	_, err = e.API.Rollback(ctx, tok, "r1", g1.Generation)
	requireCode(t, err, 429, "too_many_reservations")
	require.Equal(t, "applied", e.Wait("r1", sixth.Generation).State)

	_, err = e.API.Rollback(ctx, tok, "r1", bad.Generation)
	requireCode(t, err, 404, "generation_not_applied")
	_, err = e.API.Rollback(ctx, tok, "r1", 999)
	requireCode(t, err, 404, "generation_not_applied")
	err = e.API.Do(ctx, "POST", "/v1/retailers/r1/rollback", tok, map[string]any{"to_generation": "x"}, nil)
	requireCode(t, err, 400, "invalid_generation")
	err = e.API.Do(ctx, "POST", "/v1/retailers/r1/rollback", tok, map[string]any{"to_generation": 0}, nil)
	requireCode(t, err, 400, "invalid_generation")
	err = e.API.Do(ctx, "POST", "/v1/retailers/r1/rollback", e.Onboard("r2"), map[string]any{"to_generation": g1.Generation}, nil)
	requireCode(t, err, 403, "forbidden")

	client, err := s3server.NewS3Client(ctx, e.Stack.S3Endpoint)
	require.NoError(t, err)
	_, err = client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(e.Stack.Bucket), Key: aws.String(keys.Upload("r1", g2.Generation))})
	require.NoError(t, err)
	_, err = e.API.Rollback(ctx, tok, "r1", g2.Generation)
	requireCode(t, err, 409, "snapshot_expired")
	e.RequireCatalog("r1", day1)
}
