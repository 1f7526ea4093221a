-- The history log, its contract index, the chain checkpoint and the tracked
-- Marlowe UTxO set. Hashes and transaction ids are 32-byte bytea; output
-- references (contract ids, UTxO refs) are 36-byte bytea: the transaction id
-- then the output index as 4 big-endian bytes, so bytea order is ledger order.

-- The network the database follows and where it started following: one row.
CREATE TABLE meta (
    id             smallint PRIMARY KEY CHECK (id = 1),
    network_magic  bigint   NOT NULL,
    first_slot     bigint,
    first_block_no bigint,
    first_hash     bytea
);

-- The log. seq is dense and strictly increasing; rows are never deleted and
-- only rolled_back_by ever changes (set once, by a RolledBack marker's seq).
-- payload is json, not jsonb: it is stored and returned byte for byte.
CREATE TABLE records (
    seq            bigint  PRIMARY KEY,
    kind           text    NOT NULL,
    slot           bigint  NOT NULL,
    block_no       bigint  NOT NULL,
    block_hash     bytea   NOT NULL,
    tx_id          bytea   NOT NULL,
    tx_index       integer NOT NULL,
    contract_id    bytea,
    payload        json    NOT NULL,
    rolled_back_by bigint
);
-- Filtered reads: the records of a set of contracts in seq order.
CREATE INDEX records_contract_seq ON records (contract_id, seq) WHERE contract_id IS NOT NULL;
-- Filtered log reads: the RolledBack markers, which pass every contract filter.
CREATE INDEX records_markers ON records (seq) WHERE kind = 'rolled_back';
-- Rollback marks: the records of the blocks after a point.
CREATE INDEX records_slot ON records (slot);

-- The contract index: written with a creation, extended by party
-- additions, never removed. roles_currency is empty for contracts without roles.
CREATE TABLE contracts (
    contract_id    bytea  PRIMARY KEY,
    version        text   NOT NULL,
    roles_currency bytea  NOT NULL,
    created_seq    bigint NOT NULL,
    slot           bigint NOT NULL,
    block_no       bigint NOT NULL,
    block_hash     bytea  NOT NULL
);
CREATE INDEX contracts_roles_currency ON contracts (roles_currency);

CREATE TABLE contract_tags (
    contract_id bytea NOT NULL REFERENCES contracts (contract_id),
    tag         text  NOT NULL,
    PRIMARY KEY (contract_id, tag)
);
CREATE INDEX contract_tags_tag ON contract_tags (tag, contract_id);

-- A party is an address (address set) or a role (role_currency and
-- role_name set); party_key tells them apart in the primary key.
CREATE TABLE contract_parties (
    contract_id   bytea  NOT NULL REFERENCES contracts (contract_id),
    party_key     bytea  NOT NULL,
    address       text,
    role_currency bytea,
    role_name     bytea,
    added_seq     bigint NOT NULL,
    PRIMARY KEY (contract_id, party_key)
);
CREATE INDEX contract_parties_address ON contract_parties (address, contract_id) WHERE address IS NOT NULL;
CREATE INDEX contract_parties_role ON contract_parties (role_currency, role_name, contract_id) WHERE role_name IS NOT NULL;

-- The chain checkpoint: recent points for intersection (position 0 is the
-- newest), the node tip, and the horizon of the UTxO undo log.
CREATE TABLE breadcrumbs (
    position integer PRIMARY KEY,
    slot     bigint  NOT NULL,
    block_no bigint  NOT NULL,
    hash     bytea   NOT NULL
);

CREATE TABLE tip (
    id       smallint PRIMARY KEY CHECK (id = 1),
    slot     bigint   NOT NULL,
    block_no bigint   NOT NULL,
    hash     bytea    NOT NULL
);
INSERT INTO tip (id, slot, block_no, hash) VALUES (1, 0, 0, '\x');

CREATE TABLE horizon (
    id       smallint PRIMARY KEY CHECK (id = 1),
    slot     bigint   NOT NULL,
    block_no bigint   NOT NULL,
    hash     bytea    NOT NULL
);
INSERT INTO horizon (id, slot, block_no, hash) VALUES (1, 0, 0, '\x');

-- The tracked Marlowe outputs: open contract outputs and unclaimed payouts.
CREATE TABLE utxos (
    ref            bytea    PRIMARY KEY,
    kind           smallint NOT NULL,
    contract_id    bytea    NOT NULL,
    version        text     NOT NULL,
    address        bytea    NOT NULL,
    roles_currency bytea,
    role           bytea,
    datum          bytea
);

-- The undo log of the tracked set: each block's added and removed outputs
-- (JSON lists), kept for the blocks after the horizon.
CREATE TABLE utxo_changes (
    slot       bigint PRIMARY KEY,
    block_no   bigint NOT NULL,
    block_hash bytea  NOT NULL,
    added      json   NOT NULL,
    removed    json   NOT NULL
);
CREATE INDEX utxo_changes_block_no ON utxo_changes (block_no);
