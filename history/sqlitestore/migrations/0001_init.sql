-- The history log, its contract index, the chain checkpoint and the tracked
-- Marlowe UTxO set, in STRICT tables. Hashes and transaction ids are 32-byte
-- blobs; output references (contract ids, UTxO refs) are 36-byte blobs: the
-- transaction id then the output index as 4 big-endian bytes, so blob order
-- is ledger order. The schema mirrors history/pgstore's.

-- The network the database follows and where it started following: one row.
CREATE TABLE meta (
    id             INTEGER PRIMARY KEY CHECK (id = 1),
    network_magic  INTEGER NOT NULL,
    first_slot     INTEGER,
    first_block_no INTEGER,
    first_hash     BLOB
) STRICT;

-- The log. seq (the rowid) is dense and strictly increasing; rows are never
-- deleted and only rolled_back_by ever changes (set once, by a RolledBack
-- marker's seq). payload is JSON text, stored and returned byte for byte.
CREATE TABLE records (
    seq            INTEGER PRIMARY KEY,
    kind           TEXT    NOT NULL,
    slot           INTEGER NOT NULL,
    block_no       INTEGER NOT NULL,
    block_hash     BLOB    NOT NULL,
    tx_id          BLOB    NOT NULL,
    tx_index       INTEGER NOT NULL,
    contract_id    BLOB,
    payload        TEXT    NOT NULL,
    rolled_back_by INTEGER
) STRICT;
-- Filtered reads: the records of a set of contracts in seq order.
CREATE INDEX records_contract_seq ON records (contract_id, seq);
-- Filtered log reads: the RolledBack markers, which pass every contract filter.
CREATE INDEX records_markers ON records (seq) WHERE kind = 'rolled_back';
-- Rollback marks: the records of the blocks after a point.
CREATE INDEX records_slot ON records (slot);

-- The contract index: written with a creation, extended by party
-- additions, never removed. roles_currency is empty for contracts without roles.
CREATE TABLE contracts (
    contract_id    BLOB    PRIMARY KEY,
    version        TEXT    NOT NULL,
    roles_currency BLOB    NOT NULL,
    created_seq    INTEGER NOT NULL,
    slot           INTEGER NOT NULL,
    block_no       INTEGER NOT NULL,
    block_hash     BLOB    NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX contracts_roles_currency ON contracts (roles_currency);

CREATE TABLE contract_tags (
    contract_id BLOB NOT NULL REFERENCES contracts (contract_id),
    tag         TEXT NOT NULL,
    PRIMARY KEY (contract_id, tag)
) STRICT, WITHOUT ROWID;
CREATE INDEX contract_tags_tag ON contract_tags (tag, contract_id);

-- A party is an address (address set) or a role (role_currency and
-- role_name set); party_key tells them apart in the primary key.
CREATE TABLE contract_parties (
    contract_id   BLOB    NOT NULL REFERENCES contracts (contract_id),
    party_key     BLOB    NOT NULL,
    address       TEXT,
    role_currency BLOB,
    role_name     BLOB,
    added_seq     INTEGER NOT NULL,
    PRIMARY KEY (contract_id, party_key)
) STRICT, WITHOUT ROWID;
CREATE INDEX contract_parties_address ON contract_parties (address, contract_id);
CREATE INDEX contract_parties_role ON contract_parties (role_currency, role_name, contract_id);

-- The chain checkpoint: recent points for intersection (position 0 is the
-- newest), the node tip, and the horizon of the UTxO undo log.
CREATE TABLE breadcrumbs (
    position INTEGER PRIMARY KEY,
    slot     INTEGER NOT NULL,
    block_no INTEGER NOT NULL,
    hash     BLOB    NOT NULL
) STRICT;

CREATE TABLE tip (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    slot     INTEGER NOT NULL,
    block_no INTEGER NOT NULL,
    hash     BLOB    NOT NULL
) STRICT;
INSERT INTO tip (id, slot, block_no, hash) VALUES (1, 0, 0, x'');

CREATE TABLE horizon (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    slot     INTEGER NOT NULL,
    block_no INTEGER NOT NULL,
    hash     BLOB    NOT NULL
) STRICT;
INSERT INTO horizon (id, slot, block_no, hash) VALUES (1, 0, 0, x'');

-- The tracked Marlowe outputs: open contract outputs and unclaimed payouts.
CREATE TABLE utxos (
    ref            BLOB    PRIMARY KEY,
    kind           INTEGER NOT NULL,
    contract_id    BLOB    NOT NULL,
    version        TEXT    NOT NULL,
    address        BLOB    NOT NULL,
    roles_currency BLOB,
    role           BLOB,
    datum          BLOB
) STRICT, WITHOUT ROWID;

-- The undo log of the tracked set: each block's added and removed outputs
-- (JSON lists), kept for the blocks after the horizon.
CREATE TABLE utxo_changes (
    slot       INTEGER PRIMARY KEY,
    block_no   INTEGER NOT NULL,
    block_hash BLOB    NOT NULL,
    added      TEXT    NOT NULL,
    removed    TEXT    NOT NULL
) STRICT;
CREATE INDEX utxo_changes_block_no ON utxo_changes (block_no);
