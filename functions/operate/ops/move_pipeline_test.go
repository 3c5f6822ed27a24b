package ops_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
)

// pipeline is a generation's way through the stages (the API's writes, S3's
// arrival, the diff, the apply queues), each tried again, as the queues
// and a retailer's client do, while the move refuses it.
type pipeline struct {
	f       *fixture
	id      string
	gen     int64
	stages  []func(ctx context.Context, p *pipeline) error
	next    int
	pending []message.ChunkMessage
	refused int
}

func (p *pipeline) advance(ctx context.Context) error {
	for p.next < len(p.stages) {
		if err := p.stages[p.next](ctx, p); err != nil {
			if isMoving(err) {
				p.refused++
				return nil
			}
			return fmt.Errorf("stage %d of generation %d: %w", p.next, p.gen, err)
		}
		p.next++
	}
	return nil
}

func stageReserve(mode string) func(context.Context, *pipeline) error {
	return func(ctx context.Context, p *pipeline) (err error) {
		if mode == "delta" {
			p.gen, err = p.f.store.ReserveDelta(ctx, p.id, "csv", time.Now().Add(time.Hour), 0)
		} else {
			p.gen, err = p.f.store.ReserveGeneration(ctx, p.id, "csv", time.Now().Add(time.Hour), 0)
		}
		return err
	}
}

// stagePut is the PUT through the presigned URL and its arrival.
func stagePut(data string) func(context.Context, *pipeline) error {
	return func(ctx context.Context, p *pipeline) error {
		if err := p.f.blobs.Put(ctx, keys.Upload(p.id, p.gen), []byte(data)); err != nil {
			return err
		}
		_, err := p.f.store.MarkArrived(ctx, p.id, p.gen, time.Now(), time.Hour)
		return err
	}
}

func stageDiff(ctx context.Context, p *pipeline) error {
	err := p.f.diff.Diff(ctx, message.DiffJob{RetailerID: p.id, Generation: p.gen, Key: keys.Upload(p.id, p.gen)})
	for _, q := range []string{queues.ApplySmall, queues.ApplyLarge} {
		for _, m := range p.f.queue.Take(q) {
			var msg message.ChunkMessage
			require.NoError(p.f.t, json.Unmarshal([]byte(m.Body), &msg))
			p.pending = append(p.pending, msg)
		}
	}
	return err
}

func stageApply(ctx context.Context, p *pipeline) error {
	for len(p.pending) > 0 {
		if err := p.f.apply.Apply(ctx, p.pending[0]); err != nil {
			return err
		}
		p.pending = p.pending[1:]
	}
	return nil
}

