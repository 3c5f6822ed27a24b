package logging_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/platform/logging"
)

func TestEveryLineCarriesTheRequestIDs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := logging.New(&buf, slog.LevelInfo).With("function", "upload")
	ctx := logging.WithAPIRequestID(logging.WithLambdaRequestID(context.Background(), "lambda-1"), "apigw-1")
	log.InfoContext(ctx, "reserved", "retailer_id", "acme")
	log.DebugContext(ctx, "not at this level")
	log.Info("outside a request")

	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	require.Len(t, lines, 2)
	var first, second map[string]any
	require.NoError(t, json.Unmarshal(lines[0], &first))
	require.NoError(t, json.Unmarshal(lines[1], &second))
	require.Equal(t, "lambda-1", first["request_id"])
	require.Equal(t, "apigw-1", first["api_request_id"])
	require.Equal(t, "upload", first["function"])
	require.Equal(t, "acme", first["retailer_id"])
	require.NotContains(t, second, "request_id")
}

func TestParseLevelTakesLambdasNames(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]slog.Level{
		"TRACE": slog.LevelDebug - 4, "debug": slog.LevelDebug, "INFO": slog.LevelInfo,
		"WARN": slog.LevelWarn, "Error": slog.LevelError, "FATAL": slog.LevelError + 4, "INFO+2": slog.LevelInfo + 2,
	} {
		got, err := logging.ParseLevel(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	_, err := logging.ParseLevel("loud")
	require.ErrorContains(t, err, "TRACE, DEBUG, INFO, WARN, ERROR or FATAL")
}

func TestWithLambdaRequestIDKeepsTheRestOfTheContext(t *testing.T) {
	t.Parallel()
	ctx := logging.WithLambdaRequestID(context.Background(), "a")
	ctx = logging.WithLambdaRequestID(ctx, "b")
	require.Equal(t, "b", logging.LambdaRequestID(ctx))
	require.Equal(t, "", logging.APIRequestID(ctx))
	require.Equal(t, "", logging.LambdaRequestID(context.Background()))
}

// I12: no value makes a log line unbounded: a message, a string, an
// error, a list.
func TestLogLinesAreBounded(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := logging.New(&buf, slog.LevelInfo)
	huge := strings.Repeat("é", 1<<20)
	ids := make([]string, 10000)
	for i := range ids {
		ids[i] = "product-" + strings.Repeat("x", 10)
	}
	log.Info("m"+huge, "column", huge, "err", errors.New(huge), "ids", ids)
	line := buf.String()
	require.Less(t, len(line), 4*logging.MaxValueBytes+4096, "one line")
	require.True(t, utf8.ValidString(line))
	require.Contains(t, line, "… (2097152 bytes)")
	require.Contains(t, line, "… 9936 more")
	var parsed map[string]any
	require.NoError(t, json.Unmarshal([]byte(line), &parsed), "still one JSON object")
}
