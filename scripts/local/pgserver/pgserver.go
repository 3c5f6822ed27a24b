// Package pgserver runs a private PostgreSQL 15 server for the local stack and
// for tests: Debian's postgresql-15 binaries, an own data directory, listening
// only on 127.0.0.1 on a port of its own, trust authentication on loopback.
//
// It is the local stand-in for the Aurora PostgreSQL clusters of the AWS
// deployment (one server, a database per shard plus one control database).
// The data directory survives restarts. The server is configured from the
// start for streaming replication (wal_level=replica, max_wal_senders,
// hot_standby, a replication line in pg_hba.conf), so that StartReplica can
// add hot-standby read replicas.
//
// When the calling process runs as root, initdb and postgres run as the
// "postgres" system user (PostgreSQL refuses to run as root); the data
// directory is owned by that user, and the directories above it are given the
// search (x) permission for others when they lack it, so that the server can
// reach its data directory (t.TempDir() creates 0700 directories).
package pgserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Options configures Start.
type Options struct {
	// DataDir is the cluster's data directory (required). When it does not
	// exist or is empty, a new cluster is made there (trust authentication on
	// loopback, superuser "postgres", UTF8, locale C): a copy of a template
	// cluster that initdb makes once per machine under os.TempDir(). When it already holds
	// a PostgreSQL 15 cluster, that cluster is reused, so data survives
	// restarts; a postmaster.pid left behind by a killed run is cleared.
	//
	// Next to it, Start keeps a run directory DataDir+".run" holding the
	// server log (postgres.log) and, when the path is short enough, the unix
	// socket; otherwise the socket goes to a private temporary directory.
	DataDir string
	// Port is the TCP port on 127.0.0.1; 0 picks a free one on every start.
	Port int
	// Progress receives human-readable progress lines (install, initdb,
	// start, stop). May be nil.
	Progress io.Writer
	// NoFullPageWrites runs the server as Aurora's storage does: no
	// full-page image in the WAL for the first change of a page after a
	// checkpoint (full_page_writes=off). A crash of the server loses
	// nothing; a crash of the machine (or a kill in the middle of a page's
	// write) can leave a torn page that recovery cannot mend, so only the
	// benches, whose data is thrown away, set it (docs/PERFORMANCE.md,
	// "Issue 25: full-page images").
	NoFullPageWrites bool
}

// Server is a running PostgreSQL server started by Start or StartReplica.
type Server struct {
	binDir   string
	dataDir  string
	runDir   string
	sockDir  string
	tmpSock  bool // sockDir is a temporary directory removed on Stop
	logPath  string
	port     int
	progress io.Writer
	cred     *syscall.Credential
	primary  *Server // non-nil for a replica

	cmd  *exec.Cmd
	done chan struct{} // closed when the postmaster has exited
	werr error         // cmd.Wait result, valid after done is closed

	stopOnce sync.Once
	stopErr  error
}

// Fixed server settings, tuned for tests and a laptop. Replication settings
// are on from the start so that replicas can be added later.
var baseSettings = []string{
	"listen_addresses=127.0.0.1",
	"max_connections=200",
	"shared_buffers=128MB",
	"fsync=on",
	"wal_level=replica",
	"max_wal_senders=10",
	"max_replication_slots=10",
	"wal_keep_size=256MB",
	// Full-page images (the first change of a page after a checkpoint)
	// are most of the WAL of a day's scattered updates; lz4 shrinks them
	// several times for little CPU (docs/PERFORMANCE.md, "Apply"). Aurora
	// writes no full-page images at all.
	"wal_compression=lz4",
	"hot_standby=on",
	"logging_collector=off",
	"log_line_prefix=%m [%p] %q%u@%d ",
}

const (
	startTimeout    = 2 * time.Minute // generous: a busy 2-CPU machine is slow
	stopGracePeriod = 30 * time.Second
	maxSocketPath   = 90 // sun_path is 108 bytes; leave room for "/.s.PGSQL.NNNNN"
)

