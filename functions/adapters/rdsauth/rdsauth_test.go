package rdsauth

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"
)

// A token is a SigV4-presigned "connect" request for exactly the endpoint
// and user of the connection, valid 15 minutes, without a scheme.
func TestTokenIsSignedForTheEndpointAndUser(t *testing.T) {
	tokens := NewWithCredentials("eu-west-1", credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""))
	tok, err := tokens.Token(context.Background(), "shard0.proxy-abc.eu-west-1.rds.amazonaws.com", 5432, "catalog_read")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(tok, "://") {
		t.Fatalf("token has a scheme: %s", tok)
	}
	u, err := url.Parse("https://" + tok)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for k, want := range map[string]string{"Action": "connect", "DBUser": "catalog_read", "X-Amz-Expires": "900"} {
		if got := q.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if u.Host != "shard0.proxy-abc.eu-west-1.rds.amazonaws.com:5432" {
		t.Errorf("signed for %s", u.Host)
	}
	if cred := q.Get("X-Amz-Credential"); !strings.Contains(cred, "/eu-west-1/rds-db/aws4_request") {
		t.Errorf("credential scope %q, want region eu-west-1 and service rds-db", cred)
	}
	if q.Get("X-Amz-Signature") == "" {
		t.Error("not signed")
	}
}
