package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// TestNagAwsSolutions: the cdk-nag AwsSolutions pack leaves no unsuppressed
// error, and every suppression names a rule and carries a written reason.
func TestNagAwsSolutions(t *testing.T) {
	r := synth(t, nil)

	for _, m := range r.messages {
		switch {
		case m.level == "error":
			t.Errorf("unsuppressed error at %s: %s", m.path, m.text)
		case m.level == "warning" && strings.Contains(m.text, "AwsSolutions-"):
			t.Errorf("unsuppressed cdk-nag warning at %s: %s", m.path, m.text)
		case m.level == "warning":
			t.Logf("CDK warning at %s: %s", m.path, m.text)
		}
	}

	if len(r.nag) < 50 {
		t.Fatalf("cdk-nag report has only %d rows: the checks did not run", len(r.nag))
	}
	var suppressed []string
	for _, row := range r.nag {
		switch row.compliance {
		case "Compliant":
		case "Suppressed":
			if len(row.reason) < 40 {
				t.Errorf("%s on %s suppressed without a real reason: %q", row.rule, row.resource, row.reason)
			}
			suppressed = append(suppressed, fmt.Sprintf("%s  %s", row.rule, row.resource))
		default:
			t.Errorf("%s on %s: %s (%s)", row.rule, row.resource, row.compliance, row.level)
		}
	}
	sort.Strings(suppressed)
	t.Logf("%d suppressed findings:\n%s", len(suppressed), strings.Join(suppressed, "\n"))

	// The suppressions as written into the template metadata.
	count := 0
	for id, res := range r.resources("") {
		md, _ := res["Metadata"].(map[string]any)
		nag, _ := md["cdk_nag"].(map[string]any)
		rules, _ := nag["rules_to_suppress"].([]any)
		for _, rule := range rules {
			s := rule.(map[string]any)
			ruleID, _ := s["id"].(string)
			reason, _ := s["reason"].(string)
			count++
			if !strings.HasPrefix(ruleID, "AwsSolutions-") {
				t.Errorf("%s: suppression of %q is not an AwsSolutions rule", id, ruleID)
			}
			if len(reason) < 40 {
				t.Errorf("%s: suppression of %s has no written reason: %q", id, ruleID, reason)
			}
			if ruleID == "AwsSolutions-IAM5" || ruleID == "AwsSolutions-IAM4" {
				if applies, _ := s["applies_to"].([]any); len(applies) == 0 {
					t.Errorf("%s: %s suppressed for every finding; name the findings with appliesTo", id, ruleID)
				}
			}
		}
	}
	if count == 0 {
		t.Error("no suppressions in the template metadata")
	}

	// The same through the assertions module (it synthesizes again).
	func() {
		defer failOnAssertionPanic(t)
		errs := assertions.Annotations_FromStack(r.stack).FindError(jsii.String("*"),
			assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*")))
		for _, e := range *errs {
			// The message whole: its fields' accessors are deprecated in
			// the CDK's Go bindings (moved to @aws-cdk/cloud-assembly-api).
			msg, _ := json.Marshal(e)
			t.Errorf("cdk-nag error: %s", msg)
		}
	}()
}
