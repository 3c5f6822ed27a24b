// Package metricstest checks metric lines against the CloudWatch Embedded
// Metric Format specification's structure and reads them back, for the
// tests of any function that emits metrics:
//
//	var out metricstest.Capture
//	h.Metrics = metrics.New(&out, metrics.Options{Function: "apply"})
//	... run the handler ...
//	require.NoError(t, out.Validate())
//	require.Equal(t, 3.0, out.Sum(metrics.ChunksApplied))
package metricstest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// units are the CloudWatch units a MetricDefinition may name.
var units = map[string]bool{}

func init() {
	for _, u := range strings.Split("Seconds Microseconds Milliseconds Bytes Kilobytes Megabytes Gigabytes Terabytes "+
		"Bits Kilobits Megabits Gigabits Terabits Percent Count Bytes/Second Kilobytes/Second Megabytes/Second "+
		"Gigabytes/Second Terabytes/Second Bits/Second Kilobits/Second Megabits/Second Gigabits/Second "+
		"Terabits/Second Count/Second None", " ") {
		units[u] = true
	}
}

// forbiddenDimensions are keys that must never be a dimension (DESIGN 9: cost).
var forbiddenDimensions = map[string]bool{"retailer_id": true, "RetailerID": true, "RetailerId": true,
	"generation": true, "request_id": true, "api_request_id": true, "product_id": true}

// Validate checks one line against the structure the EMF specification
// requires: a JSON object of at most 1 MB whose "_aws" member holds only
// an integer millisecond "Timestamp" and a "CloudWatchMetrics" array of
// MetricDirectives, each with only a non-empty "Namespace", "Dimensions"
// (at least one DimensionSet of at most 30 keys, each naming a string
// member of the root of at most 1024 characters) and "Metrics" (1-100
// MetricDefinitions with only a "Name" naming a numeric root member, or an
// array of at most 100 numbers, an optional valid "Unit" and an optional
// "StorageResolution" of 1 or 60). It also refuses, by this project's
// rule, a retailer, generation, product or request id as a dimension.
func Validate(line []byte) error {
	line = bytes.TrimRight(line, "\n")
	if len(line) > 1<<20 {
		return fmt.Errorf("line of %d bytes, over 1 MB", len(line))
	}
	var root map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	if dec.More() {
		return errors.New("data after the JSON object")
	}
	var meta map[string]json.RawMessage
	if err := strict(root["_aws"], &meta); err != nil {
		return fmt.Errorf("_aws: %w", err)
	}
	for k := range meta {
		if k != "Timestamp" && k != "CloudWatchMetrics" {
			return fmt.Errorf("_aws has a member %q the specification does not define", k)
		}
	}
	var ts json.Number
	if err := strict(meta["Timestamp"], &ts); err != nil {
		return fmt.Errorf("_aws.Timestamp: %w", err)
	}
	ms, err := ts.Int64()
	if err != nil || ms <= 0 {
		return fmt.Errorf("_aws.Timestamp %s: want milliseconds since 1970 as an integer", ts)
	}
	if at := time.UnixMilli(ms); at.Year() < 2000 || at.Year() > 2200 {
		return fmt.Errorf("_aws.Timestamp %d is %s: not milliseconds since 1970", ms, at.UTC())
	}
	var directives []map[string]json.RawMessage
	if err := strict(meta["CloudWatchMetrics"], &directives); err != nil {
		return fmt.Errorf("_aws.CloudWatchMetrics: %w", err)
	}
	if len(directives) == 0 {
		return errors.New("_aws.CloudWatchMetrics is empty")
	}
	for i, d := range directives {
		if err := validateDirective(root, d); err != nil {
			return fmt.Errorf("_aws.CloudWatchMetrics[%d]: %w", i, err)
		}
	}
	return nil
}

