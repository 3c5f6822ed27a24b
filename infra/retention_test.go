package main

import (
	"strings"
	"testing"

	"github.com/retailcatalog/catalog/functions/finance/costs"
)

// TestClaimChecksOutliveTheirMessages: an object a message refers to is
// kept longer than that message can be delivered, so a message redriven
// from a dead-letter queue never finds its object gone (DESIGN 8). Chunk
// objects (apply messages), change objects (change events) and superseded
// indexes: the longest any queue and its DLQ can hold a message (FIFO DLQs
// restart the retention clock, so queue + DLQ). Uploads (diff jobs, a
// standard queue, whose clock runs from the first send): the DLQs'
// retention. Every lifecycle rule that covers a prefix counts, so a broader
// rule cannot expire the objects sooner.
func TestClaimChecksOutliveTheirMessages(t *testing.T) {
	const day = 86400.0
	for _, overrides := range []map[string]any{nil, scaled} {
		r := synth(t, overrides)
		retention := func(id string) float64 {
			if v, ok := r.props(t, id)["MessageRetentionPeriod"]; ok {
				return num(t, v)
			}
			return 4 * day // the SQS default
		}
		var longest, longestDLQ float64
		var longestQueue string
		queues := 0
		for id := range r.resources("AWS::SQS::Queue") {
			policy, ok := r.props(t, id)["RedrivePolicy"].(map[string]any)
			if !ok {
				continue
			}
			queues++
			dlq := strings.TrimSuffix(strings.TrimPrefix(render(policy["deadLetterTargetArn"]), "${"), ".Arn}")
			if worst := retention(id) + retention(dlq); worst > longest {
				longest, longestQueue = worst, id
			}
			longestDLQ = max(longestDLQ, retention(dlq))
		}
		if queues < 3 || longest < 14*day {
			t.Fatalf("found %d queues with a DLQ, longest %v s: the template was not read right", queues, longest)
		}

		bucket := r.logicalID(t, "AWS::S3::Bucket", "CatalogBucket")
		lifecycle, _ := r.props(t, bucket)["LifecycleConfiguration"].(map[string]any)
		// expiresAfter is the fewest days after which a rule expires objects
		// under prefix (with the tag filter, when given), 0 when none does.
		expiresAfter := func(prefix string, tagged bool) float64 {
			soonest := 0.0
			for _, rule := range asList(lifecycle["Rules"]) {
				m := rule.(map[string]any)
				days, ok := m["ExpirationInDays"]
				if !ok || m["Status"] != "Enabled" {
					continue
				}
				rulePrefix, _ := m["Prefix"].(string)
				if !strings.HasPrefix(prefix, rulePrefix) || (m["TagFilters"] != nil && !tagged) {
					continue
				}
				if d := num(t, days); soonest == 0 || d < soonest {
					soonest = d
				}
			}
			return soonest
		}
		for _, c := range []struct {
			what, prefix string
			tagged       bool
			atLeast      float64
		}{
			{"chunk objects", prefixChunks, false, longest},
			{"change objects", prefixChanges, false, longest},
			{"superseded indexes", prefixIndexes, true, longest},
			{"retired uploads", prefixSnapshots, true, longestDLQ},
		} {
			days := expiresAfter(c.prefix, c.tagged)
			if days == 0 {
				t.Errorf("%s (%s): no lifecycle rule expires them", c.what, c.prefix)
				continue
			}
			if days*day < c.atLeast {
				t.Errorf("%s (%s) expire after %v days, before a message can stop being delivered (%v days, %s and its DLQ)",
					c.what, c.prefix, days, c.atLeast/day, longestQueue)
			}
			t.Logf("%v: %s kept %v days, messages deliverable up to %v days", overrides, c.what, days, c.atLeast/day)
		}
		if untagged := expiresAfter(prefixIndexes, false); untagged != 0 {
			t.Errorf("indexes not tagged superseded expire after %v days: an applied baseline must never expire", untagged)
		}
		if untagged := expiresAfter(prefixSnapshots, false); untagged != 0 {
			t.Errorf("uploads not tagged retired expire after %v days: the applied generation's upload must never expire "+
				"(an undo reads it, I10)", untagged)
		}
	}
}

// TestCostModelKeepsChunksAsLongAsTheBucket: the cost model prices chunk
// storage for as long as the lifecycle rule keeps chunks.
func TestCostModelKeepsChunksAsLongAsTheBucket(t *testing.T) {
	if got := costs.DefaultFigures().V(costs.FigChunkRetentionDays); got != float64(claimCheckDays) {
		t.Errorf("functions/finance/costs/figures.json chunk_retention_days = %v, the bucket keeps chunks %d days", got, claimCheckDays)
	}
}
