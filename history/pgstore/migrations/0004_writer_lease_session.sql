-- The writer lease's session: besides renewing the row, the holder holds a
-- session advisory lock on its lease connection (storage.LeaseLockKey) and
-- names that session here: session_pid, its server process id, and
-- session_epoch, the epoch it holds the lock for (a row written by a
-- binary that knows nothing of the lock leaves them as they were, and a
-- standby trusts them only while session_epoch = epoch). A standby that
-- gets that lock while the row names a session of the current epoch knows
-- the session has ended (the holder died, or lost its connection: its
-- epoch fences what it would still commit) and takes the lease at once,
-- without waiting for expires_at; a hung holder keeps its session, and
-- the expiry decides. NULL: no session to watch (the holder could not take
-- the lock, or reaches the server through a pooling proxy).
ALTER TABLE writer_lease
    ADD COLUMN session_pid   integer,
    ADD COLUMN session_epoch bigint;
