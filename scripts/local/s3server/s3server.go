// Package s3server is the local stand-in for Amazon S3: gofakes3 serving
// path-style S3 requests on loopback, objects kept on disk (gofakes3's
// s3afero backend), with S3 event notifications.
//
// On top of gofakes3 it adds what the snapshot upload flow relies on:
//
//   - S3 event notifications: after a successful PutObject, CopyObject or
//     CompleteMultipartUpload of a key under Options.NotifyPrefix, Notify is
//     called with the event S3 would send (events.S3Event, eventVersion 2.1,
//     URL-encoded key, size, eTag, increasing sequencer). Delivery is
//     synchronous: when Notify fails, the request answers 503 SlowDown so that
//     the client retries it. The object is stored nevertheless. S3 itself
//     would answer 200 and retry the delivery on its own; either way a
//     consumer can see the same object-created event more than once and must
//     be idempotent.
//   - An upload size limit (Options.MaxUploadBytes): larger PUT bodies are
//     refused with 413 and an S3-style EntityTooLarge XML error, and nothing
//     is stored.
//   - Authentication, as S3 does it: every request carries an AWS Signature
//     Version 4 made with the server's one key pair (Options.AccessKeyID,
//     Options.SecretAccessKey; "local"/"local" by default, the pair
//     NewS3Client and the local stack sign with), either in a presigned
//     URL's query or in an Authorization header. The server recomputes it
//     with the AWS SDK's own signer over the canonical request: the method,
//     the path as sent, the query (less X-Amz-Signature), the values of
//     the headers the request lists as signed, and the payload hash
//     (UNSIGNED-PAYLOAD for a presigned URL, X-Amz-Content-Sha256 for a
//     header-signed request). Anything else gets S3's 403
//     SignatureDoesNotMatch: a URL re-pointed at another key (same query,
//     another path), a signed header dropped or given another value (the
//     "If-None-Match: *" of a single-use upload URL), another key pair.
//     Unsigned requests get 403 AccessDenied (browser-form POST uploads
//     too), an unknown key id 403 InvalidAccessKeyId, a header-signed
//     request more than 15 minutes off the clock 403 RequestTimeTooSkewed,
//     a session token 400 InvalidToken. A header-signed body whose SHA-256
//     is not its X-Amz-Content-Sha256 gets 400 XAmzContentSHA256Mismatch
//     and nothing is stored; streaming (aws-chunked) payloads, which the
//     SDK sends only over https, get 501 NotImplemented. CORS preflights
//     need no signature, as on S3.
//   - Presigned URL expiry: a request whose query carries X-Amz-Date and
//     X-Amz-Expires is refused with 403 AccessDenied "Request has expired"
//     once expired (checked before the signature, as S3 does).
//   - Conditional writes: a PutObject with "If-None-Match: *" on a key that
//     exists gets 412 PreconditionFailed and changes nothing (checked before
//     the body is read, and again atomically when the object is stored, by
//     gofakes3's backend), as S3's conditional writes do.
//   - Atomic puts: an upload is spooled first (in memory up to 16 MiB, to a
//     temporary file beyond), so an interrupted upload never leaves a
//     truncated object behind (and never damages the previous version of
//     the key).
//   - Timeouts, per connection: the request line and headers within
//     Options.ReadHeaderTimeout, a keep-alive connection idle for at most
//     Options.IdleTimeout, and no read of a body nor write of an answer
//     stalled for more than Options.BodyTimeout (400 RequestTimeout, as S3's
//     idle-socket rule); there is no bound on a whole request, so a slow
//     multi-GB upload that keeps moving is never cut.
//
// Multipart parts are kept in memory until the upload completes (gofakes3's
// uploader), so an unfinished multipart upload does not survive a restart.
package s3server

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3afero"

	"github.com/retailcatalog/catalog/events/message"
)

// Region is the AWS region reported in events and used by NewS3Client.
const Region = "us-east-1"

// notifyTimeout bounds one Notify call.
const notifyTimeout = 30 * time.Second

