// Package cvsql is the SQL of the contract store (sqlcontracts) on both
// databases: the commit as a list of statements, the reads, row encoding
// and scanning. Statements are written with ? placeholders; the store
// numbers them for PostgreSQL (storage.Rebind) before sending. Both
// dialects accept the rest as written (ON CONFLICT upserts, row values).
package cvsql

// MigrationsTable is the table that records the contract store's applied
// migrations; it is separate from the history's schema_migrations, so the
// two schemas version independently in one database.
const MigrationsTable = "cv_schema_migrations"
