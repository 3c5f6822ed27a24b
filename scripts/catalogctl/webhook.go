package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// webhookSecretVar is where `webhook set` takes the secret from by default.
const webhookSecretVar = "CATALOG_WEBHOOK_SECRET"

func init() {
	register(&Command{
		Name: "webhook", Args: "set R URL | show R | delete R", Token: RetailerToken,
		Summary: "set, show or remove the URL a retailer's upload outcomes are POSTed to",
		Help: `webhook set R URL: every upload outcome of retailer R (applied, rejected,
held, superseded) is POSTed to URL, signed with a secret (PUT
/v1/retailers/R/webhook). The secret is taken from $` + webhookSecretVar + `
(or the variable --secret-env names), never from the command line, where
other users and the shell's history would see it. When the variable is not
set, a random 32-byte secret is made and printed once with the URL, as
{"url", "secret"}: keep it to verify the deliveries' signatures; the API
never shows it again. Setting the webhook again replaces URL and secret.

webhook show R: the webhook's URL (GET), never its secret; exits 1 when
none is set.

webhook delete R: removes the webhook (DELETE); deliveries stop. Safe to
repeat.

URLs are https to public addresses; the local stack also takes
http://127.0.0.1:PORT/... (docs/RETAILERS.md, Webhooks).`,
		Flags: func(fs *flag.FlagSet) Runner {
			secretEnv := fs.String("secret-env", webhookSecretVar, "set: the environment variable holding the secret (16 to 256 bytes)")
			return func(ctx context.Context, c *Call, args []string) error {
				if len(args) == 0 {
					return c.Usagef("want set, show or delete")
				}
				verb, rest := args[0], args[1:]
				want := map[string]int{"set": 2, "show": 1, "delete": 1}
				n, ok := want[verb]
				switch {
				case !ok:
					return c.Usagef("unknown webhook action %q: want set, show or delete", verb)
				case len(rest) != n && verb == "set":
					return c.Usagef("webhook set takes a retailer and a URL, got %d arguments", len(rest))
				case len(rest) != n:
					return c.Usagef("webhook %s takes one retailer, got %d arguments", verb, len(rest))
				}
				path := "/v1/retailers/" + url.PathEscape(rest[0]) + "/webhook"
				switch verb {
				case "set":
					return setWebhook(ctx, c, path, rest[0], rest[1], *secretEnv)
				case "show":
					var raw json.RawMessage
					if err := c.API.Do(ctx, http.MethodGet, path, c.Token, nil, &raw); err != nil {
						return fmt.Errorf("webhook of %s: %w", rest[0], err)
					}
					return printJSON(c, raw)
				default:
					if err := c.API.Do(ctx, http.MethodDelete, path, c.Token, nil, nil); err != nil {
						return fmt.Errorf("remove the webhook of %s: %w", rest[0], err)
					}
					_, err := fmt.Fprintf(c.Stdout, "webhook of %s removed\n", rest[0])
					return err
				}
			}
		},
	})
}

// setWebhook saves retailer's webhook with the secret of the variable
// secretEnv, or a new random one it prints once.
func setWebhook(ctx context.Context, c *Call, path, retailer, hookURL, secretEnv string) error {
	if secretEnv == "" {
		return c.Usagef("--secret-env names an environment variable; it is empty")
	}
	secret, made := c.Env.Getenv(secretEnv), false
	if secret == "" {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return fmt.Errorf("make a webhook secret: %w", err)
		}
		secret, made = hex.EncodeToString(b), true
	}
	if n := len(secret); n < 16 || n > 256 {
		return c.Usagef("the secret in $%s has %d bytes; a webhook secret has 16 to 256", secretEnv, n)
	}
	if strings.TrimSpace(hookURL) != hookURL || hookURL == "" {
		return c.Usagef("the URL %q has spaces around it or is empty", hookURL)
	}
	var saved struct {
		URL string `json:"url"`
	}
	if err := c.API.Do(ctx, http.MethodPut, path, c.Token, map[string]string{"url": hookURL, "secret": secret}, &saved); err != nil {
		return fmt.Errorf("set the webhook of %s: %w", retailer, err)
	}
	out := map[string]string{"url": saved.URL}
	if made {
		out["secret"] = secret
		fmt.Fprintf(c.Stderr, "a new secret was made (shown this once): keep it to verify the deliveries' X-Catalog-Signature\n")
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return err
	}
	return printJSON(c, raw)
}
