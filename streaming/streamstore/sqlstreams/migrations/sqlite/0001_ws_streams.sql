-- Durable streams of the streaming API and their acknowledged cursors.
CREATE TABLE ws_streams (
    name             TEXT    PRIMARY KEY,
    filter           TEXT    NOT NULL,
    mode             TEXT    NOT NULL CHECK (mode IN ('ack', 'broadcast')),
    batch_size       INTEGER NOT NULL CHECK (batch_size > 0),
    batch_timeout_ms INTEGER NOT NULL CHECK (batch_timeout_ms >= 0),
    cursor           TEXT    NOT NULL,
    batch            INTEGER NOT NULL DEFAULT 0,
    records          INTEGER NOT NULL DEFAULT 0,
    created_at       INTEGER NOT NULL, -- Unix microseconds
    updated_at       INTEGER NOT NULL
) STRICT;
