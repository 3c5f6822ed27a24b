package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// readLoad is the HTTP load generator process (this binary as "read-load"):
// conns keep-alive connections cycling through the paths, either as fast as
// they go (rate 0, closed loop) or at a rate (open loop: requests are due as
// the arrivals of a Poisson process, the way pgbench -R schedules, and a
// request's latency counts from when it was due, so a slow answer cannot
// hide the requests it held back).
//
// It is built like wrk, because the generator shares the two cores with the
// API and PostgreSQL and every microsecond it spends is taken from them: one
// thread, non-blocking sockets and epoll, requests serialized once, answers
// parsed in place (status line and Content-Length). The Go version it
// replaced (a goroutine a connection) cost ~80 us of CPU a request, vegeta
// before it ~160 us; this one costs about what wrk does. It waits for the
// next due request with epoll_pwait2, whose timeout is in nanoseconds (Go's
// own timers wake an idle process at a 1 ms granularity), so requests leave
// within microseconds of their time. It prints a readResult as JSON.
func readLoad(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("read-load", flag.ContinueOnError)
	apiURL := fs.String("api", "", "base URL of the API (loopback)")
	pathsFile := fs.String("paths", "", `file of requests, one a line: a path to GET, or "POST <path> <body>"`)
	rate := fs.Int("rate", 0, "requests per second (0: as fast as the connections go)")
	conns := fs.Int("conns", 16, "connections")
	d := fs.Duration("duration", 10*time.Second, "how long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	u, err := url.Parse(*apiURL)
	if err != nil || u.Scheme != "http" || u.Hostname() != "127.0.0.1" {
		return fmt.Errorf("read-load: %q is not a loopback http URL", *apiURL)
	}
	addr, err := netip.ParseAddrPort(u.Host)
	if err != nil {
		return fmt.Errorf("read-load: %q: %w", u.Host, err)
	}
	b, err := os.ReadFile(*pathsFile)
	if err != nil {
		return err
	}
	var requests [][]byte
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		requests = append(requests, httpRequest(line, u.Host))
	}
	if *conns < 1 || *rate < 0 {
		return errors.New("read-load: need conns >= 1 and rate >= 0")
	}
	runtime.LockOSThread()
	g, err := newLoadGen(addr, *conns, requests)
	if err != nil {
		return err
	}
	defer g.close()
	res, err := g.run(ctx, *rate, *d)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// httpRequest serializes one line of a paths file: a path to GET, or
// "POST <path> <JSON body>" (a batch-get).
func httpRequest(line, host string) []byte {
	if rest, ok := strings.CutPrefix(line, "POST "); ok {
		path, body, _ := strings.Cut(rest, " ")
		return []byte("POST " + path + " HTTP/1.1\r\nHost: " + host + "\r\nContent-Type: application/json\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	}
	return []byte("GET " + line + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n")
}

// loadGen drives keep-alive HTTP/1.1 connections from one thread.
type loadGen struct {
	addr     netip.AddrPort
	epfd     int
	conns    []*genConn
	byFD     map[int32]*genConn
	idle     []*genConn
	requests [][]byte
	next     int // index of the next request path
	lats     []time.Duration
	errors   int
}

// genConn is one connection and the answer it is reading.
type genConn struct {
	fd    int
	due   time.Time // when the request in flight was due (zero: idle)
	buf   []byte
	n     int // bytes of buf holding the answer so far
	hdrs  int // length of the status line and headers, once read (else 0)
	total int // hdrs + Content-Length, once known
	ok    bool
}

func newLoadGen(addr netip.AddrPort, conns int, requests [][]byte) (*loadGen, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("read-load: epoll: %w", err)
	}
	g := &loadGen{addr: addr, epfd: epfd, byFD: map[int32]*genConn{}, requests: requests}
	for range conns {
		c := &genConn{buf: make([]byte, 256<<10)}
		if err := g.dial(c); err != nil {
			g.close()
			return nil, err
		}
		g.conns = append(g.conns, c)
		g.idle = append(g.idle, c)
	}
	return g, nil
}

// dial (re)connects c: a blocking connect on loopback, then non-blocking.
func (g *loadGen) dial(c *genConn) error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("read-load: socket: %w", err)
	}
	if err := syscall.Connect(fd, &syscall.SockaddrInet4{Port: int(g.addr.Port()), Addr: g.addr.Addr().As4()}); err != nil {
		syscall.Close(fd)
		return fmt.Errorf("read-load: connect %s: %w", g.addr, err)
	}
	syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return err
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(fd)}
	if err := syscall.EpollCtl(g.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		syscall.Close(fd)
		return fmt.Errorf("read-load: epoll_ctl: %w", err)
	}
	c.fd, c.n, c.hdrs, c.total, c.due = fd, 0, 0, 0, time.Time{}
	g.byFD[int32(fd)] = c
	return nil
}

