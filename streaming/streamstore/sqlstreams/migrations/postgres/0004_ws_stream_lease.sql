-- The round-trip lease of a durable stream served by several processes
-- (readers on one database): at most one process has a batch of the stream
-- in flight. lease_holder is that process ('' when none), lease_until when
-- its lease lapses unless renewed; lease_last is the process that held the
-- last round trip and lease_wanted one that asked while another held it,
-- until lease_wanted_until: the last holder then yields the next round trip
-- to it, so the processes serving the stream take turns.
ALTER TABLE ws_streams
    ADD COLUMN lease_holder       text        NOT NULL DEFAULT '',
    ADD COLUMN lease_until        timestamptz,
    ADD COLUMN lease_last         text        NOT NULL DEFAULT '',
    ADD COLUMN lease_wanted       text        NOT NULL DEFAULT '',
    ADD COLUMN lease_wanted_until timestamptz;