// Start starts a PostgreSQL server on opts.DataDir (installing PostgreSQL 15
// first when needed, see EnsureInstalled) and waits until it accepts
// connections. The caller must call Stop.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.DataDir == "" {
		return nil, errors.New("pgserver: Options.DataDir is required")
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	binDir, err := EnsureInstalled(ctx, progress)
	if err != nil {
		return nil, err
	}
	dataDir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("pgserver: data dir %q: %w", opts.DataDir, err)
	}
	cred, err := serverCredential()
	if err != nil {
		return nil, err
	}
	s := &Server{binDir: binDir, dataDir: dataDir, progress: progress, cred: cred}

	if err := s.prepareCluster(ctx, func(ctx context.Context, dir string) error {
		return s.initdb(ctx, dir)
	}); err != nil {
		return nil, err
	}
	if err := s.ensureHBA(); err != nil {
		return nil, err
	}
	var extra []string
	if opts.NoFullPageWrites {
		extra = append(extra, "full_page_writes=off")
	}
	if err := s.launch(ctx, opts.Port, extra); err != nil {
		return nil, err
	}
	return s, nil
}

// StartReplica creates (or reuses) a streaming hot-standby replica of s in
// dataDir, made with pg_basebackup -R -X stream, starts it on port (0 picks a
// free one) and waits until it accepts read-only connections. The replica
// always follows s at its current port, even when s was restarted on another
// port. The caller must call Stop on the replica (before or after the
// primary; a replica whose primary is gone keeps serving reads and retries
// the connection).
func (s *Server) StartReplica(ctx context.Context, dataDir string, port int) (*Server, error) {
	if dataDir == "" {
		return nil, errors.New("pgserver: replica data dir is required")
	}
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, fmt.Errorf("pgserver: replica data dir %q: %w", dataDir, err)
	}
	r := &Server{binDir: s.binDir, dataDir: abs, progress: s.progress, cred: s.cred, primary: s}
	if err := r.prepareCluster(ctx, func(ctx context.Context, dir string) error {
		fmt.Fprintf(r.progress, "pgserver: pg_basebackup from 127.0.0.1:%d into %s\n", s.port, abs)
		return r.runTool(ctx, "pg_basebackup",
			"-h", "127.0.0.1", "-p", strconv.Itoa(s.port), "-U", "postgres", "--no-password",
			"-D", dir, "-R", "-X", "stream", "-c", "fast")
	}); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(abs, "standby.signal")); err != nil {
		return nil, fmt.Errorf("pgserver: %s is not a standby (no standby.signal): %w", abs, err)
	}
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=postgres application_name=%s",
		s.port, filepath.Base(abs))
	if err := r.launch(ctx, port, []string{"primary_conninfo=" + conninfo}); err != nil {
		return nil, err
	}
	return r, nil
}

// Port returns the TCP port the server listens on (on 127.0.0.1).
func (s *Server) Port() int { return s.port }

// DataDir returns the absolute path of the server's data directory.
func (s *Server) DataDir() string { return s.dataDir }

// LogPath returns the path of the server's log file.
func (s *Server) LogPath() string { return s.logPath }