// Options configures Start.
type Options struct {
	// Dir holds the objects (required). They survive a restart on the same
	// Dir. Layout: buckets/<bucket>/<key> and metadata/ (s3afero), tmp/ for
	// uploads in progress.
	Dir string
	// Addr is the listen address; "127.0.0.1:0" (a free loopback port) when
	// empty.
	Addr string
	// Buckets are created when missing.
	Buckets []string
	// MaxUploadBytes limits the body of a PutObject or UploadPart and the
	// size of a completed multipart upload; 0 means no limit. A PUT whose
	// Content-Length (or X-Amz-Decoded-Content-Length) is larger, or whose
	// body turns out larger, gets 413 EntityTooLarge and nothing is stored.
	MaxUploadBytes int64
	// NotifyPrefix selects the keys whose creation calls Notify, for example
	// "snapshots/". Empty selects every key.
	NotifyPrefix string
	// Notify, when set, receives an S3 event after every successful
	// PutObject, CopyObject or CompleteMultipartUpload of a key under
	// NotifyPrefix, before the client gets its answer. An error makes the
	// request answer 503 SlowDown (see the package documentation).
	Notify func(ctx context.Context, ev events.S3Event) error
	// Logger receives request errors, notification failures and gofakes3's
	// own log. Nil discards.
	Logger *slog.Logger
	// AccessKeyID and SecretAccessKey are the one key pair every request
	// must be signed with [DefaultAccessKeyID, DefaultSecretAccessKey].
	AccessKeyID, SecretAccessKey string
	// ReadHeaderTimeout bounds the reading of a request's line and headers
	// [10s]; IdleTimeout is how long a keep-alive connection may wait for
	// its next request [30s].
	ReadHeaderTimeout, IdleTimeout time.Duration
	// BodyTimeout is how long a request body, or a response, may go
	// without a byte moving [20s]: S3's rule too (400 RequestTimeout, "Your
	// socket connection to the server was not read from or written to
	// within the timeout period"; S3 does not publish its value, 20 s is
	// ours). It is a deadline per read and per write, not for
	// the whole request: a PUT of several GB that keeps moving, however
	// slowly, is never cut, where a fixed ReadTimeout would cut every
	// upload slower than size/timeout.
	BodyTimeout time.Duration
}

// maxHeaderBytes bounds a request's line and headers (S3 takes 8 KB of
// headers; a key is at most 1,024 bytes, 3 KB escaped).
const maxHeaderBytes = 16 << 10

// Server is a running S3 stand-in.
type Server struct {
	opts     Options
	log      *slog.Logger
	auth     *authenticator
	backend  *spoolBackend
	listener net.Listener
	http     *http.Server
	served   chan error

	seqMu   sync.Mutex
	lastSeq uint64

	tagsMu sync.Mutex
	tags   map[string][]objectTag // "bucket/key" -> the object's tags (see serveTagging)

	closeOnce sync.Once
	closeErr  error
}

