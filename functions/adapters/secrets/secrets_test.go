package secrets

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDSNFromRDSSecret(t *testing.T) {
	t.Parallel()
	secret := `{"host":"db.example","port":5432,"username":"app","password":"p@ss/word","dbname":"shard_0"}`
	require.Equal(t, "postgres://app:p%40ss%2Fword@db.example:5432/shard_0?sslmode=verify-full&sslrootcert=%2Fvar%2Ftask%2Fcerts%2Frds-ca-bundle.pem",
		DSN(secret, "/var/task/certs/rds-ca-bundle.pem"), "the server's certificate and name are verified against the shipped bundle")
	require.Equal(t, "postgres://app:p%40ss%2Fword@db.example:5432/shard_0?sslmode=verify-full",
		DSN(secret, ""), "without a bundle, against the system's roots: never unverified")
	require.Equal(t, "plain-token", DSN("plain-token", ""), "a plain secret is returned as it is")
}

// A pool asks for the current password before every new connection: the
// secret it came from, re-read once its cached copy is older than secretTTL.
func TestPasswordFollowsRotation(t *testing.T) {
	t.Parallel()
	s := &Resolver{byDSN: map[string]string{"postgres://app:old@db/x": "arn:s"}, cache: map[string]cachedSecret{
		"arn:s": {value: `{"host":"db","username":"app","password":"new"}`, at: time.Now()},
	}}
	pw, err := s.Password(context.Background(), "postgres://app:old@db/x")
	require.NoError(t, err)
	require.Equal(t, "new", pw)
	pw, err = s.Password(context.Background(), "postgres://local/x")
	require.NoError(t, err)
	require.Equal(t, "", pw, "a DSN given literally keeps its own password")
	dsn, err := s.Resolve(context.Background(), "postgres://literal/x")
	require.NoError(t, err)
	require.Equal(t, "postgres://literal/x", dsn)
}

// CATALOG_*_HOST(S) point a secret's DSN at another endpoint (an RDS Proxy)
// that keeps following the secret's password.
func TestHostOverrideKeepsTheSecret(t *testing.T) {
	t.Parallel()
	s := &Resolver{byDSN: map[string]string{}, cache: map[string]cachedSecret{
		"arn:s": {value: `{"host":"writer.example","port":5432,"username":"app","password":"pw","dbname":"shard_0"}`, at: time.Now()},
	}}
	dsn, err := s.Resolve(context.Background(), "secret:arn:s")
	require.NoError(t, err)
	proxied, err := s.WithHost(dsn, "proxy.example")
	require.NoError(t, err)
	require.Equal(t, "postgres://app:pw@proxy.example:5432/shard_0?sslmode=verify-full", proxied)
	pw, err := s.Password(context.Background(), proxied)
	require.NoError(t, err)
	require.Equal(t, "pw", pw)
	withPort, err := s.WithHost(dsn, "proxy.example:6432")
	require.NoError(t, err)
	require.Equal(t, "postgres://app:pw@proxy.example:6432/shard_0?sslmode=verify-full", withPort)
	same, err := s.WithHost(dsn, "")
	require.NoError(t, err)
	require.Equal(t, dsn, same)
	_, err = s.WithHost("host=db dbname=x", "proxy.example")
	require.Error(t, err)
}
