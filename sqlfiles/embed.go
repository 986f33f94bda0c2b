// Package sqlfiles holds the schema migrations and sqlc queries, one folder
// per engine. The migrations are embedded so the binary applies them at
// start-up; sqlc reads the same files to generate storage/sqlite/sqlitedb and
// storage/postgres/pgdb.
package sqlfiles

import "embed"

// SQLiteSchema holds sqlite/schema/NNNN_name.sql, applied in name order.
//
//go:embed sqlite/schema/*.sql
var SQLiteSchema embed.FS

// PostgresSchema holds postgres/schema/NNNN_name.sql, applied in name
// order.
//
//go:embed postgres/schema/*.sql
var PostgresSchema embed.FS