// Start opens the object store in opts.Dir, creates opts.Buckets and serves
// S3 on opts.Addr until Close.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Dir == "" {
		return nil, errors.New("s3server: Options.Dir is required")
	}
	if opts.MaxUploadBytes < 0 {
		return nil, fmt.Errorf("s3server: negative MaxUploadBytes %d", opts.MaxUploadBytes)
	}
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.ReadHeaderTimeout <= 0 {
		opts.ReadHeaderTimeout = 10 * time.Second
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 30 * time.Second
	}
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = 20 * time.Second
	}
	if opts.AccessKeyID == "" && opts.SecretAccessKey == "" {
		opts.AccessKeyID, opts.SecretAccessKey = DefaultAccessKeyID, DefaultSecretAccessKey
	}
	if opts.AccessKeyID == "" || opts.SecretAccessKey == "" {
		return nil, errors.New("s3server: AccessKeyID and SecretAccessKey go together")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("s3server: dir %q: %w", opts.Dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("s3server: create %s: %w", dir, err)
	}
	fs, err := s3afero.FsPath(dir, 0)
	if err != nil {
		return nil, fmt.Errorf("s3server: open %s: %w", dir, err)
	}
	inner, err := s3afero.MultiBucket(fs)
	if err != nil {
		return nil, fmt.Errorf("s3server: open object store in %s: %w", dir, err)
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.RemoveAll(tmp); err != nil { // uploads cut off by a crash
		return nil, fmt.Errorf("s3server: clear %s: %w", tmp, err)
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("s3server: create %s: %w", tmp, err)
	}
	backend := &spoolBackend{Backend: inner, tmpDir: tmp, max: opts.MaxUploadBytes, bucketsDir: filepath.Join(dir, "buckets")}
	for _, b := range opts.Buckets {
		exists, err := backend.BucketExists(b)
		if err != nil {
			return nil, fmt.Errorf("s3server: check bucket %s: %w", b, err)
		}
		if !exists {
			if err := backend.CreateBucket(b); err != nil {
				return nil, fmt.Errorf("s3server: create bucket %s: %w", b, err)
			}
		}
	}

	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("s3server: listen on %s: %w", opts.Addr, err)
	}
	s := &Server{
		opts:     opts,
		log:      log,
		auth:     newAuthenticator(opts.AccessKeyID, opts.SecretAccessKey, Region),
		backend:  backend,
		listener: l,
		served:   make(chan error, 1),
		lastSeq:  uint64(time.Now().UnixNano()),
	}
	faker := gofakes3.New(backend,
		gofakes3.WithLogger(slogLogger{log}),
	)
	s.http = &http.Server{
		Handler:           s.withBodyTimeout(s.middleware(faker.Server())),
		ReadHeaderTimeout: opts.ReadHeaderTimeout,
		IdleTimeout:       opts.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		// No ReadTimeout or WriteTimeout: withBodyTimeout bounds every
		// read and write instead (Options.BodyTimeout).
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	go func() { s.served <- s.http.Serve(l) }()
	log.Info("s3server listening", "endpoint", s.Endpoint(), "dir", dir)
	return s, nil
}

// Endpoint returns the server's base URL, http://127.0.0.1:PORT, for S3
// clients (AWS_ENDPOINT_URL_S3) with path-style addressing.
func (s *Server) Endpoint() string {
	return "http://" + s.listener.Addr().String()
}

// Close stops accepting requests, waits up to 5s for requests in flight and
// closes the server. Stored objects stay in Dir. Close is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.http.Shutdown(ctx); err != nil {
			_ = s.http.Close()
			s.closeErr = fmt.Errorf("s3server: shutdown: %w", err)
		}
		if err := <-s.served; err != nil && !errors.Is(err, http.ErrServerClosed) && s.closeErr == nil {
			s.closeErr = fmt.Errorf("s3server: serve: %w", err)
		}
	})
	return s.closeErr
}

// NewS3Client returns an S3 client for endpoint: path-style addressing,
// region us-east-1, the default key pair (DefaultAccessKeyID), and request checksums
// calculated and response checksums validated only when an operation
// requires it (gofakes3 does not implement the newer flexible checksums). The
// process environment and the shared AWS config files are deliberately not
// read, so that an AWS_PROFILE or AWS_ENDPOINT_URL_* of the developer can
// never point the local stack at real AWS.
//
// Over http:// PutObject needs a seekable body (bytes.Reader, *os.File) or
// an unsigned payload.
func NewS3Client(ctx context.Context, endpoint string) (*s3.Client, error) {
	if endpoint == "" {
		return nil, errors.New("s3server: empty S3 endpoint")
	}
	cfg := aws.Config{
		Region:                     Region,
		Credentials:                aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(DefaultAccessKeyID, DefaultSecretAccessKey, "")),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
	}), nil
}

// operation classifies a request for the middleware.
type operation int

const (
	opOther operation = iota
	opPut
	opCopy
	opUploadPart
	opComplete
)

// eventName is the S3 event name of an object-creating operation.
func (o operation) eventName() string {
	switch o {
	case opPut:
		return "ObjectCreated:Put"
	case opCopy:
		return "ObjectCreated:Copy"
	case opComplete:
		return "ObjectCreated:CompleteMultipartUpload"
	}
	return ""
}

func classify(r *http.Request, key string) operation {
	if key == "" {
		return opOther
	}
	q := r.URL.Query()
	switch r.Method {
	case http.MethodPut:
		if q.Has("uploadId") {
			return opUploadPart
		}
		for k := range q {
			lk := strings.ToLower(k)
			if !strings.HasPrefix(lk, "x-amz-") && lk != "x-id" {
				return opOther // a subresource such as ?tagging or ?acl
			}
		}
		if r.Header.Get("X-Amz-Copy-Source") != "" {
			return opCopy
		}
		return opPut
	case http.MethodPost:
		if q.Has("uploadId") {
			return opComplete
		}
	}
	return opOther
}

