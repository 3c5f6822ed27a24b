package main

import (
	"context"
	"testing"
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
