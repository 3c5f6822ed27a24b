package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/retailcatalog/catalog/functions/operate/ops"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	catalogsql "github.com/retailcatalog/catalog/sql"
)

// TestOps: the ops function (arm64, in the app subnets, its own database
// role), its two schedules, its reconcile-jobs source, the operations
// alarms, the dashboard rows and the saved Logs Insights queries.
func TestOps(t *testing.T) {
	r := synth(t, nil)
	fn := r.function(t, "ops")
	props := r.props(t, fn)
	equal(t, "architecture", props["Architectures"], []any{"arm64"})
	equal(t, "runtime", props["Runtime"], "provided.al2023")
	if subnets := render(props["VpcConfig"].(map[string]any)["SubnetIds"]); !strings.Contains(subnets, "Vpcapp") {
		t.Errorf("ops not in the app subnets: %s", subnets)
	}
	env := r.env(t, fn)
	equal(t, "database role", env[EnvDBUser], catalogsql.RoleOps)
	equal(t, "IAM authentication", env[EnvDBIAMAuth], "true")
	equal(t, "admin token", env[EnvAdminTokenSecret], "${"+r.logicalID(t, "AWS::SecretsManager::Secret", "AdminTokenSecret")+"}")
	if env[EnvShardReaders] == "" || env[EnvControlReader] == "" {
		t.Errorf("why cannot see the replicas: %v", env)
	}

	// The queue base names every queue the ops function reads (config's
	// names), with the stack's queue names.
	base := env[EnvQueueURLBase]
	wantBase := "https://sqs.${AWS::Region}.${AWS::URLSuffix}/${AWS::AccountId}/" + testStackName + "-"
	equal(t, "queue URL base", base, wantBase)
	names := map[string]bool{}
	for _, q := range r.resources("AWS::SQS::Queue") {
		names[fmt.Sprint(q["Properties"].(map[string]any)["QueueName"])] = true
	}
	for _, name := range []string{"arrivals", "arrivals-dlq", "diff-jobs-dlq.fifo", "apply-small-dlq.fifo", "apply-large-dlq.fifo",
		"reconcile-jobs", "reconcile-jobs-dlq", "analytics", "analytics-dlq", "webhooks", "webhooks-dlq"} {
		if !names[testStackName+"-"+name] {
			t.Errorf("the ops function derives queue %q, which the stack does not have (%v)", name, names)
		}
	}

	// Schedules: EventBridge Scheduler invokes ops with its task, through
	// a role that may invoke ops only.
	schedRole := r.logicalID(t, "AWS::IAM::Role", "OpsSchedulerRole")
	tasks := map[string]string{}
	for id, s := range r.resources("AWS::Scheduler::Schedule") {
		p := s["Properties"].(map[string]any)
		target := p["Target"].(map[string]any)
		if render(target["Arn"]) != "${"+fn+".Arn}" {
			continue
		}
		equal(t, id+" role", render(target["RoleArn"]), "${"+schedRole+".Arn}")
		var input ops.ScheduledEvent
		if err := json.Unmarshal([]byte(fmt.Sprint(target["Input"])), &input); err != nil {
			t.Fatalf("%s input %v: %v", id, target["Input"], err)
		}
		tasks[input.Task] = fmt.Sprint(p["ScheduleExpression"])
	}
	equal(t, "ops schedules", tasks, map[string]string{ops.TaskSweep: "rate(5 minutes)", ops.TaskReconcile: reconcileCron, ops.TaskGC: gcCron,
		ops.TaskMoves: "rate(1 minute)"})
	equalLines(t, "scheduler role", grants(r.statements(t, schedRole)), []string{
		"Allow lambda:InvokeFunction ${" + fn + ".Arn}", "Allow lambda:InvokeFunction ${" + fn + ".Arn}:*"})

	// Alarms on the operations metrics: no dimension, the namespace the
	// functions write, and what no data means.
	type alarm struct {
		metric, stat, missing string
		threshold, period     float64
	}
	got := map[string]alarm{}
	for id, a := range r.resources("AWS::CloudWatch::Alarm") {
		p := a["Properties"].(map[string]any)
		if p["Namespace"] != metrics.DefaultNamespace || p["MetricName"] == metrics.OutboxAgeSeconds {
			continue
		}
		stat := fmt.Sprint(p["Statistic"])
		if p["ExtendedStatistic"] != nil {
			stat = fmt.Sprint(p["ExtendedStatistic"])
		}
		got[regexp.MustCompile(`[0-9A-F]{8}$`).ReplaceAllString(id, "")] = alarm{fmt.Sprint(p["MetricName"]), stat,
			fmt.Sprint(p["TreatMissingData"]), num(t, p["Threshold"]), num(t, p["Period"])}
	}
	equal(t, "operations alarms", got, map[string]alarm{
		"GenerationsStuckAlarm":    {metrics.GenerationsStuck, "Maximum", "breaching", 1, 3 * sweepStuckEvery.Seconds()},
		"GenerationsFailedAlarm":   {metrics.GenerationsFailed, "Sum", "notBreaching", 1, alarmPeriod.Seconds()},
		"ReconcileDivergenceAlarm": {metrics.ReconcileDivergentRetailers, "Sum", "notBreaching", 1, 3600},
		"ReconcileFailuresAlarm":   {metrics.ReconcileFailures, "Sum", "notBreaching", 1, 3600},
		"PutToAppliedP99Alarm":     {metrics.PutToAppliedSeconds, "p99", "notBreaching", putToAppliedP99.Seconds(), 900},
		"OutboxParkedAlarm":        {metrics.OutboxParked, "Maximum", "notBreaching", 1, alarmPeriod.Seconds()},
	})

	// The dashboard's operations rows (issue 12).
	var body string
	for _, d := range r.resources("AWS::CloudWatch::Dashboard") {
		body = render(d["Properties"].(map[string]any)["DashboardBody"])
	}
	for _, want := range []string{"Ingestion funnel", metrics.UploadsReserved, metrics.UploadsReceived, `"State","applied"`,
		"PUT to applied", `"stat":"p50"`, `"stat":"p99"`, "Dead-letter queue depths", "reconcile-jobs-dlq",
		metrics.ReconcileDivergentRetailers, metrics.ReconcileFailures, "Stuck generations", metrics.GenerationsStuck,
		metrics.GenerationsRedriven, "Operations alarms", "docs/RUNBOOK.md"} {
		if !strings.Contains(body, want) {
			t.Errorf("dashboard lacks %q", want)
		}
	}

	// Saved Logs Insights queries over every function's log group.
	var groups []string
	for _, id := range []string{fn, r.function(t, "diff"), r.function(t, "apply-small")} {
		lc := r.props(t, id)["LoggingConfig"].(map[string]any)
		groups = append(groups, render(lc["LogGroup"]))
	}
	queries := map[string]string{}
	for _, q := range r.resources("AWS::Logs::QueryDefinition") {
		p := q["Properties"].(map[string]any)
		queries[fmt.Sprint(p["Name"])] = fmt.Sprint(p["QueryString"])
		var in []string
		for _, g := range asList(p["LogGroupNames"]) {
			in = append(in, render(g))
		}
		for _, g := range groups {
			if !strings.Contains(strings.Join(in, " "), g) {
				t.Errorf("query %v does not read %s", p["Name"], g)
			}
		}
	}
	var names2 []string
	for name := range queries {
		names2 = append(names2, strings.TrimPrefix(name, testStackName+"/"))
	}
	sort.Strings(names2)
	want := OpsQueryNames()
	sort.Strings(want)
	equal(t, "saved queries", names2, want)
	trace := queries[testStackName+"/catalog/trace-retailer-generation"]
	for _, s := range []string{`retailer_id = "R"`, "generation = G", "sort @timestamp asc"} {
		if !strings.Contains(trace, s) {
			t.Errorf("trace query lacks %q:\n%s", s, trace)
		}
	}
}