func validateDirective(root map[string]json.RawMessage, d map[string]json.RawMessage) error {
	for k := range d {
		if k != "Namespace" && k != "Dimensions" && k != "Metrics" {
			return fmt.Errorf("member %q the specification does not define", k)
		}
	}
	var ns string
	if err := strict(d["Namespace"], &ns); err != nil || ns == "" || len(ns) > 1024 {
		return fmt.Errorf("member Namespace: want a string of 1-1024 characters (%v)", err)
	}
	var dims [][]string
	if err := strict(d["Dimensions"], &dims); err != nil {
		return fmt.Errorf("member Dimensions: %w", err)
	}
	if len(dims) == 0 {
		return errors.New("member Dimensions: want at least one DimensionSet")
	}
	for _, set := range dims {
		if len(set) > 30 {
			return fmt.Errorf("a DimensionSet of %d keys, over 30", len(set))
		}
		for _, key := range set {
			if forbiddenDimensions[key] {
				return fmt.Errorf("dimension %q: never a dimension (one metric per value: cost)", key)
			}
			var v string
			if err := strict(root[key], &v); err != nil {
				return fmt.Errorf("dimension %q: the root must hold it as a string (%v)", key, err)
			}
			if len(v) > 1024 {
				return fmt.Errorf("dimension %q: value over 1024 characters", key)
			}
		}
	}
	var defs []map[string]json.RawMessage
	if err := strict(d["Metrics"], &defs); err != nil {
		return fmt.Errorf("member Metrics: %w", err)
	}
	if len(defs) == 0 || len(defs) > 100 {
		return fmt.Errorf("member Metrics: %d MetricDefinitions, want 1-100", len(defs))
	}
	for _, def := range defs {
		for k := range def {
			if k != "Name" && k != "Unit" && k != "StorageResolution" {
				return fmt.Errorf("MetricDefinition member %q the specification does not define", k)
			}
		}
		var name string
		if err := strict(def["Name"], &name); err != nil || name == "" {
			return fmt.Errorf("MetricDefinition: want a Name (%v)", err)
		}
		if err := numericTarget(root[name]); err != nil {
			return fmt.Errorf("metric %q: %w", name, err)
		}
		if raw, ok := def["Unit"]; ok {
			var u string
			if err := strict(raw, &u); err != nil || !units[u] {
				return fmt.Errorf("metric %q: unit %s is not a CloudWatch unit", name, raw)
			}
		}
		if raw, ok := def["StorageResolution"]; ok {
			var r int
			if err := strict(raw, &r); err != nil || (r != 1 && r != 60) {
				return fmt.Errorf("metric %q: StorageResolution %s, want 1 or 60", name, raw)
			}
		}
	}
	return nil
}

// numericTarget checks a metric's root member: a number or an array of at most 100 numbers.
func numericTarget(raw json.RawMessage) error {
	if raw == nil {
		return errors.New("no such member on the root")
	}
	raw = bytes.TrimSpace(raw)
	var arr []json.RawMessage
	if len(raw) > 0 && raw[0] == '[' {
		if err := strict(raw, &arr); err != nil {
			return err
		}
		if len(arr) > 100 {
			return fmt.Errorf("array of %d values, over 100", len(arr))
		}
	} else {
		arr = []json.RawMessage{raw}
	}
	for _, v := range arr {
		var f float64
		if err := json.Unmarshal(v, &f); err != nil {
			return fmt.Errorf("value %s: want a number or an array of numbers", v)
		}
	}
	return nil
}

// strict decodes raw into v, numbers kept exact; a missing member is an error.
func strict(raw json.RawMessage, v any) error {
	if raw == nil {
		return errors.New("missing")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(v)
}

// Line is one metric line read back.
type Line map[string]any

// Capture is an io.Writer collecting metric lines (and any other lines
// written to it, which Lines skips). It is safe for concurrent use.
type Capture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *Capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

// Bytes returns everything written so far.
func (c *Capture) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.buf.Bytes())
}

// raw returns every line written so far that has an "_aws" member.
func (c *Capture) raw() [][]byte {
	c.mu.Lock()
	data := bytes.Clone(c.buf.Bytes())
	c.mu.Unlock()
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 2<<20)
	for sc.Scan() {
		if bytes.Contains(sc.Bytes(), []byte(`"_aws"`)) {
			out = append(out, bytes.Clone(sc.Bytes()))
		}
	}
	return out
}

// Validate checks every metric line written so far.
func (c *Capture) Validate() error {
	for _, l := range c.raw() {
		if err := Validate(l); err != nil {
			return fmt.Errorf("%w: %s", err, l)
		}
	}
	return nil
}

// Lines returns the metric lines written so far, decoded.
func (c *Capture) Lines() []Line {
	var out []Line
	for _, l := range c.raw() {
		var m Line
		if json.Unmarshal(l, &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// Sum adds up a metric over every line where each of the "key=value"
// filters holds (a dimension, or a property such as retailer_id=r1).
func (c *Capture) Sum(name string, filters ...string) float64 {
	var sum float64
	for _, l := range c.Lines() {
		if !l.matches(filters) {
			continue
		}
		if v, ok := l[name].(float64); ok {
			sum += v
		}
	}
	return sum
}

func (l Line) matches(filters []string) bool {
	for _, f := range filters {
		k, v, _ := strings.Cut(f, "=")
		if fmt.Sprint(l[k]) != v {
			return false
		}
	}
	return true
}
