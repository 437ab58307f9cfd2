-- Conversations of the command-line face (`vmpilot run`, `vmpilot chat`). They belong to a
-- repository on the user's machine or a git URL (local_repo), not to a GitHub repository, issue or
-- pull request. They keep their own running totals, since they have no jobs rows.
ALTER TABLE chats ALTER COLUMN repository_id DROP NOT NULL;
ALTER TABLE chats ALTER COLUMN number DROP NOT NULL;
ALTER TABLE chats DROP CONSTRAINT chats_kind_check;
ALTER TABLE chats ADD CONSTRAINT chats_kind_check CHECK (kind IN ('issue', 'pull_request', 'cli'));
ALTER TABLE chats ADD COLUMN local_repo text;
ALTER TABLE chats ADD COLUMN title text;
ALTER TABLE chats ADD COLUMN turns integer NOT NULL DEFAULT 0;
ALTER TABLE chats ADD COLUMN cost_usd double precision NOT NULL DEFAULT 0;
-- The run using the conversation ("host:pid"), so a second run on it refuses instead of
-- interleaving its messages.
ALTER TABLE chats ADD COLUMN locked_by text;
ALTER TABLE chats ADD COLUMN locked_at timestamptz;
ALTER TABLE chats ADD CONSTRAINT chats_origin CHECK (
  CASE WHEN kind = 'cli'
    THEN local_repo IS NOT NULL AND repository_id IS NULL AND number IS NULL
    ELSE local_repo IS NULL AND repository_id IS NOT NULL AND number IS NOT NULL
  END
);
CREATE INDEX chats_local_repo ON chats (local_repo, updated_at DESC) WHERE kind = 'cli';
