package costs

import (
	"strings"
	"testing"
)

// TestEveryPriceIsCheckedOrUnverified keeps the table honest: each price
// names the page copy it was compared with, or is listed as unverified
// and named in the status.
func TestEveryPriceIsCheckedOrUnverified(t *testing.T) {
	t.Parallel()
	p := DefaultPrices()
	unverified := map[string]bool{}
	for _, k := range p.Unverified {
		unverified[k] = true
		if !strings.Contains(p.Status, k) {
			t.Errorf("unverified %s is not named in the status", k)
		}
	}
	for k, v := range p.Prices {
		switch {
		case v.Checked == nil && !unverified[k]:
			t.Errorf("price %s: neither checked nor listed as unverified", k)
		case v.Checked != nil && v.Checked.By == "aws" && !strings.Contains(v.Checked.URL, "aws.amazon.com/"):
			t.Errorf("price %s: checked by aws on %s", k, v.Checked.URL)
		}
	}
	// Confirmed on the stored CloudFront page: 2 PB (2,097,152 GB) costs
	// 10,240 x 0.085 + 40,960 x 0.08 + 102,400 x 0.06 + 358,400 x 0.04
	// + 536,576 x 0.03 + 1,048,576 x 0.025
	// = 870.40 + 3,276.80 + 6,144 + 14,336 + 16,097.28 + 26,214.40 = $66,938.88.
	if got := p.Monthly(PriceCloudFrontDataOutGB, 2097152); !near(got, 66938.88) {
		t.Errorf("2 PB CloudFront out: $%v, want $66,938.88", got)
	}
}

func TestCheckedAndUnverifiedAreOptionalButWellFormed(t *testing.T) {
	t.Parallel()
	raw := string(pricesJSON)
	// A table from before these fields (2026-11-30.1) still parses.
	old := raw
	for strings.Contains(old, `"checked": {`) {
		i := strings.Index(old, `,
      "checked": {`)
		j := strings.Index(old[i:], "}\n") + i + 1
		old = old[:i] + old[j:]
	}
	old = strings.Replace(old, `"unverified": ["rds_proxy_acu_hour", "cloudfront_https_request"],`, ``, 1)
	if strings.Contains(old, `"checked":`) || strings.Contains(old, `"unverified":`) {
		t.Fatalf("could not strip the new fields")
	}
	if _, err := ParsePrices([]byte(old)); err != nil {
		t.Errorf("a table without checked and unverified: %v", err)
	}
	for _, bad := range []string{
		strings.Replace(raw, `"by": "aws"`, `"by": "memory"`, 1),
		strings.Replace(raw, `"unverified": ["rds_proxy_acu_hour"`, `"unverified": ["kms_key_month"`, 1),
		strings.Replace(raw, `"unverified": ["rds_proxy_acu_hour"`, `"unverified": ["no_such_price"`, 1),
	} {
		if bad == raw {
			t.Fatalf("replacement did not apply")
		}
		if _, err := ParsePrices([]byte(bad)); err == nil {
			t.Errorf("accepted a bad table: %.200s", bad)
		}
	}
}
