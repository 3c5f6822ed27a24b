package s3blob_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/retailcatalog/catalog/functions/blob/blobtest"
	"github.com/retailcatalog/catalog/functions/s3blob"
	"github.com/retailcatalog/catalog/scripts/local/s3server"
)

// The S3 adapter keeps the blob store contract against the local S3
// stand-in (gofakes3), through the client the functions build.
func TestStoreContract(t *testing.T) {
	t.Parallel()
	const bucket = "contract"
	srv, err := s3server.Start(context.Background(), s3server.Options{
		Dir: t.TempDir(), Addr: "127.0.0.1:0", Buckets: []string{bucket}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	client, err := s3blob.NewClient(context.Background(), s3blob.Options{
		Region: "us-east-1", Endpoint: srv.Endpoint(), PathStyle: true, AccessKey: "local", SecretKey: "local"})
	if err != nil {
		t.Fatal(err)
	}
	store := s3blob.New(client, bucket)
	blobtest.Run(t, func(t *testing.T) blobtest.Store { return store })
}
