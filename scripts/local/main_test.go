package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestDemoHookReceiverLimits: the demo's receiver cuts off a client that
// sends its headers slowly at the header timeout (however steadily), closes
// an idle keep-alive connection, and takes no body over its bound.
func TestDemoHookReceiverLimits(t *testing.T) {
	t.Parallel()
	rc, err := startHookReceiverWith(hookLimits{readHeader: 400 * time.Millisecond, read: 2 * time.Second,
		write: 2 * time.Second, idle: 400 * time.Millisecond, maxHeader: 4 << 10, maxBody: 1 << 10})
	require.NoError(t, err)
	t.Cleanup(rc.close)
	u, err := url.Parse(rc.url)
	require.NoError(t, err)
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", u.Host)
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	// waitClosed waits for the server to close conn and returns how long it took.
	waitClosed := func(conn net.Conn, r io.Reader) time.Duration {
		start := time.Now()
		require.NoError(t, conn.SetReadDeadline(start.Add(3*time.Second)))
		_, err := io.Copy(io.Discard, r)
		var ne net.Error
		require.False(t, errors.As(err, &ne) && ne.Timeout(), "the receiver kept the connection open")
		return time.Since(start)
	}

	conn := dial()
	go func(conn net.Conn) {
		for _, b := range []byte("POST " + u.Path + " HTTP/1.1\r\nHost: x\r\nX-Padding: " + strings.Repeat("a", 300) + "\r\n\r\n") {
			if _, err := conn.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}(conn)
	took := waitClosed(conn, conn)
	require.GreaterOrEqual(t, took, 350*time.Millisecond)
	require.LessOrEqual(t, took, 1500*time.Millisecond)

	conn = dial()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", u.Path)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	took = waitClosed(conn, br)
	require.GreaterOrEqual(t, took, 350*time.Millisecond)
	require.LessOrEqual(t, took, 1500*time.Millisecond)

	resp, err = http.Post(rc.url, "application/json", bytes.NewReader(make([]byte, 2<<10)))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	require.Len(t, rc.deliveries(), 1, "only the small delivery is kept")
}
