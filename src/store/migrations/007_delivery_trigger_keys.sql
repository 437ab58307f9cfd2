-- The event a trigger delivery reports (a comment, a review, a label added at one moment), by
-- GitHub's own ids: a signed body replayed under a new X-GitHub-Delivery id names the same event,
-- is not recorded again and makes no second job. Null for deliveries that trigger nothing.
ALTER TABLE deliveries ADD COLUMN trigger_key text;
CREATE UNIQUE INDEX deliveries_trigger_key ON deliveries (repository_id, trigger_key)
  WHERE trigger_key IS NOT NULL;
