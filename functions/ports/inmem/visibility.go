package inmem

import (
	"context"
	"sync"
	"time"
)

// Visibility records the delays a consumer asks for its failed messages
// (a retry.Visibility), by receipt handle.
type Visibility struct {
	mu     sync.Mutex
	delays map[string]time.Duration
}

// NewVisibility returns an empty recorder.
func NewVisibility() *Visibility { return &Visibility{} }

// Delay records d for receiptHandle.
func (v *Visibility) Delay(ctx context.Context, queueURL, receiptHandle string, d time.Duration) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.delays == nil {
		v.delays = map[string]time.Duration{}
	}
	v.delays[receiptHandle] = d
	return nil
}

// Delays returns the delays asked for, by receipt handle.
func (v *Visibility) Delays() map[string]time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make(map[string]time.Duration, len(v.delays))
	for k, d := range v.delays {
		out[k] = d
	}
	return out
}
