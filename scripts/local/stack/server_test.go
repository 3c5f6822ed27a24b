package stack

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// serve runs the API's server with limits l around h on a free port.
func serve(t *testing.T, l apiLimits, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := newAPIServer(h, l, slog.New(slog.DiscardHandler))
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// closedAfter reads conn until the server closes it and returns how long
// that took from start, failing when it does not close within limit.
func closedAfter(t *testing.T, conn net.Conn, start time.Time, limit time.Duration) (time.Duration, []byte) {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(start.Add(limit)))
	got, err := io.ReadAll(conn)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server kept the connection open for %v", limit)
	return time.Since(start), got
}

// The API server cuts off a client that sends its headers slowly (at the
// header timeout, however steadily it sends), closes an idle keep-alive
// connection, ends a client that stops reading its answer, refuses headers
// over the bound and a body over API Gateway's 10 MB as API Gateway does.
func TestAPIServerLimits(t *testing.T) {
	t.Parallel()
	l := apiLimits{readHeader: 400 * time.Millisecond, read: 2 * time.Second, write: 500 * time.Millisecond,
		idle: 400 * time.Millisecond, maxHeader: 4 << 10, maxBody: 1 << 20}
	bodyErrs := make(chan error, 2)
	addr := serve(t, l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			chunk := bytes.Repeat([]byte("b"), 1<<20)
			for i := 0; i < 64; i++ {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		case "/body":
			_, err := io.Copy(io.Discard, r.Body)
			bodyErrs <- err
			w.WriteHeader(http.StatusNoContent)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		return conn
	}

	// Headers a byte every 20 ms: cut off at the header timeout.
	conn := dial()
	start := time.Now()
	go func(conn net.Conn) {
		for _, b := range []byte("GET / HTTP/1.1\r\nHost: x\r\nX-Padding: " + strings.Repeat("a", 300) + "\r\n\r\n") {
			if _, err := conn.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}(conn)
	took, _ := closedAfter(t, conn, start, 3*time.Second)
	require.GreaterOrEqual(t, took, 350*time.Millisecond)
	require.LessOrEqual(t, took, 1500*time.Millisecond)

	// An idle keep-alive connection: closed after the idle timeout.
	conn = dial()
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.False(t, resp.Close)
	start = time.Now()
	require.NoError(t, conn.SetReadDeadline(start.Add(3*time.Second)))
	_, err = br.ReadByte()
	require.ErrorIs(t, err, io.EOF)
	require.GreaterOrEqual(t, time.Since(start), 350*time.Millisecond)
	require.LessOrEqual(t, time.Since(start), 1500*time.Millisecond)

	// An answer of 64 MiB never read: the server gives up at the write bound.
	conn = dial()
	fmt.Fprintf(conn, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
	time.Sleep(1500 * time.Millisecond)
	took, got := closedAfter(t, conn, time.Now(), 10*time.Second)
	require.Less(t, len(got), 64<<20, "cut off, not all sent (%v)", took)

	// Headers over the bound.
	conn = dial()
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("h", 8<<10))
	resp, err = http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)

	// A body over the bound: 413 in API Gateway's shape before any handler
	// runs; without a length, cut at the bound while read.
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/body", bytes.NewReader(make([]byte, 2<<20)))
	require.NoError(t, err)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	require.JSONEq(t, `{"message":"Request Entity Too Large"}`, string(b))
	require.NotEmpty(t, resp.Header.Get("apigw-requestid"))
	require.Empty(t, bodyErrs, "the handler did not run")
	req, err = http.NewRequest(http.MethodPost, "http://"+addr+"/body", io.NopCloser(bytes.NewReader(make([]byte, 2<<20))))
	require.NoError(t, err)
	req.ContentLength = -1
	resp, err = http.DefaultClient.Do(req)
	if err == nil {
		resp.Body.Close()
	}
	var tooBig *http.MaxBytesError
	require.ErrorAs(t, <-bodyErrs, &tooBig)
}

// The stack's own limits are set: none is zero (no bound).
func TestDefaultAPILimitsAreBounds(t *testing.T) {
	t.Parallel()
	l := defaultAPILimits
	for _, d := range []time.Duration{l.readHeader, l.read, l.write, l.idle} {
		require.Positive(t, d)
	}
	require.Positive(t, l.maxHeader)
	require.Equal(t, int64(10<<20), l.maxBody, "API Gateway's payload limit")
	require.Less(t, l.readHeader, l.read)
}
