package s3blob_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/retailcatalog/catalog/functions/platform/connect"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/ports/blob/blobtest"
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
	cfg := config.Config{Bucket: bucket, AWS: config.AWS{Region: "us-east-1", S3Endpoint: srv.Endpoint(),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")}}
	store, err := connect.New(&cfg).Blobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	blobtest.Run(t, func(t *testing.T) blobtest.Store { return store })
}
