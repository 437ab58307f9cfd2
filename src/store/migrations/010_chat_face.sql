-- The chat face: OpenAI-compatible clients (Open WebUI, the openai SDK, ...) drive a workspace
-- through /v1/chat/completions with an API key. Each turn is a job on the queue like any other.

-- Personal keys, made on the /keys page. Only a hash is kept: a key is 32 random bytes, so a plain
-- SHA-256 cannot be walked back, and lookups stay one index probe.
CREATE TABLE api_keys (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name text NOT NULL,
  owner_login text NOT NULL,
  owner_id bigint NOT NULL,
  hash text NOT NULL UNIQUE,
  -- The key's last characters, so its owner can tell keys apart.
  hint text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  revoked_at timestamptz
);
CREATE INDEX api_keys_owner ON api_keys (owner_id, id);

-- A chat of the chat face belongs to whoever's key started it (api_owner: a login, or "operator"
-- for VMPILOT_API_KEY), on a repository of the app's installations or on a scratch workspace
-- (repository_id null).
ALTER TABLE chats DROP CONSTRAINT chats_kind_check;
ALTER TABLE chats ADD CONSTRAINT chats_kind_check
  CHECK (kind IN ('issue', 'pull_request', 'cli', 'api'));
ALTER TABLE chats ADD COLUMN api_owner text;
ALTER TABLE chats ADD COLUMN client_chat_id text;
ALTER TABLE chats DROP CONSTRAINT chats_origin;
ALTER TABLE chats ADD CONSTRAINT chats_origin CHECK (
  CASE kind
    WHEN 'cli' THEN local_repo IS NOT NULL AND repository_id IS NULL AND number IS NULL
    WHEN 'api' THEN api_owner IS NOT NULL AND local_repo IS NULL AND number IS NULL
    ELSE local_repo IS NULL AND repository_id IS NOT NULL AND number IS NOT NULL
  END
);
CREATE UNIQUE INDEX chats_client ON chats (api_owner, client_chat_id)
  WHERE client_chat_id IS NOT NULL;

-- A chat turn has no installation, repository or item of its own when it runs on scratch.
ALTER TABLE jobs ALTER COLUMN installation_id DROP NOT NULL;
ALTER TABLE jobs ALTER COLUMN repository_id DROP NOT NULL;
ALTER TABLE jobs ALTER COLUMN number DROP NOT NULL;
ALTER TABLE jobs ADD CONSTRAINT jobs_item CHECK (
  trigger = 'chat' OR (installation_id IS NOT NULL AND repository_id IS NOT NULL AND number IS NOT NULL)
);

-- One row per finished turn of a chat-face chat: the conversation the client saw up to its reply
-- (hashed, so a client sending the history back is recognised), how many stored messages the agent
-- had by then, and the workspace's commits since its base as a git bundle (null: none yet), so any
-- worker can take the next turn up, or go back to this one.
CREATE TABLE chat_turns (
  chat_id bigint NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
  turn integer NOT NULL,
  job_id bigint NOT NULL REFERENCES jobs (id),
  history_hash text NOT NULL,
  message_count integer NOT NULL,
  commit_sha text,
  bundle bytea,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (chat_id, turn)
);
CREATE INDEX chat_turns_history ON chat_turns (history_hash);
