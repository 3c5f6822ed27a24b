package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// logicalID returns the logical id of the single resource of typ whose
// logical id starts with prefix (a construct id of the stack).
func (r *synthResult) logicalID(t *testing.T, typ, prefix string) string {
	t.Helper()
	var ids []string
	for id := range r.resources(typ) {
		if strings.HasPrefix(id, prefix) {
			ids = append(ids, id)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("want one %s with logical id prefix %q, got %v", typ, prefix, ids)
	}
	return ids[0]
}

// props returns the Properties of a resource by logical id.
func (r *synthResult) props(t *testing.T, id string) map[string]any {
	t.Helper()
	res, ok := r.resources("")[id]
	if !ok {
		t.Fatalf("no resource %s", id)
	}
	p, _ := res["Properties"].(map[string]any)
	return p
}

// function returns the logical id of the function deployed as name
// ("upload", "apply-small", ...), found by its description.
func (r *synthResult) function(t *testing.T, name string) string {
	t.Helper()
	var ids []string
	for id, res := range r.resources("AWS::Lambda::Function") {
		p, _ := res["Properties"].(map[string]any)
		if d, _ := p["Description"].(string); strings.HasPrefix(d, "catalog "+name+":") {
			ids = append(ids, id)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("want one function %q, got %v", name, ids)
	}
	return ids[0]
}

// roleOf returns the logical id of a function's execution role.
func (r *synthResult) roleOf(t *testing.T, fnID string) string {
	t.Helper()
	role, _ := r.props(t, fnID)["Role"].(map[string]any)
	att, _ := role["Fn::GetAtt"].([]any)
	if len(att) != 2 {
		t.Fatalf("%s: role is not a GetAtt of a role in the stack: %v", fnID, role)
	}
	return att[0].(string)
}

// statement is one IAM statement, rendered.
type statement struct {
	effect, sid string
	actions     []string
	resources   []string
	condition   string // JSON, "" when none
}

// statements returns every statement of the policies attached to role,
// which must have no managed policy.
func (r *synthResult) statements(t *testing.T, roleID string) []statement {
	t.Helper()
	if mp := r.props(t, roleID)["ManagedPolicyArns"]; mp != nil {
		t.Errorf("%s has managed policies: %v", roleID, mp)
	}
	return r.policyStatements(t, roleID)
}

// policyStatements returns every statement of the policies (inline and
// AWS::IAM::Policy) attached to role; managed policies are not looked at.
func (r *synthResult) policyStatements(t *testing.T, roleID string) []statement {
	t.Helper()
	var out []statement
	add := func(doc map[string]any) {
		stmts, _ := doc["Statement"].([]any)
		for _, s := range stmts {
			m := s.(map[string]any)
			st := statement{effect: fmt.Sprint(m["Effect"]), sid: fmt.Sprint(m["Sid"])}
			st.actions = asStrings(m["Action"])
			for _, res := range asList(m["Resource"]) {
				st.resources = append(st.resources, render(res))
			}
			if c, ok := m["Condition"]; ok {
				b, _ := json.Marshal(c)
				st.condition = string(b)
			}
			out = append(out, st)
		}
	}
	for _, res := range r.resources("AWS::IAM::Policy") {
		p := res["Properties"].(map[string]any)
		for _, ref := range asList(p["Roles"]) {
			if render(ref) == "${"+roleID+"}" {
				add(p["PolicyDocument"].(map[string]any))
			}
		}
	}
	role := r.props(t, roleID)
	for _, pol := range asList(role["Policies"]) {
		add(pol.(map[string]any)["PolicyDocument"].(map[string]any))
	}
	return out
}

// grants flattens statements into sorted "Effect action resource" lines,
// with " if <condition>" appended when there is one.
func grants(stmts []statement) []string {
	var out []string
	for _, s := range stmts {
		for _, a := range s.actions {
			for _, res := range s.resources {
				line := s.effect + " " + a + " " + res
				if s.condition != "" {
					line += " if " + s.condition
				}
				out = append(out, line)
			}
		}
	}
	sort.Strings(out)
	return dedupe(out)
}

func dedupe(s []string) []string {
	var out []string
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func asList(v any) []any {
	switch x := v.(type) {
	case nil:
		return nil
	case []any:
		return x
	default:
		return []any{x}
	}
}

func asStrings(v any) []string {
	var out []string
	for _, x := range asList(v) {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

// render turns a CloudFormation value into a readable string: Ref X is
// ${X}, Fn::GetAtt [X, A] is ${X.A}, Fn::Join is joined, Fn::Select and
// others are JSON.
func render(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64, bool, int:
		return fmt.Sprint(x)
	case map[string]any:
		if ref, ok := x["Ref"].(string); ok {
			return "${" + ref + "}"
		}
		if att, ok := x["Fn::GetAtt"].([]any); ok && len(att) == 2 {
			return "${" + fmt.Sprint(att[0]) + "." + fmt.Sprint(att[1]) + "}"
		}
		if join, ok := x["Fn::Join"].([]any); ok && len(join) == 2 {
			var parts []string
			for _, p := range asList(join[1]) {
				parts = append(parts, render(p))
			}
			return strings.Join(parts, fmt.Sprint(join[0]))
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// env returns a function's environment, rendered.
func (r *synthResult) env(t *testing.T, fnID string) map[string]string {
	t.Helper()
	e, _ := r.props(t, fnID)["Environment"].(map[string]any)
	vars, _ := e["Variables"].(map[string]any)
	out := map[string]string{}
	for k, v := range vars {
		out[k] = render(v)
	}
	return out
}

// num reads a JSON number.
func num(t *testing.T, v any) float64 {
	t.Helper()
	f, ok := v.(float64)
	if !ok {
		t.Fatalf("not a number: %v (%T)", v, v)
	}
	return f
}

func equal(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %#v\nwant %#v", what, got, want)
	}
}

func equalLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got:\n  %s\nwant:\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// failOnAssertionPanic turns a failed CDK assertion (the assertions module
// throws, jsii panics) into a test failure of the current subtest only.
func failOnAssertionPanic(t *testing.T) {
	if p := recover(); p != nil {
		t.Errorf("assertion failed: %v", p)
	}
}
