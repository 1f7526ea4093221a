-- A step by its transaction id alone (GET /transactions/{txId}: the
-- explorer's search box, for a transaction that stepped a contract).
CREATE INDEX cv_transactions_tx ON cv_transactions (tx_id);
