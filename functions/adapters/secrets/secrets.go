// Package secrets is the adapter over AWS Secrets Manager: it resolves
// "secret:<arn>" configuration values (a database's RDS secret becomes a
// DSN that verifies its server), and tells the connection pools the current
// password of a secret's DSN, so that a rotation is followed without a
// restart. Only configuration (package config) uses it.
package secrets

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// Resolver resolves "secret:<arn>" values through Secrets Manager and keeps,
// for every database address it produced, which secret it came from, so
// that new connections can pick up a rotated password.
type Resolver struct {
	aws      func(context.Context) (aws.Config, error) // the AWS configuration, asked on first use
	rootCert string                                    // CA bundle of the DSNs built from secrets
	client   *secretsmanager.Client
	mu       sync.Mutex
	byDSN    map[string]string // resolved DSN -> secret ARN
	cache    map[string]cachedSecret
}

// New returns a resolver that reads secrets with the AWS configuration
// awsConfig returns (asked once, on the first secret read); DSNs built from
// RDS secrets verify their server against rootCert ("" the system's roots).
func New(awsConfig func(context.Context) (aws.Config, error), rootCert string) *Resolver {
	return &Resolver{aws: awsConfig, rootCert: rootCert, byDSN: map[string]string{}, cache: map[string]cachedSecret{}}
}

type cachedSecret struct {
	value string
	at    time.Time
}

// secretTTL bounds how long a password is reused for new connections after
// a rotation: at most this long, new connections fail with the old one.
const secretTTL = time.Minute

// fetch reads a secret, from the cache when younger than secretTTL.
func (s *Resolver) fetch(ctx context.Context, arn string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.cache[arn]; ok && time.Since(c.at) < secretTTL {
		return c.value, nil
	}
	if s.client == nil {
		cfg, err := s.aws(ctx)
		if err != nil {
			return "", err
		}
		s.client = secretsmanager.NewFromConfig(cfg)
	}
	out, err := s.client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
	if err != nil {
		return "", fmt.Errorf("read secret %s: %w", arn, err)
	}
	v := aws.ToString(out.SecretString)
	s.cache[arn] = cachedSecret{value: v, at: time.Now()}
	return v, nil
}

// Resolve returns v itself, or for "secret:<arn>" the DSN (or plain string) the secret holds.
func (s *Resolver) Resolve(ctx context.Context, v string) (string, error) {
	arn, ok := strings.CutPrefix(v, "secret:")
	if !ok {
		return v, nil
	}
	raw, err := s.fetch(ctx, arn)
	if err != nil {
		return "", err
	}
	dsn := DSN(raw, s.rootCert)
	s.mu.Lock()
	s.byDSN[dsn] = arn
	s.mu.Unlock()
	return dsn, nil
}

// WithHost returns dsn (a postgres:// URL) connecting to host ("host" keeps
// the DSN's port, "host:port" replaces it) instead; the new DSN follows the
// same secret's password rotations. An empty host returns dsn unchanged.
func (s *Resolver) WithHost(dsn, host string) (string, error) {
	if host == "" {
		return dsn, nil
	}
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		return "", fmt.Errorf("a host override needs a postgres:// URL to apply to")
	}
	if _, _, err := net.SplitHostPort(host); err != nil {
		port := u.Port()
		if port == "" {
			port = "5432"
		}
		host = net.JoinHostPort(host, port)
	}
	u.Host = host
	out := u.String()
	s.mu.Lock()
	if arn := s.byDSN[dsn]; arn != "" {
		s.byDSN[out] = arn
	}
	s.mu.Unlock()
	return out, nil
}

// Password is the current password of the secret a DSN came from ("" when
// it did not come from a secret): the pools ask before every new connection.
func (s *Resolver) Password(ctx context.Context, dsn string) (string, error) {
	s.mu.Lock()
	arn := s.byDSN[dsn]
	s.mu.Unlock()
	if arn == "" {
		return "", nil
	}
	raw, err := s.fetch(ctx, arn)
	if err != nil {
		return "", err
	}
	var sec rdsSecret
	if err := json.Unmarshal([]byte(raw), &sec); err != nil {
		return "", fmt.Errorf("secret %s is not an RDS secret: %w", arn, err)
	}
	return sec.Password, nil
}

// rdsSecret is the JSON of an RDS-generated secret.
type rdsSecret struct {
	Host     string      `json:"host"`
	Port     json.Number `json:"port"`
	Username string      `json:"username"`
	Password string      `json:"password"`
	DBName   string      `json:"dbname"`
}

// DSN is the DSN of an RDS secret's JSON, which verifies the
// server's certificate and name (sslmode=verify-full) against rootCert, or
// the system's roots when rootCert is ""; a plain string is returned as it is.
func DSN(s, rootCert string) string {
	var sec rdsSecret
	if err := json.Unmarshal([]byte(s), &sec); err != nil || sec.Host == "" {
		return s // a plain secret string (the admin token, or a whole DSN)
	}
	port := sec.Port.String()
	if port == "" {
		port = "5432"
	}
	db := sec.DBName
	if db == "" {
		db = "postgres"
	}
	q := url.Values{"sslmode": {"verify-full"}}
	if rootCert != "" {
		q.Set("sslrootcert", rootCert)
	}
	u := url.URL{Scheme: "postgres", User: url.UserPassword(sec.Username, sec.Password),
		Host: sec.Host + ":" + port, Path: "/" + db, RawQuery: q.Encode()}
	return u.String()
}
