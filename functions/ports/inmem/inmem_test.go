package inmem_test

import (
	"net/http/httptest"
	"testing"

	"github.com/retailcatalog/catalog/functions/ports/blob/blobtest"
	"github.com/retailcatalog/catalog/functions/ports/inmem"
	"github.com/retailcatalog/catalog/functions/ports/queue/queuetest"
)

func TestBlobsContract(t *testing.T) {
	t.Parallel()
	blobtest.Run(t, func(t *testing.T) blobtest.Store { return served(t, inmem.NewBlobs()) })
}

func TestDirBlobsContract(t *testing.T) {
	t.Parallel()
	blobtest.Run(t, func(t *testing.T) blobtest.Store { return served(t, &inmem.Blobs{Dir: t.TempDir()}) })
}

// served serves b's presigned GETs until the test ends.
func served(t *testing.T, b *inmem.Blobs) *inmem.Blobs {
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	b.BaseURL = srv.URL
	return b
}

func TestQueueContract(t *testing.T) {
	t.Parallel()
	queuetest.Run(t, func(t *testing.T) queuetest.Harness {
		q := inmem.NewQueue()
		return queuetest.Harness{Sender: q, Inspector: q, StandardURL: "inmem://diff-jobs", FIFOURL: "inmem://apply-small.fifo",
			Redriver: q, StandardDLQURL: "inmem://diff-jobs-dlq", FIFODLQURL: "inmem://apply-small-dlq.fifo",
			Receive: func(t *testing.T, queueURL string, want int) []queuetest.Message {
				var out []queuetest.Message
				for _, m := range q.Take(queueURL) {
					out = append(out, queuetest.Message{Body: m.Body, GroupID: m.GroupID})
				}
				return out
			}}
	})
}
