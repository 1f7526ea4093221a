-- A durable stream belongs to the credential (token name) that created it;
-- '' for streams created on an open server or before owners were kept.
ALTER TABLE ws_streams ADD COLUMN owner text NOT NULL DEFAULT '';
CREATE INDEX ws_streams_owner ON ws_streams (owner, name COLLATE "C");
