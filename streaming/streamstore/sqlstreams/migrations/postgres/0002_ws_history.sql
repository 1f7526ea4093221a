-- The identity of the history log the streams' cursors point into (one row):
-- its network, its first record's block and the head seen, checked at start.
CREATE TABLE ws_history (
    id            integer     PRIMARY KEY CHECK (id = 1),
    network_magic bigint      NOT NULL,
    first_slot    bigint      NOT NULL,
    first_hash    bytea       NOT NULL,
    head_seq      bigint      NOT NULL CHECK (head_seq >= 0),
    head_hash     bytea       NOT NULL,
    updated_at    timestamptz NOT NULL
);
