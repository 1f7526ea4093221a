-- The writer's fencing epoch, beside the chain checkpoint: one row. Each
-- process that takes the writer lock (storelock.Writer) increments it and
-- keeps the new value; every commit of the history, of the contract
-- projection and of a durable stream's cursor checks it in its transaction
-- (the row read FOR SHARE, which the increment's UPDATE waits for) and is
-- refused when it differs: a writer that lost its lock but still runs can
-- never commit after the next one took over.
CREATE TABLE writer_epoch (
    id    smallint PRIMARY KEY CHECK (id = 1),
    epoch bigint   NOT NULL
);
INSERT INTO writer_epoch (id, epoch) VALUES (1, 0);
