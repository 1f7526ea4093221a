-- The contract projection: per contract aggregates folded from the history
-- log, their steps, payouts and withdrawals, and the projection's cursor.
-- Every table is prefixed cv_ so that it sits beside the history's tables in
-- one database. Output references are 36-byte bytea (transaction id, then
-- the output index as 4 big-endian bytes); hashes are 32-byte bytea.

-- The projection's cursor, committed with the rows it accounts for, and
-- its counters: one row.
CREATE TABLE cv_head (
    id             smallint PRIMARY KEY CHECK (id = 1),
    seq            bigint   NOT NULL,
    slot           bigint   NOT NULL,
    block_no       bigint   NOT NULL,
    block_hash     bytea    NOT NULL,
    contracts      bigint   NOT NULL,
    open_contracts bigint   NOT NULL
);
INSERT INTO cv_head (id, seq, slot, block_no, block_hash, contracts, open_contracts)
VALUES (1, 0, 0, 0, '\x0000000000000000000000000000000000000000000000000000000000000000', 0, 0);

-- One row per contract. body holds the large part (contracts and states in
-- core JSON, assets, payouts); lists read the other columns only.
CREATE TABLE cv_contracts (
    contract_id     bytea    PRIMARY KEY,
    created_seq     bigint   NOT NULL UNIQUE,
    slot            bigint   NOT NULL,
    block_no        bigint   NOT NULL,
    block_hash      bytea    NOT NULL,
    version         text     NOT NULL,
    roles_currency  bytea    NOT NULL,
    address         text     NOT NULL,
    tags            json     NOT NULL,
    metadata        json     NOT NULL,
    status          text     NOT NULL,
    steps           integer  NOT NULL,
    last_seq        bigint   NOT NULL,
    last_slot       bigint   NOT NULL,
    last_block_no   bigint   NOT NULL,
    last_block_hash bytea    NOT NULL,
    body            json     NOT NULL
);
CREATE INDEX cv_contracts_roles_currency ON cv_contracts (roles_currency, created_seq);
CREATE INDEX cv_contracts_status ON cv_contracts (status, created_seq);
-- Rollbacks: the contracts changed after a slot.
CREATE INDEX cv_contracts_last_slot ON cv_contracts (last_slot);

CREATE TABLE cv_contract_tags (
    contract_id bytea  NOT NULL,
    tag         bytea  NOT NULL, -- UTF-8 bytes: text cannot hold U+0000
    created_seq bigint NOT NULL,
    PRIMARY KEY (contract_id, tag)
);
CREATE INDEX cv_contract_tags_tag ON cv_contract_tags (tag, created_seq);

-- A party is an address (address set) or a role (role_currency and
-- role_name set); party_key tells them apart within a contract.
CREATE TABLE cv_contract_parties (
    contract_id   bytea NOT NULL,
    party_key     bytea NOT NULL,
    address       text,
    role_currency bytea,
    role_name     bytea,
    PRIMARY KEY (contract_id, party_key)
);
CREATE INDEX cv_contract_parties_address ON cv_contract_parties (address, contract_id) WHERE address IS NOT NULL;
CREATE INDEX cv_contract_parties_role ON cv_contract_parties (role_currency, role_name, contract_id) WHERE role_name IS NOT NULL;

-- Steps: inputs applied, or steps that could not be read.
CREATE TABLE cv_transactions (
    contract_id bytea   NOT NULL,
    tx_id       bytea   NOT NULL,
    seq         bigint  NOT NULL UNIQUE,
    slot        bigint  NOT NULL,
    block_no    bigint  NOT NULL,
    block_hash  bytea   NOT NULL,
    kind        text    NOT NULL,
    input       bytea   NOT NULL,
    output      bytea,
    closed      boolean NOT NULL,
    reason      text    NOT NULL,
    payload     json    NOT NULL,
    PRIMARY KEY (contract_id, tx_id)
);
CREATE INDEX cv_transactions_contract_seq ON cv_transactions (contract_id, seq);

CREATE TABLE cv_payouts (
    payout_id             bytea  PRIMARY KEY,
    contract_id           bytea  NOT NULL,
    tx_id                 bytea  NOT NULL,
    seq                   bigint NOT NULL,
    slot                  bigint NOT NULL,
    block_no              bigint NOT NULL,
    block_hash            bytea  NOT NULL,
    roles_currency        bytea  NOT NULL,
    role                  bytea, -- the role name's bytes
    address               text,
    assets                json   NOT NULL,
    status                text   NOT NULL,
    withdrawal_tx         bytea,
    withdrawal_seq        bigint,
    withdrawal_slot       bigint,
    withdrawal_block_no   bigint,
    withdrawal_block_hash bytea
);
CREATE INDEX cv_payouts_seq ON cv_payouts (seq, payout_id);
CREATE INDEX cv_payouts_contract ON cv_payouts (contract_id, seq);
CREATE INDEX cv_payouts_role ON cv_payouts (roles_currency, role, seq) WHERE role IS NOT NULL;
CREATE INDEX cv_payouts_status ON cv_payouts (status, seq);
CREATE INDEX cv_payouts_withdrawal ON cv_payouts (withdrawal_tx) WHERE withdrawal_tx IS NOT NULL;

-- One row per payout_withdrawn record: the payouts of one contract a
-- transaction withdrew (their details are in cv_payouts).
CREATE TABLE cv_withdrawals (
    tx_id       bytea  NOT NULL,
    contract_id bytea  NOT NULL,
    seq         bigint NOT NULL UNIQUE,
    slot        bigint NOT NULL,
    block_no    bigint NOT NULL,
    block_hash  bytea  NOT NULL,
    PRIMARY KEY (tx_id, contract_id)
);
CREATE INDEX cv_withdrawals_contract ON cv_withdrawals (contract_id, seq);
