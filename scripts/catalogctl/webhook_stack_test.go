package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/docs/samples/webhookreceiver"
)

// webhook set with no secret given makes one and prints it once; the
// deliveries of the next upload verify with it; show prints the URL and
// never the secret; delete stops it (show then fails, delete again passes);
// a secret from the environment is used as given, and bad input is refused
// before the API is asked.
func TestWebhookCommandAgainstTheStack(t *testing.T) {
	t.Parallel()
	_, admin := startStack(t)
	vars := onboard(t, admin, "hooked")

	deliveries := make(chan string, 16)
	var secret atomic.Pointer[[]byte] // the one the tool prints
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := secret.Load()
		if s == nil {
			http.Error(w, "no secret yet", http.StatusServiceUnavailable)
			return
		}
		webhookreceiver.Handler(*s, func(id string, _ []byte) error {
			deliveries <- id
			return nil
		}).ServeHTTP(w, r)
	}))
	t.Cleanup(recv.Close)

	r := runTool(t, vars, "webhook", "set", "hooked", recv.URL+"/hook")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stderr, "shown this once")
	var set struct{ URL, Secret string }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &set))
	require.Equal(t, recv.URL+"/hook", set.URL)
	require.Len(t, set.Secret, 64, "32 random bytes, hex")
	printed := []byte(set.Secret)
	secret.Store(&printed)

	r = runTool(t, vars, "webhook", "show", "hooked")
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `{"url": "`+recv.URL+`/hook"}`, r.stdout)

	up := runTool(t, vars, "upload", "--retailer", "hooked", writeFile(t, "c.csv", []byte("product_id,price\nsku-1,10\n")))
	require.Equal(t, 0, up.code, up.stderr)
	select {
	case id := <-deliveries: // signed with the printed secret, or the receiver would have refused it
		require.Equal(t, "hooked:1:applied", id)
	case <-time.After(time.Minute):
		t.Fatal("no verified delivery within a minute")
	}

	// A secret from the environment (the named variable) is used as given.
	vars["HOOK_SECRET"] = "0123456789abcdef-from-env"
	r = runTool(t, vars, "webhook", "set", "hooked", recv.URL+"/other", "--secret-env", "HOOK_SECRET")
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `{"url": "`+recv.URL+`/other"}`, r.stdout, "a given secret is not printed")

	r = runTool(t, vars, "webhook", "delete", "hooked")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "webhook of hooked removed\n", r.stdout)
	r = runTool(t, vars, "webhook", "show", "hooked")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "webhook_not_found")
	r = runTool(t, vars, "webhook", "delete", "hooked")
	require.Equal(t, 0, r.code, r.stderr)

	for name, c := range map[string]struct {
		vars map[string]string
		args []string
		want string
	}{
		"no action":      {vars, []string{"webhook"}, "want set, show or delete"},
		"unknown action": {vars, []string{"webhook", "list", "hooked"}, `unknown webhook action "list"`},
		"set, no URL":    {vars, []string{"webhook", "set", "hooked"}, "takes a retailer and a URL"},
		"show, two":      {vars, []string{"webhook", "show", "hooked", "x"}, "takes one retailer"},
		"short secret":   {map[string]string{apiVar: vars[apiVar], tokenVar: vars[tokenVar], webhookSecretVar: "short"}, []string{"webhook", "set", "hooked", recv.URL}, "has 5 bytes"},
		"private URL":    {vars, []string{"webhook", "set", "hooked", "http://10.0.0.1/hook"}, "invalid_webhook_url"},
		"other retailer": {vars, []string{"webhook", "show", "someone-else"}, "HTTP 40"},
	} {
		r := runTool(t, c.vars, c.args...)
		require.Equal(t, 1, r.code, "%s: %s", name, r.stdout)
		require.Contains(t, r.stderr, c.want, name)
	}
}