// TestRoutesAreTheDocumentedOnes: the HTTP API deploys exactly the routes
// of docs/openapi.yaml (whose own test checks they are the ones the
// handlers serve), each on the function that serves it.
func TestRoutesAreTheDocumentedOnes(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "docs", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var documented []string
	inPaths, path := false, ""
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		switch {
		case line == "paths:":
			inPaths = true
		case inPaths && len(line) > 0 && line[0] != ' ' && line[0] != '#':
			inPaths = false
		case inPaths && strings.HasPrefix(line, "  /") && strings.HasSuffix(line, ":"):
			path = strings.TrimSuffix(strings.TrimSpace(line), ":")
		case inPaths && path != "" && regexp.MustCompile(`^    (get|put|post|delete|patch):`).MatchString(line):
			method := strings.ToUpper(strings.TrimSuffix(strings.TrimSpace(line), ":"))
			// API Gateway's greedy segment: a product_id may hold an encoded '/'.
			documented = append(documented, method+" "+strings.ReplaceAll(path, "{product_id}", "{product_id+}"))
		}
	}
	var deployed []string
	for _, r := range Routes {
		deployed = append(deployed, r.Key())
		if r.Function != "upload" && r.Function != "read" && r.Function != "ops" {
			t.Errorf("%s: function %q", r.Key(), r.Function)
		}
		if strings.HasPrefix(r.Path, "/v1/admin/") && r.RateLimit == 0 {
			t.Errorf("%s: an admin route without its own throttle", r.Key())
		}
	}
	equalLines(t, "routes deployed vs documented", sortedCopy(deployed), sortedCopy(documented))
}

// TestEveryAlarmHasARunbookSection: each alarm of the stack (by construct
// id; shards numbered Shard<N>) is named in a heading of docs/RUNBOOK.md,
// and every alarm the runbook names exists.
func TestEveryAlarmHasARunbookSection(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "docs", "RUNBOOK.md"))
	if err != nil {
		t.Fatal(err)
	}
	headed := map[string]bool{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		for _, m := range regexp.MustCompile("`([A-Za-z0-9<>]+Alarm)`").FindAllStringSubmatch(line, -1) {
			headed[m[1]] = true
		}
	}
	r := synth(t, nil)
	defined := map[string]bool{}
	for id := range r.resources("AWS::CloudWatch::Alarm") {
		name := regexp.MustCompile(`[0-9A-F]{8}$`).ReplaceAllString(id, "")
		name = regexp.MustCompile(`^Shard[0-9]+`).ReplaceAllString(name, "Shard<N>")
		defined[name] = true
		if !headed[name] {
			t.Errorf("alarm %s has no section in docs/RUNBOOK.md (a heading naming `%s`)", id, name)
		}
	}
	for name := range headed {
		if !defined[name] {
			t.Errorf("docs/RUNBOOK.md has a section for %s, which the stack does not define", name)
		}
	}
}
