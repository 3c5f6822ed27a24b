package ops_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
)

// gcRoute asks POST /v1/admin/gc as an operator would and returns the
// status and body.
func (f *fixture) gcRoute(body string) (int, string) {
	req := httptest.NewRequest(http.MethodPost, "/v1/admin/gc", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	w := httptest.NewRecorder()
	f.ops.ServeHTTP(w, req)
	return w.Code, w.Body.String()
}

// A collection (the admin route, of the retailer and of every retailer)
// at each step of the retailer's move between shards answers 200, or 429
// retailer_moving while the move switches, never a 500; the move ends
// done. Then, collected again on the new shard, a zombie chunk of the
// first generation (delivered again after the move and after both
// collections) writes nothing: the write floor came over with the
// retailer (I3), and the tombstones it would have raised stay gone.
func TestCollectionAtEachStepOfAMove(t *testing.T) {
	t.Parallel()
	for _, at := range attackSteps("copy_products", "drain", "cleanup") { // copying, frozen, switched
		t.Run(at, func(t *testing.T) {
			t.Parallel() // mostly the moves' route waits
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			f := newMoveFixture(t)
			f.onboard("r")
			f.onboard("s") // another retailer, staying on shard 0
			f.upload("s", catalogCSV)
			// Generation 1, with a copy of its chunk messages: the zombies.
			gen1 := f.reserve("r", time.Hour)
			f.arrive("r", gen1, "product_id,price\na,1\nb,2\nc,3\nd,4\ne,5\n")
			f.diffed("r", gen1)
			var zombies []message.ChunkMessage
			for _, q := range []string{queues.ApplySmall, queues.ApplyLarge} {
				for _, m := range f.queue.Take(q) {
					var msg message.ChunkMessage
					require.NoError(t, json.Unmarshal([]byte(m.Body), &msg))
					zombies = append(zombies, msg)
					require.NoError(t, f.apply.Apply(ctx, msg))
				}
			}
			require.NotEmpty(t, zombies)
			f.upload("r", "product_id,price\na,1\nc,3\n") // b, d and e deleted
			f.now = f.now.Add(20 * 24 * time.Hour)        // past the tombstones' retention

			var answers []string
			require.NoError(t, f.moveAt(ctx, at, func() error {
				for _, body := range []string{`{"retailer_id":"r"}`, `{}`} {
					code, out := f.gcRoute(body)
					answers = append(answers, out)
					if code != http.StatusOK {
						require.Equal(t, http.StatusTooManyRequests, code, "%s at %s: %s", body, at, out)
						require.Contains(t, out, "retailer_moving")
					}
				}
				return nil
			}))
			t.Logf("collections at %s: %v", at, answers)

			code, out := f.gcRoute(`{"retailer_id":"r"}`)
			require.Equal(t, http.StatusOK, code, out)
			for _, id := range []string{"b", "d", "e"} {
				_, err := f.store.CatalogRow(ctx, "r", id)
				require.Error(t, err, "the tombstone of %s is collected", id)
			}
			floor, err := f.store.Shards[1].WriteFloor(ctx, "r")
			require.NoError(t, err)
			require.GreaterOrEqual(t, floor, gen1+1, "the write floor on the new shard")

			for _, z := range zombies {
				_ = f.apply.Apply(ctx, z) // refused or a no-op: either way nothing written
			}
			require.Equal(t, map[string]string{"a": `{"price":"1"}`, "c": `{"price":"3"}`}, f.catalogOf("r"))
			for _, id := range []string{"b", "d", "e"} {
				_, err := f.store.CatalogRow(ctx, "r", id)
				require.Error(t, err, "the zombie chunk raised %s again", id)
			}
			var live, rows int
			require.NoError(t, f.store.Shards[1].Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE NOT deleted), count(*) FROM products WHERE retailer_id = 'r'`).Scan(&live, &rows))
			require.Equal(t, 2, live)
			require.Equal(t, 2, rows)
			require.NoError(t, f.store.Shards[0].Pool().QueryRow(ctx, `SELECT count(*) FROM products WHERE retailer_id = 'r'`).Scan(&rows))
			require.Zero(t, rows, "nothing of r left on the old shard")
			require.Equal(t, map[string]string{"a": `{"price":"1"}`, "b": `{"price":"2"}`, "c": `{"price":"3"}`}, f.catalogOf("s"))
		})
	}
}
