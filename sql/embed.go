// Package sql holds the numbered schema migrations of the control database and
// of every shard database, embedded so each entry point can apply them at start.
package sql

import "embed"

// Control holds the control database migrations (retailer registry, product
// directory), and those of roles/ (the functions' database roles).
//
//go:embed control/*.sql roles/*.sql
var Control embed.FS

// Shard holds the shard database migrations (products, generations, chunk
// progress, outbox), and those of roles/.
//
//go:embed shard/*.sql roles/*.sql
var Shard embed.FS
