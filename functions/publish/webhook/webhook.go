// Package webhook holds what makes a retailer's webhook safe to keep and to
// call (DESIGN 8): which URLs may be called (Policy: https to public
// addresses, checked when the URL is saved and again on every connection,
// so no webhook reaches into the VPC, the loopback or the instance metadata
// service), how its secret is kept (SecretBox: sealed with AES-256-GCM under
// a key that lives outside the database), and how a delivery is signed.
package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// Headers of a delivery.
const (
	HeaderEventID   = "X-Catalog-Event-Id"
	HeaderSignature = "X-Catalog-Signature"
)

// Timeout is how long a receiver has to answer a delivery.
const Timeout = 10 * time.Second

// Limits of what a retailer may save.
const (
	MaxURLBytes     = 2048
	MinSecretBytes  = 16
	MaxSecretBytes  = 256
	SignaturePrefix = "sha256="
)

// Sign is the X-Catalog-Signature of body: sha256=<hex HMAC-SHA256(secret, body)>.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return SignaturePrefix + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether signature is body's under secret (receivers do this).
func Verify(secret, body []byte, signature string) bool {
	return hmac.Equal([]byte(Sign(secret, body)), []byte(signature))
}

// Resolver resolves host names; *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Policy says which webhook URLs may be saved and called.
type Policy struct {
	// AllowLoopbackHTTP also accepts http://127.0.0.1:<port>/... (the local
	// stack's receivers); never set on AWS.
	AllowLoopbackHTTP bool
	// Resolver resolves names [net.DefaultResolver].
	Resolver Resolver
}

func (p Policy) resolver() Resolver {
	if p.Resolver != nil {
		return p.Resolver
	}
	return net.DefaultResolver
}

func invalid(format string, args ...any) error {
	return catalog.Errorf(catalog.ErrInvalid, "invalid_webhook_url", format, args...)
}

// CheckURL checks a webhook URL: https (or, with AllowLoopbackHTTP,
// http://127.0.0.1:<port>), no credentials or fragment, and a host whose
// every address is public. It resolves the host now; the connections
// Client makes check the addresses they really reach again.
func (p Policy) CheckURL(ctx context.Context, raw string) (*url.URL, error) {
	if len(raw) > MaxURLBytes {
		return nil, invalid("the webhook URL has %d bytes, at most %d", len(raw), MaxURLBytes)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return nil, invalid("the webhook URL %q is not an absolute http(s) URL", raw)
	}
	if u.User != nil {
		return nil, invalid("the webhook URL may not carry credentials")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return nil, invalid("the webhook URL may not have a fragment")
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, invalid("the webhook URL's port %q is not a port from 1 to 65535", port)
		}
	}
	host := u.Hostname()
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && p.AllowLoopbackHTTP && host == "127.0.0.1" && u.Port() != "":
		return u, nil
	case u.Scheme == "http" && p.AllowLoopbackHTTP:
		return nil, invalid("the webhook URL must be https, or http://127.0.0.1:<port> on the local stack")
	default:
		return nil, invalid("the webhook URL must be https")
	}
	if addr, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		if !PublicAddr(addr) {
			return nil, invalid("the webhook URL's address %s is not public", addr)
		}
		return u, nil
	}
	addrs, err := p.resolver().LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return nil, invalid("the webhook URL's host %q does not resolve", host)
	}
	for _, a := range addrs {
		if !PublicAddr(a) {
			return nil, invalid("the webhook URL's host %q resolves to %s, which is not public", host, a)
		}
	}
	return u, nil
}

// blocked are ranges PublicAddr refuses beyond what netip classifies:
// shared (CGNAT), documentation, benchmarking, reserved, IETF protocol
// assignments, translation and tunnelling prefixes, discard.
var blocked = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15", "198.51.100.0/24",
		"203.0.113.0/24", "240.0.0.0/4", "255.255.255.255/32",
		"64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "2001::/23", "2001:db8::/32", "2002::/16", "fc00::/7",
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// PublicAddr reports whether a is a public unicast address a webhook may
// reach: not private (RFC 1918, unique local), loopback, link-local (the
// metadata service 169.254.169.254 and fd00:ec2::254 among them),
// multicast, unspecified, shared, documentation, reserved, nor an IPv6
// form of any IPv4 address (mapped, NAT64, 6to4, Teredo).
func PublicAddr(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || !a.IsGlobalUnicast() || a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() ||
		a.IsMulticast() || a.IsUnspecified() || a.Zone() != "" {
		return false
	}
	for _, p := range blocked {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// errRefusedAddress is a connection to an address the policy refuses.
var errRefusedAddress = errors.New("webhook: refused to connect to a non-public address")

// Client is the HTTP client of deliveries: a Timeout for the whole
// exchange, no proxy (a proxy would hide the address it connects to), no
// redirects followed (a 3xx is a failed delivery), and every connection's
// address checked as it is made, so a name that resolved to a public
// address when saved and to a private one now (DNS rebinding) is refused.
func (p Policy) Client() *http.Client {
	dialer := &net.Dialer{
		Timeout: Timeout,
		Control: func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: %s", errRefusedAddress, address)
			}
			a := ap.Addr().Unmap()
			if PublicAddr(a) || (p.AllowLoopbackHTTP && a == netip.MustParseAddr("127.0.0.1")) {
				return nil
			}
			return fmt.Errorf("%w: %s", errRefusedAddress, address)
		},
	}
	return &http.Client{
		Timeout: Timeout,
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           dialer.DialContext,
			ForceAttemptHTTP2:     true,
			TLSHandshakeTimeout:   Timeout,
			ResponseHeaderTimeout: Timeout,
			MaxIdleConnsPerHost:   2,
			IdleConnTimeout:       90 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// CheckSecret checks the length of a secret a retailer saves.
func CheckSecret(secret string) error {
	if n := len(secret); n < MinSecretBytes || n > MaxSecretBytes {
		return catalog.Errorf(catalog.ErrInvalid, "invalid_webhook_secret",
			"the webhook secret has %d bytes; it must have %d to %d", n, MinSecretBytes, MaxSecretBytes)
	}
	return nil
}