// URL returns a connection URL for database as the superuser "postgres":
// postgres://postgres@127.0.0.1:PORT/DATABASE?sslmode=disable.
func (s *Server) URL(database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// CreateDatabase creates database name unless it already exists. It is safe
// to call concurrently for the same name. It fails on a replica (read-only).
func (s *Server) CreateDatabase(ctx context.Context, name string) error {
	_, err := CreateDatabase(ctx, s.URL("postgres"), name)
	return err
}

// CreateDatabase creates database name on the server of serverURL (a URL of
// any of its databases) unless it exists, and returns the new database's
// URL. It is safe to call concurrently for the same name.
func CreateDatabase(ctx context.Context, serverURL, name string) (string, error) {
	if name == "" {
		return "", errors.New("pgserver: empty database name")
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", fmt.Errorf("pgserver: server url: %w", err)
	}
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return "", fmt.Errorf("pgserver: connect to create database %q: %w", name, err)
	}
	defer conn.Close(context.Background())

	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", fmt.Errorf("pgserver: look up database %q: %w", name, err)
	}
	if !exists {
		_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (pgErr.Code == "42P04" || pgErr.Code == "23505") {
			err = nil // created concurrently by someone else
		}
		if err != nil {
			return "", fmt.Errorf("pgserver: create database %q: %w", name, err)
		}
	}
	u.Path = "/" + name
	return u.String(), nil
}

// Stop shuts the server down in "fast" mode (SIGINT: active transactions are
// rolled back, a checkpoint is written) and waits for the postmaster to exit.
// If it has not exited after 30s it is sent SIGQUIT, then SIGKILL. Stop is
// idempotent.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.stopErr = s.stop()
	})
	return s.stopErr
}

func (s *Server) stop() error {
	defer s.cleanupSock()
	select {
	case <-s.done:
		return fmt.Errorf("pgserver: server on port %d had already exited: %v%s", s.port, s.werr, s.logTail(0))
	default:
	}
	fmt.Fprintf(s.progress, "pgserver: stopping server on port %d\n", s.port)
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(stopGracePeriod):
		_ = s.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
		return fmt.Errorf("pgserver: server on port %d did not shut down within %s", s.port, stopGracePeriod)
	}
	if s.werr != nil {
		return fmt.Errorf("pgserver: server on port %d exited with %v", s.port, s.werr)
	}
	return nil
}

// prepareCluster makes sure s.dataDir holds a cluster, creating it with
// create (into a temporary sibling directory, renamed into place only when
// complete, so an interrupted initdb never leaves a half-made cluster), and
// prepares the run directory.
func (s *Server) prepareCluster(ctx context.Context, create func(ctx context.Context, dir string) error) error {
	if err := s.allowTraverse(filepath.Dir(s.dataDir)); err != nil {
		return err
	}
	empty, err := dirEmptyOrMissing(s.dataDir)
	if err != nil {
		return err
	}
	if empty {
		tmp := s.dataDir + ".creating"
		if err := os.RemoveAll(tmp); err != nil {
			return fmt.Errorf("pgserver: remove leftover %s: %w", tmp, err)
		}
		if err := s.mkdirOwned(tmp); err != nil {
			return err
		}
		if err := create(ctx, tmp); err != nil {
			_ = os.RemoveAll(tmp)
			return err
		}
		if err := os.Remove(s.dataDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("pgserver: remove empty %s: %w", s.dataDir, err)
		}
		if err := os.Rename(tmp, s.dataDir); err != nil {
			return fmt.Errorf("pgserver: move new cluster into %s: %w", s.dataDir, err)
		}
	} else {
		v, err := os.ReadFile(filepath.Join(s.dataDir, "PG_VERSION"))
		if err != nil {
			return fmt.Errorf("pgserver: %s is neither empty nor a PostgreSQL data directory: %w", s.dataDir, err)
		}
		if got := strings.TrimSpace(string(v)); got != "15" {
			return fmt.Errorf("pgserver: %s holds a PostgreSQL %s cluster, want 15", s.dataDir, got)
		}
		if err := s.chownTree(s.dataDir); err != nil {
			return err
		}
		if err := os.Chmod(s.dataDir, 0o700); err != nil {
			return fmt.Errorf("pgserver: chmod %s: %w", s.dataDir, err)
		}
		fmt.Fprintf(s.progress, "pgserver: reusing cluster in %s\n", s.dataDir)
	}

	s.runDir = s.dataDir + ".run"
	if err := s.mkdirOwned(s.runDir); err != nil {
		return err
	}
	s.logPath = filepath.Join(s.runDir, "postgres.log")
	if len(s.runDir) <= maxSocketPath {
		s.sockDir = s.runDir
	} else {
		d, err := os.MkdirTemp("", "pgsock")
		if err != nil {
			return fmt.Errorf("pgserver: socket dir: %w", err)
		}
		if err := s.chown(d); err != nil {
			_ = os.RemoveAll(d)
			return err
		}
		s.sockDir, s.tmpSock = d, true
	}
	return s.clearStalePID()
}

