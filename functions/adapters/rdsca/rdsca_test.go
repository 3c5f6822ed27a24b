package rdsca

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"testing"
	"time"
)

// bundleSHA256 is the digest README.md gives for the file as generated from
// its source: an edit by hand fails here.
const bundleSHA256 = "7dace888be77a3eeb36f43594f249f86b2936b861436686198b340f4ed057d7a"

func TestBundleIsTheDocumentedOne(t *testing.T) {
	sum := sha256.Sum256(Bundle)
	if got := hex.EncodeToString(sum[:]); got != bundleSHA256 {
		t.Fatalf("rds-ca-bundle.pem has sha256 %s, README.md documents %s: regenerate it as README.md says and update both", got, bundleSHA256)
	}
}

// TestBundleHoldsTheCAsTheFunctionsNeed: every block is a CA certificate, and
// the roots that sign Aurora endpoints (per region, current generation) and
// RDS Proxy endpoints (Amazon Trust Services) are there and valid for years.
func TestBundleHoldsTheCAsTheFunctionsNeed(t *testing.T) {
	rest := Bundle
	subjects := map[string]time.Time{}
	n := 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatalf("certificate %d: %v", n, err)
		}
		if !cert.IsCA {
			t.Errorf("%s is not a CA certificate", cert.Subject.CommonName)
		}
		subjects[cert.Subject.CommonName] = cert.NotAfter
		n++
	}
	if len(rest) != 0 || n != 120 {
		t.Fatalf("want 120 certificates and nothing else, got %d and %d stray bytes", n, len(rest))
	}
	soon := time.Now().AddDate(5, 0, 0)
	for _, cn := range []string{
		"Amazon RDS us-east-1 Root CA RSA2048 G1", "Amazon RDS us-east-1 Root CA RSA4096 G1", "Amazon RDS us-east-1 Root CA ECC384 G1",
		"Amazon RDS eu-west-1 Root CA RSA2048 G1", "Amazon RDS ap-southeast-2 Root CA RSA2048 G1",
		"Amazon Root CA 1", "Amazon Root CA 2", "Amazon Root CA 3", "Amazon Root CA 4",
	} {
		notAfter, ok := subjects[cn]
		if !ok {
			t.Errorf("no %q in the bundle", cn)
		} else if notAfter.Before(soon) {
			t.Errorf("%q expires %s, within five years", cn, notAfter.Format(time.DateOnly))
		}
	}
	if pool := x509.NewCertPool(); !pool.AppendCertsFromPEM(Bundle) {
		t.Error("the bundle does not load as a certificate pool")
	}
}
