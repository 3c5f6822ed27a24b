package main

import (
	"context"
	"testing"
)

// TestHelpExitsZero: -h on the tool and on every bench prints usage and
// exits 0 (not "flag: help requested", exit 1), and runs nothing.
func TestHelpExitsZero(t *testing.T) {
	t.Parallel()
	if code := run(context.Background(), []string{"-h"}); code != 0 {
		t.Fatalf("bench -h: exit %d", code)
	}
	for name := range benches {
		if code := run(context.Background(), []string{name, "-h"}); code != 0 {
			t.Errorf("bench %s -h: exit %d", name, code)
		}
	}
	if code := run(context.Background(), []string{"no-such-bench"}); code != 2 {
		t.Errorf("an unknown bench: exit %d, want 2", code)
	}
}
