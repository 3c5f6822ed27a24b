package retry_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/platform/retry"
)

func TestScheduleDoublesToItsCap(t *testing.T) {
	t.Parallel()
	s := retry.Schedule{Base: 30 * time.Second, Cap: 15 * time.Minute}
	var got []time.Duration
	for n := 1; n <= 8; n++ {
		got = append(got, s.Delay(n))
	}
	require.Equal(t, []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute,
		15 * time.Minute, 15 * time.Minute, 15 * time.Minute}, got)
	require.Equal(t, retry.Schedule{}.Delay(3), 2*time.Minute, "the defaults: 30s doubling")
	require.Equal(t, time.Second, retry.Schedule{Base: time.Second}.Delay(1))
	require.Equal(t, 15*time.Minute, s.Delay(1000), "no overflow")
}

// The webhooks queue's redrive count: with the default schedule, 24 h of
// retries take 101 deliveries (30 s + 1 + 2 + 4 + 8 min, then 15 min apart).
func TestReceivesCoverTheWindow(t *testing.T) {
	t.Parallel()
	s := retry.Schedule{}
	n := s.Receives(24 * time.Hour)
	var waited time.Duration
	for i := 1; i < n; i++ {
		waited += s.Delay(i)
	}
	require.GreaterOrEqual(t, waited, 24*time.Hour)
	require.Less(t, waited-s.Delay(n-1), 24*time.Hour, "no more receives than needed")
	require.Equal(t, 101, n)
	require.Equal(t, 3, retry.Schedule{Base: time.Second}.Receives(3*time.Second), "1 s + 2 s, then the third delivery is the last")
	require.Equal(t, 1, s.Receives(0))
}