func (g *loadGen) close() {
	for _, c := range g.conns {
		syscall.Close(c.fd)
	}
	syscall.Close(g.epfd)
}

// fail counts an error on c and reconnects it (idle again when that works).
func (g *loadGen) fail(c *genConn) error {
	g.errors++
	delete(g.byFD, int32(c.fd))
	syscall.Close(c.fd)
	if err := g.dial(c); err != nil {
		return err
	}
	g.idle = append(g.idle, c)
	return nil
}

// send writes the next request on an idle connection.
func (g *loadGen) send(c *genConn, due time.Time) error {
	req := g.requests[g.next%len(g.requests)]
	g.next++
	c.due, c.n, c.hdrs, c.total = due, 0, 0, 0
	for len(req) > 0 {
		n, err := syscall.Write(c.fd, req)
		if err == syscall.EINTR {
			continue
		}
		if err != nil { // a request is ~100 bytes: a loopback socket never has less room
			return g.fail(c)
		}
		req = req[n:]
	}
	return nil
}

// receive reads what c has; it returns true when the answer is complete.
func (g *loadGen) receive(c *genConn) (done bool, err error) {
	for {
		if c.n == len(c.buf) {
			return false, errors.New("read-load: an answer over 256 KiB")
		}
		n, err := syscall.Read(c.fd, c.buf[c.n:])
		if err == syscall.EAGAIN {
			return false, nil
		}
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return false, errClosed
		}
		c.n += n
		if c.hdrs == 0 {
			end := bytes.Index(c.buf[:c.n], []byte("\r\n\r\n"))
			if end < 0 {
				continue
			}
			c.hdrs = end + 4
			length, status, err := parseHead(c.buf[:c.hdrs])
			if err != nil {
				return false, err
			}
			c.ok = status == 200
			c.total = c.hdrs + length
		}
		if c.n >= c.total {
			return true, nil
		}
	}
}

var errClosed = errors.New("connection closed")

// parseHead returns the Content-Length and status of an answer's head.
func parseHead(head []byte) (length, status int, err error) {
	line, rest, _ := bytes.Cut(head, []byte("\r\n"))
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return 0, 0, fmt.Errorf("read-load: bad status line %q", line)
	}
	if status, err = strconv.Atoi(string(line[9:12])); err != nil {
		return 0, 0, fmt.Errorf("read-load: bad status line %q", line)
	}
	length = -1
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		if k, v, ok := bytes.Cut(line, []byte(":")); ok && bytes.EqualFold(k, []byte("Content-Length")) {
			if length, err = strconv.Atoi(string(bytes.TrimSpace(v))); err != nil {
				return 0, 0, fmt.Errorf("read-load: bad Content-Length %q", v)
			}
		}
	}
	if length < 0 {
		if status == 304 || status == 204 {
			return 0, status, nil
		}
		return 0, 0, errors.New("read-load: an answer without Content-Length")
	}
	return length, status, nil
}