// A generation on its way while the retailer moves between shards, each
// kind met by a step of the move (every kind at every step with
// CATALOG_ATTACK_MOVES): a held generation confirmed (just before the
// freeze, and while the move switches: 429, then success); a rollback; a delta;
// an upload reserved before the move whose PUT lands during it (through
// the URL handed out before); the first upload of a retailer that never
// uploaded (no retailer_state row to carry). Each stage the switch
// refuses (429 retailer_moving, CM001) is asked again after: the move
// ends done, the generation applied on the new shard with the catalog it
// means (I1: nothing lost, nothing twice), every generation ended (I10),
// nothing of the retailer left on the old shard.
func TestGenerationsOnTheirWayDuringAMove(t *testing.T) {
	t.Parallel()
	const a = "product_id,price\na,1\nb,2\nc,3\n"
	const b = "product_id,price\na,5\nb,2\nd,4\n"
	kinds := []struct {
		name  string
		at    []string // the steps it meets in CI
		setup func(f *fixture) *pipeline
		want  map[string]string
	}{
		{"confirmed_hold", []string{"freeze", "drain"}, func(f *fixture) *pipeline {
			f.upload("r", a)
			held := f.reserve("r", time.Hour)
			f.arrive("r", held, "product_id,price\n") // empty: held
			f.diffed("r", held)
			st, err := f.store.Generation(context.Background(), "r", held)
			require.NoError(f.t, err)
			require.Equal(f.t, catalog.State("held"), st.State, "%+v", st)
			return &pipeline{f: f, id: "r", gen: held, stages: []func(context.Context, *pipeline) error{
				func(ctx context.Context, p *pipeline) error { return p.f.store.Confirm(ctx, "r", p.gen) }, stageDiff, stageApply}}
		}, map[string]string{}},
		{"rollback", []string{"drain"}, func(f *fixture) *pipeline {
			first := f.upload("r", a)
			f.upload("r", b)
			return &pipeline{f: f, id: "r", stages: []func(context.Context, *pipeline) error{
				func(ctx context.Context, p *pipeline) (err error) {
					p.gen, err = p.f.store.Rollback(ctx, "r", first, 0)
					return err
				}, stageDiff, stageApply}}
		}, map[string]string{"a": `{"price":"1"}`, "b": `{"price":"2"}`, "c": `{"price":"3"}`}},
		{"delta", []string{"copy_products", "unfreeze"}, func(f *fixture) *pipeline {
			f.upload("r", a)
			return &pipeline{f: f, id: "r", stages: []func(context.Context, *pipeline) error{
				stageReserve("delta"), stagePut("product_id,price\na,7\nz,9\n"), stageDiff, stageApply}}
		}, map[string]string{"a": `{"price":"7"}`, "b": `{"price":"2"}`, "c": `{"price":"3"}`, "z": `{"price":"9"}`}},
		{"put_during_move", []string{"wait_routes"}, func(f *fixture) *pipeline {
			f.upload("r", a)
			return &pipeline{f: f, id: "r", gen: f.reserve("r", time.Hour), stages: []func(context.Context, *pipeline) error{
				stagePut(b), stageDiff, stageApply}}
		}, map[string]string{"a": `{"price":"5"}`, "b": `{"price":"2"}`, "d": `{"price":"4"}`}},
		{"never_uploaded", []string{"catch_up"}, func(f *fixture) *pipeline {
			return &pipeline{f: f, id: "r", stages: []func(context.Context, *pipeline) error{
				stageReserve("full"), stagePut(a), stageDiff, stageApply}}
		}, map[string]string{"a": `{"price":"1"}`, "b": `{"price":"2"}`, "c": `{"price":"3"}`}},
	}
	for _, k := range kinds {
		for _, at := range attackSteps(k.at...) {
			t.Run(k.name+"/"+at, func(t *testing.T) {
				t.Parallel() // mostly the moves' route waits
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				f := newMoveFixture(t)
				f.onboard("r")
				p := k.setup(f)
				require.NoError(t, f.moveAt(ctx, at, func() error { return p.advance(ctx) }))
				require.NoError(t, p.advance(ctx))
				require.Equal(t, len(p.stages), p.next, "the generation went its way after the move")
				t.Logf("%s at %s: refused %d times while moving", k.name, at, p.refused)

				st, err := f.store.Generation(ctx, "r", p.gen)
				require.NoError(t, err)
				require.Equal(t, catalog.State("applied"), st.State, "%+v", st)
				require.Equal(t, k.want, f.catalogOf("r"))
				on := f.store.Shards[1].Pool()
				var unfinished int
				require.NoError(t, on.QueryRow(ctx, `SELECT count(*) FROM generations WHERE retailer_id = 'r' AND state NOT IN ('applied', 'superseded', 'rejected', 'expired')`).Scan(&unfinished))
				require.Zero(t, unfinished, "every generation ended")
				for _, table := range []string{"products", "consumer_versions", "retailer_state", "generations", "applied_chunks", "outbox", "usage_daily", "move_changes"} {
					var n int
					require.NoError(t, f.store.Shards[0].Pool().QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE retailer_id = 'r'").Scan(&n))
					require.Zero(t, n, "rows of the retailer in %s on the old shard", table)
				}
			})
		}
	}
}
