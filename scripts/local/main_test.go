package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/webhook"
)

// TestHelpExitsZero: -h on the tool and on each command prints usage and
// exits 0 (not "flag: help requested", exit 1), and starts nothing.
func TestHelpExitsZero(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-h"}, {"help"}, {"up", "-h"}, {"up", "--help"}, {"demo", "-h"}, {"test", "-h"}} {
		if code := run(context.Background(), args); code != 0 {
			t.Errorf("local %v: exit %d", args, code)
		}
	}
	if code := run(context.Background(), []string{"up", "--no-such-flag"}); code != 1 {
		t.Errorf("a bad flag: exit %d, want 1", code)
	}
}

// TestDemoRefusesADirItDidNotMake: the demo wipes its data dir, so it takes
// only a new or empty one, or one it made (marked), never up's data.
func TestDemoRefusesADirItDidNotMake(t *testing.T) {
	t.Parallel()
	upDir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(upDir, "admin-token"), []byte("x\n"), 0o600))
	err := resetDemoDir(upDir)
	require.ErrorContains(t, err, "holds files the demo did not make")
	require.FileExists(t, filepath.Join(upDir, "admin-token"), "nothing deleted")
	require.Equal(t, 1, run(context.Background(), []string{"demo", "--data-dir", upDir}))
	require.FileExists(t, filepath.Join(upDir, "admin-token"))

	// New, then the demo's own (wiped and marked again), and an empty one.
	demoDir := filepath.Join(t.TempDir(), "demo")
	require.NoError(t, resetDemoDir(demoDir))
	require.FileExists(t, filepath.Join(demoDir, demoMarker))
	require.NoError(t, os.WriteFile(filepath.Join(demoDir, "old-run"), nil, 0o644))
	require.NoError(t, resetDemoDir(demoDir))
	require.NoFileExists(t, filepath.Join(demoDir, "old-run"))
	require.FileExists(t, filepath.Join(demoDir, demoMarker))
	require.NoError(t, resetDemoDir(t.TempDir()))
}

// TestDemoHookReceiver: the demo's webhook receiver records each delivery
// with its event id, generation and state, and whether its signature is
// the retailer's (a wrong secret, or none, is not).
func TestDemoHookReceiver(t *testing.T) {
	t.Parallel()
	rc, err := startHookReceiver()
	require.NoError(t, err)
	t.Cleanup(rc.close)
	body := []byte(`{"id":"acme:2:applied","type":"catalog.snapshot.applied","time":"2026-12-01T00:00:00Z","retailer_id":"acme","generation":2,"status":{"retailer_id":"acme","generation":2,"state":"applied"}}`)
	post := func(signature string) {
		req, err := http.NewRequest(http.MethodPost, rc.url, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(webhook.HeaderEventID, "acme:2:applied")
		if signature != "" {
			req.Header.Set(webhook.HeaderSignature, signature)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNoContent, resp.StatusCode)
	}
	post(webhook.Sign([]byte(demoHookSecret), body))
	post(webhook.Sign([]byte("another secret"), body))
	post("")
	got := rc.deliveries()
	require.Len(t, got, 3)
	for i, want := range []bool{true, false, false} {
		require.Equal(t, "acme:2:applied", got[i].id)
		require.Equal(t, int64(2), got[i].gen)
		require.Equal(t, "applied", got[i].state)
		require.Equal(t, want, got[i].signed, "delivery %d", i)
	}
}