// ensureHBA makes sure pg_hba.conf lets loopback replication connections in
// (initdb --auth=trust writes such a line; a reused cluster may lack it).
func (s *Server) ensureHBA() error {
	path := filepath.Join(s.dataDir, "pg_hba.conf")
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("pgserver: read pg_hba.conf: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[0] == "host" && f[1] == "replication" && f[3] == "127.0.0.1/32" {
			return nil
		}
	}
	add := "\n# added by pgserver: streaming replicas on loopback\nhost    replication     all             127.0.0.1/32            trust\n"
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("pgserver: open pg_hba.conf: %w", err)
	}
	if _, err := f.WriteString(add); err != nil {
		_ = f.Close()
		return fmt.Errorf("pgserver: append to pg_hba.conf: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("pgserver: close pg_hba.conf: %w", err)
	}
	return nil
}

// launch starts the postmaster and waits until it accepts connections. With
// port 0 a free port is picked, and picked again when another process grabs
// it first.
func (s *Server) launch(ctx context.Context, port int, extra []string) error {
	attempts := 1
	if port == 0 {
		attempts = 5
	}
	var lastErr error
	shmemWaits := 0
	for i := 0; i < attempts; i++ {
		p := port
		if p == 0 {
			var err error
			if p, err = freePort(); err != nil {
				return err
			}
		}
		err := s.launchOnce(ctx, p, extra)
		if err == nil {
			return nil
		}
		lastErr = err
		if errors.Is(err, errShmemInUse) && shmemWaits < 40 {
			// The backends of a killed postmaster still hold its shared
			// memory until they notice it died: wait for them (up to 20 s).
			shmemWaits++
			i--
			select {
			case <-ctx.Done():
				return errors.Join(lastErr, ctx.Err())
			case <-time.After(500 * time.Millisecond):
			}
			continue
		}
		if !errors.Is(err, errPortInUse) {
			break
		}
	}
	s.cleanupSock()
	return lastErr
}

var (
	errPortInUse  = errors.New("port in use")
	errShmemInUse = errors.New("the shared memory of an earlier server on this data directory is still in use")
)

func (s *Server) launchOnce(ctx context.Context, port int, extra []string) error {
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("pgserver: open server log: %w", err)
	}
	defer logf.Close() // the child keeps its own descriptor
	logStart, _ := logf.Seek(0, io.SeekEnd)

	args := []string{"-D", s.dataDir,
		"-c", "port=" + strconv.Itoa(port),
		"-c", "unix_socket_directories=" + s.sockDir,
	}
	for _, kv := range append(append([]string{}, baseSettings...), extra...) {
		args = append(args, "-c", kv)
	}
	cmd := exec.Command(filepath.Join(s.binDir, "postgres"), args...)
	cmd.Dir = s.dataDir
	cmd.Env = s.env()
	cmd.Stdout = logf
	cmd.Stderr = logf
	// SIGINT = fast shutdown, so a server whose parent died stops cleanly.
	cmd.SysProcAttr = sysProcAttr(s.cred, syscall.SIGINT)
	fmt.Fprintf(s.progress, "pgserver: starting postgres on 127.0.0.1:%d (data %s, log %s)\n", port, s.dataDir, s.logPath)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgserver: start postgres: %w", err)
	}
	s.cmd, s.port, s.done = cmd, port, make(chan struct{})
	go func() {
		s.werr = cmd.Wait()
		close(s.done)
	}()

	if err := s.waitReady(ctx); err != nil {
		select {
		case <-s.done:
		default:
			_ = cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-s.done:
			case <-time.After(5 * time.Second):
				_ = cmd.Process.Kill()
				<-s.done
			}
		}
		tail := s.logTail(logStart)
		if strings.Contains(tail, "could not bind") || strings.Contains(tail, "Address already in use") {
			return fmt.Errorf("pgserver: %w: %d%s", errPortInUse, port, tail)
		}
		if strings.Contains(tail, "pre-existing shared memory block") {
			return fmt.Errorf("pgserver: %w%s", errShmemInUse, tail)
		}
		return fmt.Errorf("%w%s", err, tail)
	}
	fmt.Fprintf(s.progress, "pgserver: ready on 127.0.0.1:%d\n", port)
	return nil
}

