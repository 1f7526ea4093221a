-- Contract lists filtered by a party read the party's contracts in creation
-- order off an index, as lists filtered by a tag do, so that a page costs
-- the page and not the number of contracts: parties carry their contract's
-- creation seq.
ALTER TABLE cv_contract_parties ADD COLUMN created_seq INTEGER NOT NULL DEFAULT 0;
UPDATE cv_contract_parties SET created_seq =
    (SELECT c.created_seq FROM cv_contracts c WHERE c.contract_id = cv_contract_parties.contract_id);
DROP INDEX cv_contract_parties_address;
DROP INDEX cv_contract_parties_role;
CREATE INDEX cv_contract_parties_address ON cv_contract_parties (address, created_seq) WHERE address IS NOT NULL;
CREATE INDEX cv_contract_parties_role ON cv_contract_parties (role_currency, role_name, created_seq) WHERE role_name IS NOT NULL;