// run drives the connections for d: at rate requests a second, or as fast
// as they answer (rate 0); it stops early after readMaxRequests.
func (g *loadGen) run(ctx context.Context, rate int, d time.Duration) (readResult, error) {
	// Open loop: arrivals of a Poisson process of the rate (exponential
	// gaps), as pgbench -R schedules its transactions.
	rng := rand.New(rand.NewPCG(5, 6))
	gap := func() time.Duration {
		return time.Duration(rng.ExpFloat64() * float64(time.Second) / float64(max(rate, 1)))
	}
	start := time.Now()
	end := start.Add(d)
	var queue []time.Time // due requests waiting for an idle connection (open loop)
	scheduled := 0
	nextDue := start.Add(gap())
	events := make([]syscall.EpollEvent, len(g.conns))
	for ctx.Err() == nil {
		now := time.Now()
		if !now.Before(end) || scheduled >= readMaxRequests {
			break
		}
		if rate > 0 {
			for ; scheduled < readMaxRequests && !nextDue.After(now); scheduled++ {
				queue = append(queue, nextDue)
				nextDue = nextDue.Add(gap())
			}
			for len(queue) > 0 && len(g.idle) > 0 {
				c := g.idle[len(g.idle)-1]
				g.idle = g.idle[:len(g.idle)-1]
				if err := g.send(c, queue[0]); err != nil {
					return readResult{}, err
				}
				queue = queue[1:]
			}
		} else {
			for len(g.idle) > 0 && scheduled < readMaxRequests {
				c := g.idle[len(g.idle)-1]
				g.idle = g.idle[:len(g.idle)-1]
				scheduled++
				if err := g.send(c, now); err != nil {
					return readResult{}, err
				}
			}
		}
		// Wait for answers, or until the next request is due.
		wait := end.Sub(now)
		if rate > 0 && len(queue) == 0 {
			wait = min(wait, nextDue.Sub(now))
		}
		n, err := epollWait(g.epfd, events, max(wait, 0))
		if err != nil {
			return readResult{}, fmt.Errorf("read-load: epoll_wait: %w", err)
		}
		for _, ev := range events[:n] {
			c := g.byFD[ev.Fd]
			if c == nil || c.due.IsZero() {
				continue // an idle connection closed by the server: found when next used
			}
			done, err := g.receive(c)
			if err != nil {
				if errors.Is(err, errClosed) {
					if err := g.fail(c); err != nil {
						return readResult{}, err
					}
					continue
				}
				return readResult{}, err
			}
			if !done {
				continue
			}
			if c.ok {
				g.lats = append(g.lats, time.Since(c.due))
			} else {
				g.errors++
			}
			c.due = time.Time{}
			g.idle = append(g.idle, c)
		}
	}
	elapsed := time.Since(start)
	if len(g.lats) == 0 {
		return readResult{}, errors.New("read-load: no successful request")
	}
	res := readResult{Requests: len(g.lats) + g.errors, Errors: g.errors, QPS: float64(len(g.lats)) / elapsed.Seconds()}
	slices.Sort(g.lats)
	res.setLatencies(g.lats)
	return res, nil
}

// sysEpollPwait2 is epoll_pwait2 (Linux 5.11), the same number on every
// architecture Go supports.
const sysEpollPwait2 = 441

// epollWait waits up to timeout for events, with a nanosecond timeout
// (epoll_pwait2), or a millisecond one on kernels without it.
func epollWait(epfd int, events []syscall.EpollEvent, timeout time.Duration) (int, error) {
	ts := syscall.NsecToTimespec(int64(timeout))
	for {
		n, _, errno := syscall.Syscall6(sysEpollPwait2, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])),
			uintptr(len(events)), uintptr(unsafe.Pointer(&ts)), 0, 0)
		switch errno {
		case 0:
			return int(n), nil
		case syscall.EINTR:
			return 0, nil
		case syscall.ENOSYS:
			ms := int((timeout + time.Millisecond - 1) / time.Millisecond)
			n, err := syscall.EpollWait(epfd, events, ms)
			if err == syscall.EINTR {
				return 0, nil
			}
			return n, err
		default:
			return 0, errno
		}
	}
}
