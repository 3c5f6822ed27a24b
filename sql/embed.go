// Package sql holds the numbered schema migrations of the control database and
// of every shard database, embedded so each entry point can apply them at start.
package sql

import "embed"

// Control holds the control database migrations (retailer registry, product directory).
//
//go:embed control/*.sql
var Control embed.FS

// Shard holds the shard database migrations (products, generations, chunk progress, outbox).
//
//go:embed shard/*.sql
var Shard embed.FS
