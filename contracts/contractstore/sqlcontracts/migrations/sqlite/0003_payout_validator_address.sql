-- The address of a role payout's output (the payout validator's, with the
-- output's stake credential), which the Marlowe Runtime's payout resource
-- shows. Payouts stored before this migration have none until the projection
-- rebuilds them; readers then derive the validator's address from the
-- contract's script version.
ALTER TABLE cv_payouts ADD COLUMN validator_address text;
