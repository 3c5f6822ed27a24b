package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
	"github.com/retailcatalog/catalog/functions/stores/pgstore/pgstoretest"
)

// moveChildVar, when set, makes TestMoveKilledAtEachStep the child: a
// runner of the moves that kills its own process (SIGKILL) a few
// milliseconds into the step it names.
const moveChildVar = "CATALOG_TEST_MOVE_CHILD"

type moveChild struct {
	Control string   `json:"control"`
	Shards  []string `json:"shards"`
	KillAt  string   `json:"kill_at"`
	Seed    uint64   `json:"seed"`
}

// A move whose runner's process is killed (SIGKILL: its connections drop
// mid-transaction, its lease is left to run out) in each of its steps in
// turn, while generations are written and the storefront reads, is
// resumed by the next runner and ends done, the new shard holding exactly
// what was written and the old one nothing of it.
func TestMoveKilledAtEachStep(t *testing.T) {
	if v := os.Getenv(moveChildVar); v != "" {
		runMoveChild(t, v)
		return
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	control, shards := pgstoretest.Databases(t, pgstoretest.Shards(2))
	s, err := pgstore.Open(ctx, control, shards, pgstore.PoolOptions{MaxConns: 8})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	f := newMoveFixtureOn(t, s)
	stop := make(chan struct{})
	writes, reads := f.writeUntil(ctx, stop), f.readUntil(ctx, stop)
	time.Sleep(100 * time.Millisecond)
	id, err := s.StartMove(ctx, f.id, 1)
	require.NoError(t, err)

	killed := map[string]string{} // the step a child was told to die in -> the step the move was at after
	for i, step := range []string{"start", "copy_products", "copy_versions", "catch_up", "freeze", "drain", "switch", "wait_routes", "unfreeze", "cleanup"} {
		m, err := s.Move(ctx, id)
		require.NoError(t, err)
		if !m.Running() {
			break
		}
		spec, err := json.Marshal(moveChild{Control: control, Shards: shards, KillAt: step, Seed: uint64(i)})
		require.NoError(t, err)
		cctx, ccancel := context.WithTimeout(ctx, time.Minute)
		cmd := exec.CommandContext(cctx, os.Args[0], "-test.run=^TestMoveKilledAtEachStep$", "-test.count=1")
		cmd.Env = append(os.Environ(), moveChildVar+"="+string(spec))
		out, err := cmd.CombinedOutput()
		ccancel()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			ws, ok := exit.Sys().(syscall.WaitStatus)
			require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "child for %s: %v\n%s", step, err, out)
			m, err := s.Move(ctx, id)
			require.NoError(t, err)
			killed[step] = m.Step
			continue
		}
		require.NoError(t, err, "child for %s:\n%s", step, out) // it ended the move before reaching step
	}
	f.runMoves(ctx)
	time.Sleep(200 * time.Millisecond) // writes on the new shard
	close(stop)
	require.NoError(t, <-writes)
	require.NoError(t, <-reads)
	m, err := s.Move(ctx, id)
	require.NoError(t, err)
	require.Equal(t, catalog.MoveDone, m.State, "move %+v", m)
	f.requireWhole(ctx, 1)
	t.Logf("killed in (step told -> step checkpointed after): %v; generations written %d, refused %d", killed, f.gen, f.refused.Load())
	require.GreaterOrEqual(t, len(killed), 6, "runners killed mid-move")
}

// runMoveChild runs the moves until done, killing its process a few
// milliseconds into the step spec names.
func runMoveChild(t *testing.T, spec string) {
	var c moveChild
	require.NoError(t, json.Unmarshal([]byte(spec), &c))
	ctx := context.Background()
	s, err := pgstore.Open(ctx, c.Control, c.Shards, pgstore.PoolOptions{MaxConns: 4})
	require.NoError(t, err)
	rnd := rand.New(rand.NewPCG(c.Seed, 7))
	s.Moves = moveTestOptions
	s.Moves.Hook = func(_, step string) error {
		if step == c.KillAt {
			delay := time.Duration(rnd.IntN(15)) * time.Millisecond
			go func() {
				time.Sleep(delay)
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}()
		}
		return nil
	}
	deadline := time.Now().Add(50 * time.Second)
	for time.Now().Before(deadline) {
		running, err := s.RunMoves(ctx, time.Now().Add(time.Minute))
		if err == nil && running == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the child's moves did not end")
}
