-- The most an unfinished job may have spent when it ends, reserved against its repository's daily
-- limit when its attempt starts, so concurrent jobs cannot promise more than the day allows.
ALTER TABLE jobs ADD COLUMN reserved_usd numeric(12, 6);
