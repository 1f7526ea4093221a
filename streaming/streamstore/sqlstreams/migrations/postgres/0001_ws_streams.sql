-- Durable streams of the streaming API and their acknowledged cursors.
CREATE TABLE ws_streams (
    name             text        PRIMARY KEY,
    filter           jsonb       NOT NULL,
    mode             text        NOT NULL CHECK (mode IN ('ack', 'broadcast')),
    batch_size       integer     NOT NULL CHECK (batch_size > 0),
    batch_timeout_ms bigint      NOT NULL CHECK (batch_timeout_ms >= 0),
    cursor           text        NOT NULL,
    batch            bigint      NOT NULL DEFAULT 0,
    records          bigint      NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL
);
