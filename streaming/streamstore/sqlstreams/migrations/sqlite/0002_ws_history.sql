-- The identity of the history log the streams' cursors point into (one row):
-- its network, its first record's block and the head seen, checked at start.
CREATE TABLE ws_history (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    network_magic INTEGER NOT NULL,
    first_slot    INTEGER NOT NULL,
    first_hash    BLOB    NOT NULL,
    head_seq      INTEGER NOT NULL CHECK (head_seq >= 0),
    head_hash     BLOB    NOT NULL,
    updated_at    INTEGER NOT NULL -- Unix microseconds
) STRICT;