var errNotOurs = errors.New("a different server answers")

// ping connects and checks that the server answering is ours (another server
// may hold the port when ours failed to bind it).
func (s *Server) ping(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, s.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var dir string
	if err := conn.QueryRow(cctx, "SELECT current_setting('data_directory')").Scan(&dir); err != nil {
		return err
	}
	if filepath.Clean(dir) != s.dataDir {
		return fmt.Errorf("%w (data directory %s)", errNotOurs, dir)
	}
	return nil
}

func (s *Server) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-s.done:
			return fmt.Errorf("pgserver: postgres exited during startup: %v", s.werr)
		default:
		}
		err := s.ping(ctx)
		if err == nil {
			return nil
		}
		if errors.Is(err, errNotOurs) {
			// Another server answers on our port: ours failed to bind.
			select {
			case <-s.done:
			case <-time.After(2 * time.Second):
			}
			return fmt.Errorf("pgserver: %w: another server answers on port %d", errPortInUse, s.port)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("pgserver: waiting for postgres to accept connections: %w", ctx.Err())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgserver: postgres did not accept connections within %s: %w", startTimeout, err)
		}
		select {
		case <-ctx.Done():
		case <-s.done:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// clearStalePID removes a postmaster.pid left behind by a server that no
// longer runs (a killed run; its PID may since have been reused by an
// unrelated process, which would make postgres refuse to start). A postmaster
// that still runs on this directory is waited for when it is an orphan
// shutting down (its parent died), and reported otherwise.
func (s *Server) clearStalePID() error {
	pidFile := filepath.Join(s.dataDir, "postmaster.pid")
	deadline := time.Now().Add(15 * time.Second)
	for {
		b, err := os.ReadFile(pidFile)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return fmt.Errorf("pgserver: read %s: %w", pidFile, err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		pid, _ := strconv.Atoi(strings.TrimSpace(line))
		if pid <= 0 || !isPostgresProcess(pid, s.dataDir) {
			fmt.Fprintf(s.progress, "pgserver: removing stale postmaster.pid (pid %d is not a postgres on this data directory)\n", pid)
			if err := os.Remove(pidFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("pgserver: remove stale %s: %w", pidFile, err)
			}
			break
		}
		if ppid := parentPID(pid); ppid > 1 && processAlive(ppid) {
			return fmt.Errorf("pgserver: %s is in use by a running postgres (pid %d, parent %d); stop it first", s.dataDir, pid, ppid)
		}
		// An orphaned postmaster of a killed run: ask it to shut down.
		if time.Now().After(deadline) {
			return fmt.Errorf("pgserver: orphaned postgres (pid %d) on %s did not exit", pid, s.dataDir)
		}
		fmt.Fprintf(s.progress, "pgserver: asking orphaned postgres (pid %d) on %s to shut down\n", pid, s.dataDir)
		_ = syscall.Kill(pid, syscall.SIGINT)
		time.Sleep(200 * time.Millisecond)
	}
	// Socket lock files in our private socket dir can be stale the same way.
	matches, _ := filepath.Glob(filepath.Join(s.sockDir, ".s.PGSQL.*"))
	for _, m := range matches {
		_ = os.Remove(m)
	}
	return nil
}

func (s *Server) cleanupSock() {
	if s.tmpSock {
		_ = os.RemoveAll(s.sockDir)
	}
}

// runTool runs a PostgreSQL client or admin program from binDir as the server
// user, failing with its output when it fails.
func (s *Server) runTool(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(s.binDir, name), args...)
	cmd.Dir = "/"
	cmd.Env = s.env()
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.SysProcAttr = sysProcAttr(s.cred, syscall.SIGKILL)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pgserver: %s: %w\n%s", name, err, strings.TrimSpace(out.String()))
	}
	return nil
}

