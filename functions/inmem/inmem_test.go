package inmem_test

import (
	"testing"

	"github.com/retailcatalog/catalog/functions/blob/blobtest"
	"github.com/retailcatalog/catalog/functions/inmem"
)

func TestBlobsContract(t *testing.T) {
	t.Parallel()
	blobtest.Run(t, func(t *testing.T) blobtest.Store { return inmem.NewBlobs() })
}

func TestDirBlobsContract(t *testing.T) {
	t.Parallel()
	blobtest.Run(t, func(t *testing.T) blobtest.Store { return &inmem.Blobs{Dir: t.TempDir()} })
}