// withBodyTimeout gives every read of a request body and every write of a
// response a deadline of Options.BodyTimeout from that read or write (see
// there), and answers a body that stopped coming with S3's 400
// RequestTimeout.
func (s *Server) withBodyTimeout(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		// A deadline of the previous request on this connection must not
		// carry over (the server resets only those it sets itself).
		_ = rc.SetWriteDeadline(time.Time{})
		dw := &deadlineWriter{ResponseWriter: w, rc: rc, d: s.opts.BodyTimeout}
		if r.Body != nil && r.Body != http.NoBody {
			body := &deadlineBody{body: r.Body, rc: rc, d: s.opts.BodyTimeout}
			r = r.WithContext(context.WithValue(r.Context(), deadlineBodyKey{}, body))
			r.Body = body
		}
		next.ServeHTTP(dw, r)
	})
}

type deadlineBodyKey struct{}

// bodyTimedOut reports whether r's body stopped coming for BodyTimeout.
func bodyTimedOut(r *http.Request) bool {
	b, _ := r.Context().Value(deadlineBodyKey{}).(*deadlineBody)
	return b != nil && b.timedOut
}

// refuseTimedOut answers a request whose body stopped coming.
func refuseTimedOut(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Connection", "close")
	writeError(w, r, http.StatusBadRequest, "RequestTimeout",
		"Your socket connection to the server was not read from or written to within the timeout period. Idle connections will be closed.")
}

// deadlineBody is a request body each read of which has its own deadline.
type deadlineBody struct {
	body     io.ReadCloser
	rc       *http.ResponseController
	d        time.Duration
	timedOut bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	_ = b.rc.SetReadDeadline(time.Now().Add(b.d))
	n, err := b.body.Read(p)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		b.timedOut = true
	}
	return n, err
}

func (b *deadlineBody) Close() error { return b.body.Close() }

// deadlineWriter is a response each write of which has its own deadline.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// maxVerifiedBody bounds the bodies of requests other than PutObject and
// UploadPart (XML documents: a multipart completion, tags, a batch
// delete), which are read whole and checked against their signed SHA-256
// before anything acts on them.
const maxVerifiedBody = 8 << 20

// middleware wraps gofakes3 with the signature and expiry checks, the
// upload limit and notifications.
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code, status, msg := checkPresignExpiry(r.URL.Query(), time.Now()); code != "" {
			refuse(w, r, status, code, msg)
			return
		}
		bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		op := classify(r, key)
		var check *payloadCheck
		if !isPreflight(r) {
			var aerr *authError
			if check, aerr = s.auth.verify(r); aerr != nil {
				s.log.Debug("s3server: request refused", "method", r.Method, "path", r.URL.Path, "code", aerr.code, "message", aerr.message)
				refuse(w, r, aerr.status, aerr.code, aerr.message)
				return
			}
		}
		if check != nil && op != opPut && op != opUploadPart {
			// A small document: checked whole before anything reads it.
			body, err := io.ReadAll(io.LimitReader(r.Body, maxVerifiedBody+1))
			switch {
			case len(body) > maxVerifiedBody:
				refuse(w, r, http.StatusBadRequest, "MaxMessageLengthExceeded", "Your request was too big.")
				return
			case check.failed():
				refuse(w, r, http.StatusBadRequest, codeSHA256Mismatch, errContentSHA256Mismatch.Error())
				return
			case bodyTimedOut(r):
				refuseTimedOut(w, r)
				return
			case err != nil:
				refuse(w, r, http.StatusBadRequest, "IncompleteBody", "You did not provide the number of bytes specified by the Content-Length HTTP header.")
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		if key != "" && r.URL.Query().Has("tagging") {
			s.serveTagging(w, r, bucket, key)
			return
		}
		if op == opPut && r.Header.Get("If-None-Match") == "*" && s.exists(bucket, key) {
			// S3 conditional write: the key is taken, nothing changes.
			w.Header().Set("Connection", "close") // the body is not read
			writeError(w, r, http.StatusPreconditionFailed, "PreconditionFailed",
				"At least one of the pre-conditions you specified did not hold")
			return
		}
		if op == opPut || op == opCopy || op == opComplete {
			s.setTags(bucket, key, nil) // a new object has no tags
		}

		if (op == opPut || op == opUploadPart) && s.opts.MaxUploadBytes > 0 && !s.checkUploadSize(w, r) {
			return
		}
		notify := s.opts.Notify != nil && op.eventName() != "" && strings.HasPrefix(key, s.opts.NotifyPrefix)
		if op != opPut && op != opCopy && op != opComplete && op != opUploadPart {
			next.ServeHTTP(w, r)
			return
		}

		rec := newRecorder()
		next.ServeHTTP(rec, r)
		if bodyTimedOut(r) {
			refuseTimedOut(w, r) // nothing was stored
			return
		}
		if check.failed() {
			// The body read was not the signed one: nothing was stored.
			refuse(w, r, http.StatusBadRequest, codeSHA256Mismatch, errContentSHA256Mismatch.Error())
			return
		}
		if rec.status >= 300 {
			if errorCode(rec.body.Bytes()) == codeEntityTooLarge {
				writeError(w, r, http.StatusRequestEntityTooLarge, codeEntityTooLarge,
					fmt.Sprintf("Your proposed upload exceeds the maximum allowed size of %d bytes", s.opts.MaxUploadBytes))
				return
			}
			if rec.status >= 500 {
				s.log.Warn("s3server: request failed", "method", r.Method, "bucket", bucket, "key", key,
					"status", rec.status, "error", errorCode(rec.body.Bytes()))
			}
			rec.flush(w)
			return
		}
		if notify {
			if err := s.notify(r, rec, op, bucket, key); err != nil {
				s.log.Error("s3server: notification failed; answering 503 so that the client retries",
					"bucket", bucket, "key", key, "error", err)
				writeError(w, r, http.StatusServiceUnavailable, "SlowDown",
					"Please reduce your request rate. (local S3: event notification failed: "+err.Error()+")")
				return
			}
		}
		rec.flush(w)
	})
}

