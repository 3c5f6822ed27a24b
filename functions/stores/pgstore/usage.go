package pgstore

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/retailcatalog/catalog/functions/finance/usage"

	"github.com/jackc/pgx/v5"
)

// Usage per retailer per UTC day (DESIGN 10) lives in two places with the
// same columns: the control database's usage_daily, where the functions add
// what they count in memory (AddUsage), and each shard's usage_daily, where
// the diff's state changes and each chunk's apply transaction add theirs in
// the same transaction as the work (so it counts once, if it committed).
// Usage sums both.

type usageKey struct{ day, retailer string }

// mergeUsage sums records by retailer-day, in key order.
func mergeUsage(records []usage.DayUsage) []usage.DayUsage {
	byKey := map[usageKey]*usage.DayUsage{}
	for _, r := range records {
		k := usageKey{r.Date, r.RetailerID}
		if cur := byKey[k]; cur != nil {
			cur.Usage.Add(r.Usage)
			continue
		}
		c := usage.DayUsage{Date: r.Date, RetailerID: r.RetailerID}
		c.Usage.Add(r.Usage)
		byKey[k] = &c
	}
	out := make([]usage.DayUsage, 0, len(byKey))
	for _, k := range slices.SortedFunc(maps.Keys(byKey), func(a, b usageKey) int {
		return cmp.Or(cmp.Compare(a.day, b.day), cmp.Compare(a.retailer, b.retailer))
	}) {
		out = append(out, *byKey[k])
	}
	return out
}

// addUsage adds records to usage_daily (and, on the control database,
// usage_functions) through db, one statement per table.
func addUsage(ctx context.Context, db pgx.Tx, records []usage.DayUsage, functions bool) error {
	records = mergeUsage(records)
	if len(records) == 0 {
		return nil
	}
	days := make([]string, len(records))
	ids := make([]string, len(records))
	cols := make([][]int64, len(usage.Counters))
	for i := range cols {
		cols[i] = make([]int64, len(records))
	}
	var fDays, fIDs, fNames []string
	var fCalls, fMBms []int64
	for i, r := range records {
		if _, err := usage.ParseDay(r.Date); err != nil {
			return err
		}
		days[i], ids[i] = r.Date, r.RetailerID
		u := r.Usage
		for c, field := range usage.Counters {
			cols[c][i] = *field(&u)
		}
		for _, name := range slices.Sorted(maps.Keys(r.Functions)) {
			f := r.Functions[name]
			fDays, fIDs, fNames = append(fDays, r.Date), append(fIDs, r.RetailerID), append(fNames, name)
			fCalls, fMBms = append(fCalls, f.Invocations), append(fMBms, f.MBms)
		}
	}
	args := []any{days, ids}
	for _, c := range cols {
		args = append(args, c)
	}
	if _, err := db.Exec(ctx, q("usage_add"), args...); err != nil {
		return err
	}
	if len(fNames) == 0 {
		return nil
	}
	if !functions {
		return fmt.Errorf("function usage belongs to the control database")
	}
	_, err := db.Exec(ctx, q("usage_functions_add"), fDays, fIDs, fNames, fCalls, fMBms)
	return err
}

// AddUsage adds usage records to the control database, in one transaction
// (read write even for the storefront's role, whose sessions default to
// read only: its usage counters are the one thing it writes).
func (c *Control) AddUsage(ctx context.Context, records []usage.DayUsage) error {
	err := pgx.BeginTxFunc(ctx, c.pool, pgx.TxOptions{AccessMode: pgx.ReadWrite}, func(tx pgx.Tx) error {
		return addUsage(ctx, tx, records, true)
	})
	if err != nil {
		return fmt.Errorf("add usage: %w", err)
	}
	return nil
}

// addShardUsage adds one retailer's usage of today (UTC) in the caller's
// transaction on a shard.
func addShardUsage(ctx context.Context, tx pgx.Tx, retailerID string, u usage.Usage) error {
	day := time.Now().UTC().Format(usage.DateLayout)
	if err := addUsage(ctx, tx, []usage.DayUsage{{Date: day, RetailerID: retailerID, Usage: u}}, false); err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	return nil
}

// selectUsage reads usage_daily (and usage_functions when functions) for
// the days [from, to].
func selectUsage(ctx context.Context, db interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, from, to time.Time, functions bool) ([]usage.DayUsage, error) {
	rows, err := db.Query(ctx, q("usage_select"), from, to)
	if err != nil {
		return nil, err
	}
	var out []usage.DayUsage
	for rows.Next() {
		var day time.Time
		var r usage.DayUsage
		dst := []any{&day, &r.RetailerID}
		for _, field := range usage.Counters {
			dst = append(dst, field(&r.Usage))
		}
		if err := rows.Scan(dst...); err != nil {
			rows.Close()
			return nil, err
		}
		r.Date = day.Format(usage.DateLayout)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if !functions {
		return out, nil
	}
	rows, err = db.Query(ctx, q("usage_functions_select"), from, to)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var day time.Time
		var r usage.DayUsage
		var name string
		var f usage.FunctionUsage
		if err := rows.Scan(&day, &r.RetailerID, &name, &f.Invocations, &f.MBms); err != nil {
			return nil, err
		}
		r.Date = day.Format(usage.DateLayout)
		r.AddFunction(name, f)
		out = append(out, r)
	}
	return out, rows.Err()
}

// Usage returns the usage of the days [from, to] (UTC), summed over the
// control database and every shard, one record per retailer-day.
func (s *Stores) Usage(ctx context.Context, from, to time.Time) ([]usage.DayUsage, error) {
	all, err := selectUsage(ctx, s.Control.pool, from, to, true)
	if err != nil {
		return nil, fmt.Errorf("usage (control): %w", err)
	}
	for i, sh := range s.Shards {
		list, err := selectUsage(ctx, sh.pool, from, to, false)
		if err != nil {
			return nil, fmt.Errorf("usage (shard %d): %w", i, err)
		}
		all = append(all, list...)
	}
	return mergeUsage(all), nil
}

// AddUsage is Control.AddUsage.
func (s *Stores) AddUsage(ctx context.Context, records []usage.DayUsage) error {
	return s.Control.AddUsage(ctx, records)
}
