// Package sql holds the numbered schema migrations of the control database and
// of every shard database, embedded so each entry point can apply them at start.
package sql

import "embed"

// Control holds the control database migrations (retailer registry, product
// directory), and those of roles/ (the functions' database roles) and
// usage/ (the usage counters, DESIGN 10).
//
//go:embed control/*.sql roles/*.sql usage/*.sql
var Control embed.FS

// Shard holds the shard database migrations (products, generations, chunk
// progress, outbox), and those of roles/ and usage/.
//
//go:embed shard/*.sql roles/*.sql usage/*.sql
var Shard embed.FS