const (
	codeEntityTooLarge = "EntityTooLarge"
	codeSHA256Mismatch = "XAmzContentSHA256Mismatch"
)

// isPreflight reports a CORS preflight, which S3 answers unsigned (gofakes3
// answers it).
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != ""
}

// refuse answers a request before its body is read: the connection is
// closed after the answer, so that an unread body is not taken for the
// next request.
func refuse(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
	writeError(w, r, status, code, msg)
}

// exists reports whether an object is stored at bucket/key.
func (s *Server) exists(bucket, key string) bool {
	obj, err := s.backend.HeadObject(bucket, key)
	if err != nil || obj == nil {
		return false
	}
	if obj.Contents != nil {
		_ = obj.Contents.Close()
	}
	return true
}

// checkUploadSize refuses a body over MaxUploadBytes, answering 413 or 411,
// and reports whether the request may go on.
func (s *Server) checkUploadSize(w http.ResponseWriter, r *http.Request) bool {
	max := s.opts.MaxUploadBytes
	tooLarge := func() bool {
		writeError(w, r, http.StatusRequestEntityTooLarge, codeEntityTooLarge,
			fmt.Sprintf("Your proposed upload exceeds the maximum allowed size of %d bytes", max))
		return false
	}
	declared := r.ContentLength
	if d := r.Header.Get("X-Amz-Decoded-Content-Length"); d != "" {
		n, err := strconv.ParseInt(d, 10, 64)
		if err != nil || n < 0 {
			writeError(w, r, http.StatusBadRequest, "InvalidArgument", "bad X-Amz-Decoded-Content-Length")
			return false
		}
		declared = n
	}
	if declared < 0 {
		// No length: S3 answers 411, but read up to the limit first so that a
		// body over it gets the 413 it deserves.
		n, _ := io.Copy(io.Discard, io.LimitReader(r.Body, max+1))
		if n > max {
			return tooLarge()
		}
		writeError(w, r, http.StatusLengthRequired, "MissingContentLength", "You must provide the Content-Length HTTP header.")
		return false
	}
	if declared > max {
		return tooLarge()
	}
	// The spooling backend checks the real size again.
	return true
}

// notify sends the event for a successful object-creating request.
func (s *Server) notify(r *http.Request, rec *recorder, op operation, bucket, key string) error {
	obj, err := s.backend.HeadObject(bucket, key)
	if err != nil {
		return fmt.Errorf("head %s/%s after %s: %w", bucket, key, op.eventName(), err)
	}
	if obj.Contents != nil {
		_ = obj.Contents.Close()
	}
	etag := strings.Trim(rec.header.Get("ETag"), `"`)
	if etag == "" {
		etag = strings.Trim(xmlETag(rec.body.Bytes()), `"`)
	}
	if etag == "" {
		etag = hex.EncodeToString(obj.Hash)
	}
	ev := s.event(op.eventName(), bucket, key, obj.Size, etag, clientIP(r), rec.header.Get("x-amz-request-id"))
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), notifyTimeout)
	defer cancel()
	if err := s.opts.Notify(ctx, ev); err != nil {
		return fmt.Errorf("notify %s for %s/%s: %w", op.eventName(), bucket, key, err)
	}
	return nil
}

