package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// meter shows the progress of one long step on stderr: an animated bar on
// a terminal, and otherwise (a log, a CI job) a plain line at every tenth
// of the way, so the output stays readable.
type meter struct {
	bar *progressbar.ProgressBar // on a terminal

	mu        sync.Mutex
	w         io.Writer
	label     string
	bytes     bool
	total     int64
	done      int64
	nextTenth int64
	start     time.Time
}

// newMeter starts a meter of total units (bytes when bytes is set) named label.
func (c *Call) newMeter(label string, total int64, bytes bool) *meter {
	m := &meter{w: c.Stderr, label: label, bytes: bytes, total: total, nextTenth: 1, start: time.Now()}
	if c.Terminal && total > 0 {
		opts := []progressbar.Option{
			progressbar.OptionSetWriter(c.Stderr),
			progressbar.OptionSetDescription(label),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100 * time.Millisecond),
			progressbar.OptionShowCount(),
			progressbar.OptionSetRenderBlankState(true),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(c.Stderr) }),
		}
		if bytes {
			opts = append(opts, progressbar.OptionShowBytes(true), progressbar.OptionShowTotalBytes(true))
		} else {
			// Counts move in jumps between polls: an estimate of the time
			// left from them misleads (it read 0s with 70% to go).
			opts = append(opts, progressbar.OptionSetPredictTime(false), progressbar.OptionSetElapsedTime(true))
		}
		m.bar = progressbar.NewOptions64(total, opts...)
	}
	return m
}

// Write counts p as done, so that a meter can sit behind an io.TeeReader.
func (m *meter) Write(p []byte) (int, error) {
	m.Add(int64(len(p)))
	return len(p), nil
}

// Add counts n more units done.
func (m *meter) Add(n int64) { m.Set(m.doneNow() + n) }

func (m *meter) doneNow() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.done
}

// Set sets the units done so far.
func (m *meter) Set(done int64) {
	if m.bar != nil {
		m.bar.Set64(min(done, m.total))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.done = done
	if m.bar != nil || m.total <= 0 {
		return
	}
	if done*10 >= m.nextTenth*m.total && m.nextTenth <= 10 {
		for done*10 >= m.nextTenth*m.total && m.nextTenth <= 10 {
			m.nextTenth++
		}
		fmt.Fprintf(m.w, "%s: %3d%% %s\n", m.label, done*100/m.total, m.amount(done))
	}
}

// amount is "12.0 MiB of 40.0 MiB, 30.1 MiB/s" or "3 of 12".
func (m *meter) amount(done int64) string {
	if !m.bytes {
		return fmt.Sprintf("(%d of %d)", done, m.total)
	}
	s := fmt.Sprintf("(%s of %s", byteSize(done), byteSize(m.total))
	if secs := time.Since(m.start).Seconds(); secs > 0.05 {
		s += fmt.Sprintf(", %s/s", byteSize(int64(float64(done)/secs)))
	}
	return s + ")"
}

// Restart starts the meter again from zero (a retried transfer).
func (m *meter) Restart() {
	if m.bar != nil {
		m.bar.Reset()
	}
	m.mu.Lock()
	m.done, m.nextTenth, m.start = 0, 1, time.Now()
	m.mu.Unlock()
}

// Finish ends the meter's line on a terminal.
func (m *meter) Finish() {
	if m.bar != nil {
		m.bar.Finish()
		m.bar.Exit()
	}
}

// byteSize is n in binary units: "512 B", "1.5 KiB", "5.0 GiB".
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
