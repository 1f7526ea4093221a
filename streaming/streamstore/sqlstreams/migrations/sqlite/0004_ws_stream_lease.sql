-- The round-trip lease of a durable stream (see the PostgreSQL migration;
-- one process serves a SQLite store, so the lease only ever has one holder
-- here, and the conformance suite keeps both alike). Times in Unix
-- microseconds.
ALTER TABLE ws_streams ADD COLUMN lease_holder TEXT NOT NULL DEFAULT '';
ALTER TABLE ws_streams ADD COLUMN lease_until INTEGER;
ALTER TABLE ws_streams ADD COLUMN lease_last TEXT NOT NULL DEFAULT '';
ALTER TABLE ws_streams ADD COLUMN lease_wanted TEXT NOT NULL DEFAULT '';
ALTER TABLE ws_streams ADD COLUMN lease_wanted_until INTEGER;