// event builds the notification S3 sends for an object-created event.
func (s *Server) event(name, bucket, key string, size int64, etag, sourceIP, requestID string) events.S3Event {
	if requestID == "" {
		requestID = fmt.Sprintf("%016X", s.nextSequence())
	}
	ev := message.NewObjectCreatedEvent(Region, bucket, key, size, time.Now().Truncate(time.Millisecond))
	rec := &ev.Records[0]
	rec.EventName = name
	rec.PrincipalID = events.S3UserIdentity{PrincipalID: "AWS:LOCAL"}
	rec.RequestParameters = events.S3RequestParameters{SourceIPAddress: sourceIP}
	rec.ResponseElements = map[string]string{"x-amz-request-id": requestID, "x-amz-id-2": "local"}
	rec.S3.ConfigurationID = "local-notify"
	rec.S3.Bucket.OwnerIdentity = events.S3UserIdentity{PrincipalID: "LOCAL"}
	rec.S3.Object.URLDecodedKey = key
	rec.S3.Object.ETag = etag
	rec.S3.Object.Sequencer = fmt.Sprintf("%016X", s.nextSequence())
	return ev
}

// nextSequence returns a value greater than every earlier one, also across
// restarts (it starts from the clock).
func (s *Server) nextSequence() uint64 {
	s.seqMu.Lock()
	defer s.seqMu.Unlock()
	next := uint64(time.Now().UnixNano())
	if next <= s.lastSeq {
		next = s.lastSeq + 1
	}
	s.lastSeq = next
	return next
}

// checkPresignExpiry checks the expiry of a presigned URL (query parameters
// X-Amz-Date and X-Amz-Expires). It returns an empty code when the request
// may proceed.
func checkPresignExpiry(q url.Values, now time.Time) (code string, status int, msg string) {
	date, expires := q.Get("X-Amz-Date"), q.Get("X-Amz-Expires")
	if date == "" && expires == "" {
		return "", 0, ""
	}
	if date == "" || expires == "" {
		return "AuthorizationQueryParametersError", http.StatusBadRequest,
			"Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters."
	}
	signed, err := time.Parse("20060102T150405Z", date)
	if err != nil {
		return "AuthorizationQueryParametersError", http.StatusBadRequest,
			"X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\""
	}
	secs, err := strconv.ParseInt(expires, 10, 64)
	if err != nil || secs < 0 {
		return "AuthorizationQueryParametersError", http.StatusBadRequest,
			"X-Amz-Expires should be a number"
	}
	if secs > 604800 {
		return "AuthorizationQueryParametersError", http.StatusBadRequest,
			"X-Amz-Expires must be less than a week (in seconds) that is; 604800"
	}
	if now.After(signed.Add(time.Duration(secs) * time.Second)) {
		return "AccessDenied", http.StatusForbidden, "Request has expired"
	}
	return "", 0, ""
}

// s3Error is S3's XML error document.
type s3Error struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string   `xml:"Code"`
	Message   string   `xml:"Message"`
	Resource  string   `xml:"Resource,omitempty"`
	RequestID string   `xml:"RequestId"`
}

func writeError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	body, _ := xml.Marshal(s3Error{Code: code, Message: msg, Resource: r.URL.Path, RequestID: "local"})
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Content-Length", strconv.Itoa(len(xml.Header)+len(body)))
	if status == http.StatusRequestEntityTooLarge || status == http.StatusLengthRequired {
		w.Header().Set("Connection", "close") // the body may be unread
	}
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = io.WriteString(w, xml.Header)
		_, _ = w.Write(body)
	}
}

// errorCode extracts <Code> from an XML error document ("" when none).
func errorCode(body []byte) string {
	var e s3Error
	if xml.Unmarshal(body, &e) != nil {
		return ""
	}
	return e.Code
}

