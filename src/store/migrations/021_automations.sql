-- Automations (`automations:` in .github/vmpilot.yml). A scheduled run has no issue or pull request
-- of its own: its job and its conversation belong to the repository alone (number null). The pull
-- request it may open is recorded on the job.
ALTER TABLE chats DROP CONSTRAINT chats_kind_check;
ALTER TABLE chats ADD CONSTRAINT chats_kind_check
  CHECK (kind IN ('issue', 'pull_request', 'cli', 'api', 'automation'));
ALTER TABLE chats DROP CONSTRAINT chats_origin;
ALTER TABLE chats ADD CONSTRAINT chats_origin CHECK (
  CASE kind
    WHEN 'cli' THEN local_repo IS NOT NULL AND repository_id IS NULL AND number IS NULL
    WHEN 'api' THEN api_owner IS NOT NULL AND local_repo IS NULL AND number IS NULL
    WHEN 'automation' THEN local_repo IS NULL AND repository_id IS NOT NULL AND number IS NULL
    ELSE local_repo IS NULL AND repository_id IS NOT NULL AND number IS NOT NULL
  END
);

ALTER TABLE jobs DROP CONSTRAINT jobs_item;
ALTER TABLE jobs ADD CONSTRAINT jobs_item CHECK (
  trigger = 'chat' OR (installation_id IS NOT NULL AND repository_id IS NOT NULL
                       AND (number IS NOT NULL OR trigger = 'automation'))
);
