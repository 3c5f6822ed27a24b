package config

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDSNFromRDSSecret(t *testing.T) {
	t.Parallel()
	dsn := dsnFromSecret(`{"host":"db.example","port":5432,"username":"app","password":"p@ss/word","dbname":"shard_0"}`)
	require.Equal(t, "postgres://app:p%40ss%2Fword@db.example:5432/shard_0?sslmode=require", dsn)
	require.Equal(t, "plain-token", dsnFromSecret("plain-token"), "a plain secret is returned as it is")
}

// A pool asks for the current password before every new connection: the
// secret it came from, re-read once its cached copy is older than secretTTL.
func TestPasswordFollowsRotation(t *testing.T) {
	t.Parallel()
	s := &secrets{byDSN: map[string]string{"postgres://app:old@db/x": "arn:s"}, cache: map[string]cachedSecret{
		"arn:s": {value: `{"host":"db","username":"app","password":"new"}`, at: time.Now()},
	}}
	pw, err := s.password(context.Background(), "postgres://app:old@db/x")
	require.NoError(t, err)
	require.Equal(t, "new", pw)
	pw, err = s.password(context.Background(), "postgres://local/x")
	require.NoError(t, err)
	require.Equal(t, "", pw, "a DSN given literally keeps its own password")
	dsn, err := s.resolve(context.Background(), "postgres://literal/x")
	require.NoError(t, err)
	require.Equal(t, "postgres://literal/x", dsn)
}