// xmlETag extracts the first <ETag> from an XML response (CopyObjectResult,
// CompleteMultipartUploadResult).
func xmlETag(body []byte) string {
	d := xml.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := d.Token()
		if err != nil {
			return ""
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "ETag" {
			var v string
			if d.DecodeElement(&v, &se) == nil {
				return v
			}
			return ""
		}
	}
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// recorder buffers a response so that the middleware can still replace it.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

func (r *recorder) flush(w http.ResponseWriter) {
	for k, v := range r.header {
		w.Header()[k] = v
	}
	status := r.status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(r.body.Bytes())
}

// spoolBackend makes PutObject atomic and enforces the size limit: the body
// is copied to memory (up to memorySpoolBytes) or to a temporary file first
// and handed to the real backend only when it arrived complete and within
// the limit.
type spoolBackend struct {
	gofakes3.Backend
	tmpDir     string
	max        int64
	bucketsDir string // where s3afero keeps each bucket's objects, a file per key
}

// ListBucket lists the keys under a prefix that has a directory part
// ("analytics/changes/retailer_id=acme/", "indexes/acme/1") and no delimiter
// by walking that directory alone. gofakes3's afero backend walks the whole
// bucket for such a listing, holding its one lock, so every List cost as
// much as the bucket held: the diff lists its retailer's indexes on every
// job, and a long property run slowed to a crawl. Other listings (a
// delimiter, a prefix without a "/", a page) go to the backend as before.
// Keys come back in S3's order, byte by byte, whichever answered; sizes and
// ETags are the backend's own.
func (b *spoolBackend) ListBucket(bucket string, prefix *gofakes3.Prefix, page gofakes3.ListBucketPage) (*gofakes3.ObjectList, error) {
	list, err := b.listUnder(bucket, prefix, page)
	if list == nil && err == nil {
		list, err = b.Backend.ListBucket(bucket, prefix, page)
	}
	if err != nil {
		return nil, err
	}
	// The backend's walk puts "a/b" before "a-b"; S3 orders by the bytes.
	slices.SortFunc(list.Contents, func(x, y *gofakes3.Content) int { return strings.Compare(x.Key, y.Key) })
	return list, nil
}

// listUnder is ListBucket's walk of the prefix's directory; nil, nil when
// the listing is not one it takes.
func (b *spoolBackend) listUnder(bucket string, prefix *gofakes3.Prefix, page gofakes3.ListBucketPage) (*gofakes3.ObjectList, error) {
	if prefix == nil || !prefix.HasPrefix || prefix.HasDelimiter || !page.IsEmpty() {
		return nil, nil
	}
	dir, _ := path.Split(prefix.Prefix)
	root := filepath.Join(b.bucketsDir, bucket)
	if dir == "" || slices.Contains(strings.Split(dir, "/"), "..") || gofakes3.ValidateBucketName(bucket) != nil {
		return nil, nil
	}
	if _, err := os.Stat(root); err != nil {
		return nil, nil // the backend answers "no such bucket"
	}
	list := gofakes3.NewObjectList()
	err := filepath.WalkDir(filepath.Join(root, filepath.FromSlash(dir)), func(p string, d fs.DirEntry, err error) error {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil // nothing under the prefix, or removed while walking
		case err != nil:
			return err
		case d.IsDir():
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix.Prefix) {
			return nil
		}
		obj, err := b.Backend.HeadObject(bucket, key)
		if gofakes3.HasErrorCode(err, gofakes3.ErrNoSuchKey) {
			return nil // deleted while walking
		} else if err != nil {
			return err
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		} else if err != nil {
			return err
		}
		list.Add(&gofakes3.Content{Key: key, LastModified: gofakes3.NewContentTime(info.ModTime()),
			ETag: gofakes3.FormatETag(obj.Hash), Size: obj.Size})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("s3server: list %s/%s: %w", bucket, prefix.Prefix, err)
	}
	return list, nil
}

// memorySpoolBytes is the largest body spooled in memory instead of to a
// temporary file: chunk objects, plan pages and index parts are a few MiB
// at most, and their second write to disk was a quarter of the stand-in's
// CPU in a first load of 1M products (bench e2e's profile).
const memorySpoolBytes = 16 << 20

// memorySpools are the buffers of bodies spooled in memory, reused.
var memorySpools = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func (b *spoolBackend) PutObject(bucket, key string, meta map[string]string, input io.Reader, size int64, conditions *gofakes3.PutConditions) (gofakes3.PutObjectResult, error) {
	src := input
	if b.max > 0 {
		src = io.LimitReader(input, b.max+1)
	}
	// copied reports whether the body arrived whole: the error of a body
	// cut short, or over the limit, or of another length than announced.
	copied := func(n int64, err error) error {
		if err != nil {
			var gerr gofakes3.Error
			if errors.As(err, &gerr) { // e.g. BadDigest from the Content-MD5 check
				return err
			}
			return gofakes3.ErrIncompleteBody
		}
		if b.max > 0 && n > b.max {
			return gofakes3.ErrorMessage(codeEntityTooLarge, "Your proposed upload exceeds the maximum allowed size")
		}
		if size >= 0 && n != size {
			return gofakes3.ErrIncompleteBody
		}
		return nil
	}
	if size >= 0 && size <= memorySpoolBytes {
		buf := memorySpools.Get().(*bytes.Buffer)
		buf.Reset()
		defer memorySpools.Put(buf)
		// One byte more than announced shows a body longer than its length.
		n, err := buf.ReadFrom(io.LimitReader(src, size+1))
		if err := copied(n, err); err != nil {
			return gofakes3.PutObjectResult{}, err
		}
		return b.Backend.PutObject(bucket, key, meta, bytes.NewReader(buf.Bytes()), n, conditions)
	}
	f, err := os.CreateTemp(b.tmpDir, "put-*")
	if err != nil {
		return gofakes3.PutObjectResult{}, fmt.Errorf("s3server: spool upload: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	n, err := io.Copy(f, src)
	if err := copied(n, err); err != nil {
		return gofakes3.PutObjectResult{}, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return gofakes3.PutObjectResult{}, fmt.Errorf("s3server: rewind spooled upload: %w", err)
	}
	return b.Backend.PutObject(bucket, key, meta, f, n, conditions)
}

// slogLogger adapts a *slog.Logger to gofakes3.Logger.
type slogLogger struct{ log *slog.Logger }

func (l slogLogger) Print(level gofakes3.LogLevel, v ...interface{}) {
	msg := strings.TrimSpace(fmt.Sprintln(v...))
	switch level {
	case gofakes3.LogErr:
		l.log.Error("gofakes3: " + msg)
	case gofakes3.LogWarn:
		l.log.Warn("gofakes3: " + msg)
	default:
		l.log.Debug("gofakes3: " + msg)
	}
}

// objectTag is one object tag, as S3's XML has it.
type objectTag struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

// tagging is the body of PutObjectTagging and GetObjectTagging.
type tagging struct {
	XMLName xml.Name    `xml:"http://s3.amazonaws.com/doc/2006-03-01/ Tagging"`
	TagSet  []objectTag `xml:"TagSet>Tag"`
}

// serveTagging answers PutObjectTagging, GetObjectTagging and
// DeleteObjectTagging, which gofakes3 does not implement (it would take the
// PUT for a PutObject of the tagging XML). Tags live in memory only: the
// local stack has no lifecycle rules that would act on them, and a restart
// forgets them.
func (s *Server) serveTagging(w http.ResponseWriter, r *http.Request, bucket, key string) {
	exists, err := s.backend.HeadObject(bucket, key)
	if err != nil || exists == nil {
		writeError(w, r, http.StatusNotFound, "NoSuchKey", "The specified key does not exist.")
		return
	}
	switch r.Method {
	case http.MethodPut:
		var t tagging
		if err := xml.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&t); err != nil || len(t.TagSet) > 10 {
			writeError(w, r, http.StatusBadRequest, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema.")
			return
		}
		s.setTags(bucket, key, t.TagSet)
		w.WriteHeader(http.StatusOK)
	case http.MethodGet:
		s.tagsMu.Lock()
		t := tagging{TagSet: append([]objectTag{}, s.tags[bucket+"/"+key]...)}
		s.tagsMu.Unlock()
		body, _ := xml.Marshal(t)
		w.Header().Set("Content-Type", "application/xml")
		w.Write(append([]byte(xml.Header), body...))
	case http.MethodDelete:
		s.setTags(bucket, key, nil)
		w.WriteHeader(http.StatusNoContent)
	default:
		writeError(w, r, http.StatusMethodNotAllowed, "MethodNotAllowed", "The specified method is not allowed against this resource.")
	}
}

func (s *Server) setTags(bucket, key string, tags []objectTag) {
	s.tagsMu.Lock()
	defer s.tagsMu.Unlock()
	if len(tags) == 0 {
		delete(s.tags, bucket+"/"+key)
		return
	}
	if s.tags == nil {
		s.tags = map[string][]objectTag{}
	}
	s.tags[bucket+"/"+key] = tags
}
