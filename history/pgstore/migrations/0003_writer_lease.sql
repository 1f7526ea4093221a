-- The writer lease: one row naming the process that writes this schema
-- (holder), the writer epoch it took, and until when it holds the lease by
-- the database's clock (expires_at; NULL: never held). The holder renews it
-- every third of ttl_ms in a short transaction of its own; a standby takes
-- it once expires_at has passed, incrementing writer_epoch (the fence every
-- commit checks) in the same transaction; readers judge from expires_at
-- whether anybody writes (storage.Lease). A row of its own, not columns of
-- writer_epoch, so that a renewal never waits behind a commit that holds
-- the epoch row FOR SHARE.
CREATE TABLE writer_lease (
    id          smallint    PRIMARY KEY CHECK (id = 1),
    holder      text        NOT NULL DEFAULT '',
    epoch       bigint      NOT NULL DEFAULT 0,
    ttl_ms      bigint      NOT NULL DEFAULT 0,
    acquired_at timestamptz,
    renewed_at  timestamptz,
    expires_at  timestamptz
);
INSERT INTO writer_lease (id) VALUES (1);
