// Command listen receives the catalog's webhook deliveries and prints each
// one, its signature checked, so that a retailer can try webhooks against
// the local stack (docs/RETAILERS.md, Webhooks):
//
//	go run ./docs/samples/webhookreceiver/listen --addr 127.0.0.1:9999 --secret "$SECRET"
//
// Each verified delivery is one line on stdout: the event id, its type and
// the upload's state; a delivery whose signature does not verify gets 401
// and a line on stderr.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/retailcatalog/catalog/docs/samples/webhookreceiver"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9999", "where to listen")
	secret := flag.String("secret", os.Getenv("WEBHOOK_SECRET"), "the webhook's secret (default $WEBHOOK_SECRET)")
	flag.Parse()
	if len(*secret) < 16 {
		fmt.Fprintln(os.Stderr, "listen: --secret (or $WEBHOOK_SECRET) must be the webhook's secret, 16 bytes or more")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := listen(ctx, *addr, []byte(*secret)); err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		os.Exit(1)
	}
}

// listen serves deliveries on addr until ctx ends.
func listen(ctx context.Context, addr string, secret []byte) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "listening on http://%s/ (set it as the webhook's url with the same secret)\n", ln.Addr())
	srv := &http.Server{Handler: printer(secret, os.Stdout, os.Stderr)}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// printer verifies each delivery and prints its line on out, or on errOut
// that it did not verify.
func printer(secret []byte, out, errOut io.Writer) http.Handler {
	verified := webhookreceiver.Handler(secret, func(eventID string, body []byte) error {
		fmt.Fprintln(out, describe(eventID, body))
		return nil
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		verified.ServeHTTP(rec, r)
		if rec.status == http.StatusUnauthorized {
			fmt.Fprintf(errOut, "a delivery from %s did not verify (another secret?): answered 401\n", r.RemoteAddr)
		}
	})
}

// describe is a delivery's line: "acme:3:applied catalog.snapshot.applied acme/3 applied".
func describe(eventID string, body []byte) string {
	var ev struct {
		Type       string `json:"type"`
		RetailerID string `json:"retailer_id"`
		Generation int64  `json:"generation"`
		Status     struct {
			State string `json:"state"`
			Error *struct {
				Code string `json:"code"`
			} `json:"error"`
		} `json:"status"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		return fmt.Sprintf("%s (not an event: %v)", eventID, err)
	}
	line := fmt.Sprintf("%s %s %s/%d %s", eventID, ev.Type, ev.RetailerID, ev.Generation, ev.Status.State)
	if ev.Status.Error != nil {
		line += " " + ev.Status.Error.Code
	}
	return line
}

// statusRecorder remembers the status a handler answered.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}
