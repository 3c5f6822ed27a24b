package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// tableRow is one line of a result table: a figure, our value, the
// reference's value and the ratio (ours over the reference's, or as noted).
type tableRow struct {
	figure, ours, ref, ratio string
}

// printTable prints rows as a Markdown table, ready for the README.
func printTable(w io.Writer, title string, rows []tableRow) {
	cells := make([][]string, len(rows))
	for i, r := range rows {
		cells[i] = []string{r.figure, r.ours, r.ref, r.ratio}
	}
	printColumns(w, title, []string{"figure", "ours", "reference", "ratio"}, cells)
}

// printColumns prints a Markdown table with the given header, the first
// column left-aligned, the others right-aligned.
func printColumns(w io.Writer, title string, header []string, rows [][]string) {
	fmt.Fprintf(w, "\n%s\n\n", title)
	fmt.Fprintf(w, "| %s |\n|---%s|\n", strings.Join(header, " | "), strings.Repeat("|---:", len(header)-1))
	for _, r := range rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
}

// machine describes where the bench ran, for the table's caption.
func machine() string {
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		fmt.Sscanf(strings.TrimPrefix(strings.Split(string(b), "\n")[0], "MemTotal:"), "%d", &kb)
		mem = fmt.Sprintf(", %.0f GiB", float64(kb)/(1<<20))
	}
	return fmt.Sprintf("%s, %d cores%s, %s, %s, %s", time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), mem, model, runtime.Version(), "load average at the end "+loadAverage())
}

func ratio(ours, ref float64) string {
	if ref == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", ours/ref)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func rate(n float64, d time.Duration) float64 { return n / d.Seconds() }

func fmtRate(v float64, unit string) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM %s", v/1e6, unit)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk %s", v/1e3, unit)
	}
	return fmt.Sprintf("%.0f %s", v, unit)
}

// measured is a finished child process: how long it ran, its CPU time
// and its peak RSS.
type measured struct {
	elapsed time.Duration
	maxRSS  int64         // bytes
	cpu     time.Duration // user + system
	stdout  []byte
}

// runMeasured runs cmd to completion and measures its peak resident set
// size: the high-water mark VmHWM of /proc/PID/status, polled every
// millisecond until the process exits (it only grows, so the last reading is
// the peak up to a millisecond before exit). rusage's ru_maxrss is not used:
// Go starts children with vfork, and Linux then counts the parent's resident
// memory at the time of the exec in the child's ru_maxrss (comm shows ~100 MiB
// instead of ~2 MiB). A Go child of this bench reports its own VmHWM at exit,
// which the caller prefers.
func runMeasured(cmd *exec.Cmd) (measured, error) {
	var out strings.Builder
	if cmd.Stdout == nil {
		cmd.Stdout = &out
	}
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return measured{}, err
	}
	done := make(chan struct{})
	peak := make(chan int64, 1)
	go func() {
		var hwm int64
		status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			if v := readHWM(status); v > hwm {
				hwm = v
			}
			select {
			case <-done:
				peak <- hwm
				return
			case <-t.C:
			}
		}
	}()
	err := cmd.Wait()
	m := measured{elapsed: time.Since(start)}
	close(done)
	m.maxRSS = <-peak
	if ps := cmd.ProcessState; ps != nil {
		m.cpu = ps.UserTime() + ps.SystemTime()
	}
	m.stdout = []byte(out.String())
	if err != nil {
		return m, fmt.Errorf("%s: %w", strings.Join(cmd.Args, " "), err)
	}
	return m, nil
}

// readHWM returns VmHWM of a /proc status file in bytes (0 when unreadable).
func readHWM(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(rest), "%d", &kb)
			return kb * 1024
		}
	}
	return 0
}

// selfHWM is this process's peak RSS so far, in bytes.
func selfHWM() int64 { return readHWM("/proc/self/status") }

// loadAverage is the 1, 5 and 15 minute load averages ("?" off Linux).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
