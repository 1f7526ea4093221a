-- The contract projection: per contract aggregates folded from the history
-- log, their steps, payouts and withdrawals, and the projection's cursor.
-- The SQLite twin of the PostgreSQL schema (same tables, prefixed cv_ there
-- too), in its own file contracts.sqlite. Output references are 36-byte
-- blobs (transaction id, then the output index as 4 big-endian bytes);
-- hashes are 32-byte blobs; JSON is TEXT; booleans are 0 or 1.

-- The projection's cursor, committed with the rows it accounts for, and
-- its counters: one row.
CREATE TABLE cv_head (
    id             INTEGER PRIMARY KEY CHECK (id = 1),
    seq            INTEGER   NOT NULL,
    slot           INTEGER   NOT NULL,
    block_no       INTEGER   NOT NULL,
    block_hash     BLOB    NOT NULL,
    contracts      INTEGER   NOT NULL,
    open_contracts INTEGER   NOT NULL
);
INSERT INTO cv_head (id, seq, slot, block_no, block_hash, contracts, open_contracts)
VALUES (1, 0, 0, 0, zeroblob(32), 0, 0);

-- One row per contract. body holds the large part (contracts and states in
-- core JSON, assets, payouts); lists read the other columns only.
CREATE TABLE cv_contracts (
    contract_id     BLOB    PRIMARY KEY,
    created_seq     INTEGER   NOT NULL UNIQUE,
    slot            INTEGER   NOT NULL,
    block_no        INTEGER   NOT NULL,
    block_hash      BLOB    NOT NULL,
    version         TEXT     NOT NULL,
    roles_currency  BLOB    NOT NULL,
    address         TEXT     NOT NULL,
    tags            TEXT     NOT NULL,
    metadata        TEXT     NOT NULL,
    status          TEXT     NOT NULL,
    steps           INTEGER  NOT NULL,
    last_seq        INTEGER   NOT NULL,
    last_slot       INTEGER   NOT NULL,
    last_block_no   INTEGER   NOT NULL,
    last_block_hash BLOB    NOT NULL,
    body            TEXT     NOT NULL
);
CREATE INDEX cv_contracts_roles_currency ON cv_contracts (roles_currency, created_seq);
CREATE INDEX cv_contracts_status ON cv_contracts (status, created_seq);
-- Rollbacks: the contracts changed after a slot.
CREATE INDEX cv_contracts_last_slot ON cv_contracts (last_slot);

CREATE TABLE cv_contract_tags (
    contract_id BLOB  NOT NULL,
    tag         BLOB  NOT NULL, -- UTF-8 bytes: text cannot hold U+0000
    created_seq INTEGER NOT NULL,
    PRIMARY KEY (contract_id, tag)
);
CREATE INDEX cv_contract_tags_tag ON cv_contract_tags (tag, created_seq);

-- A party is an address (address set) or a role (role_currency and
-- role_name set); party_key tells them apart within a contract.
CREATE TABLE cv_contract_parties (
    contract_id   BLOB NOT NULL,
    party_key     BLOB NOT NULL,
    address       TEXT,
    role_currency BLOB,
    role_name     BLOB,
    PRIMARY KEY (contract_id, party_key)
);
CREATE INDEX cv_contract_parties_address ON cv_contract_parties (address, contract_id) WHERE address IS NOT NULL;
CREATE INDEX cv_contract_parties_role ON cv_contract_parties (role_currency, role_name, contract_id) WHERE role_name IS NOT NULL;

-- Steps: inputs applied, or steps that could not be read.
CREATE TABLE cv_transactions (
    contract_id BLOB   NOT NULL,
    tx_id       BLOB   NOT NULL,
    seq         INTEGER  NOT NULL UNIQUE,
    slot        INTEGER  NOT NULL,
    block_no    INTEGER  NOT NULL,
    block_hash  BLOB   NOT NULL,
    kind        TEXT    NOT NULL,
    input       BLOB   NOT NULL,
    output      BLOB,
    closed      INTEGER NOT NULL,
    reason      TEXT    NOT NULL,
    payload     TEXT    NOT NULL,
    PRIMARY KEY (contract_id, tx_id)
);
CREATE INDEX cv_transactions_contract_seq ON cv_transactions (contract_id, seq);

CREATE TABLE cv_payouts (
    payout_id             BLOB  PRIMARY KEY,
    contract_id           BLOB  NOT NULL,
    tx_id                 BLOB  NOT NULL,
    seq                   INTEGER NOT NULL,
    slot                  INTEGER NOT NULL,
    block_no              INTEGER NOT NULL,
    block_hash            BLOB  NOT NULL,
    roles_currency        BLOB  NOT NULL,
    role                  BLOB, -- the role name's bytes
    address               TEXT,
    assets                TEXT   NOT NULL,
    status                TEXT   NOT NULL,
    withdrawal_tx         BLOB,
    withdrawal_seq        INTEGER,
    withdrawal_slot       INTEGER,
    withdrawal_block_no   INTEGER,
    withdrawal_block_hash BLOB
);
CREATE INDEX cv_payouts_seq ON cv_payouts (seq, payout_id);
CREATE INDEX cv_payouts_contract ON cv_payouts (contract_id, seq);
CREATE INDEX cv_payouts_role ON cv_payouts (roles_currency, role, seq) WHERE role IS NOT NULL;
CREATE INDEX cv_payouts_status ON cv_payouts (status, seq);
CREATE INDEX cv_payouts_withdrawal ON cv_payouts (withdrawal_tx) WHERE withdrawal_tx IS NOT NULL;

-- One row per payout_withdrawn record: the payouts of one contract a
-- transaction withdrew (their details are in cv_payouts).
CREATE TABLE cv_withdrawals (
    tx_id       BLOB  NOT NULL,
    contract_id BLOB  NOT NULL,
    seq         INTEGER NOT NULL UNIQUE,
    slot        INTEGER NOT NULL,
    block_no    INTEGER NOT NULL,
    block_hash  BLOB  NOT NULL,
    PRIMARY KEY (tx_id, contract_id)
);
CREATE INDEX cv_withdrawals_contract ON cv_withdrawals (contract_id, seq);