// env is the whole environment of the server processes: nothing is inherited,
// so PG* variables of the caller cannot redirect them.
func (s *Server) env() []string {
	home := s.dataDir
	return []string{
		"PATH=" + s.binDir + ":/usr/local/bin:/usr/bin:/bin",
		"LANG=C", "LC_ALL=C", "HOME=" + home,
	}
}

func (s *Server) logTail(from int64) string {
	f, err := os.Open(s.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size()-from > 4000 {
		from = fi.Size() - 4000
	}
	_, _ = f.Seek(from, io.SeekStart)
	b, _ := io.ReadAll(f)
	if len(bytes.TrimSpace(b)) == 0 {
		return ""
	}
	return "\n--- " + s.logPath + " ---\n" + strings.TrimSpace(string(b))
}

// serverCredential returns the credential to run server processes with: the
// postgres user when we are root, nil (ourselves) otherwise.
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgserver: running as root needs the \"postgres\" system user (created by the postgresql-15 package): %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("pgserver: bad uid/gid %q/%q for user postgres", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

func (s *Server) mkdirOwned(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pgserver: create %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("pgserver: chmod %s: %w", dir, err)
	}
	return s.chown(dir)
}

func (s *Server) chown(path string) error {
	if s.cred == nil {
		return nil
	}
	if err := os.Lchown(path, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
		return fmt.Errorf("pgserver: chown %s to postgres: %w", path, err)
	}
	return nil
}

// chownTree gives a reused data directory to the server user when it is not
// already owned by it (for example a directory copied by root).
func (s *Server) chownTree(dir string) error {
	if s.cred == nil {
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("pgserver: stat %s: %w", dir, err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == s.cred.Uid {
		return nil
	}
	fmt.Fprintf(s.progress, "pgserver: giving %s to user postgres\n", dir)
	return filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return s.chown(path)
	})
}

// allowTraverse makes dir and its ancestors searchable by the server user,
// adding only the x bit for others where it is missing.
func (s *Server) allowTraverse(dir string) error {
	if s.cred == nil {
		return os.MkdirAll(dir, 0o755)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("pgserver: create %s: %w", dir, err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("pgserver: stat %s: %w", d, err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			st, _ := fi.Sys().(*syscall.Stat_t)
			if st == nil || st.Uid != s.cred.Uid {
				fmt.Fprintf(s.progress, "pgserver: chmod o+x %s so that user postgres can reach its data directory\n", d)
				if err := os.Chmod(d, fi.Mode().Perm()|0o001); err != nil {
					return fmt.Errorf("pgserver: chmod o+x %s: %w", d, err)
				}
			}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

func dirEmptyOrMissing(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("pgserver: read %s: %w", dir, err)
	}
	return len(entries) == 0, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgserver: pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// isPostgresProcess reports whether pid is a running postgres whose command
// line mentions dataDir.
func isPostgresProcess(pid int, dataDir string) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return false
	}
	cmdline := string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
	return strings.Contains(cmdline, "postgres") && strings.Contains(cmdline, dataDir)
}

func parentPID(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...; comm may contain spaces and parentheses.
	rest := string(b)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest)
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
