-- GitHub ids are used as primary keys where GitHub gives one, so webhooks can upsert without lookups.

CREATE TABLE installations (
  id bigint PRIMARY KEY,
  account_login text,
  account_type text,
  suspended_at timestamptz,
  deleted_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE repositories (
  id bigint PRIMARY KEY,
  installation_id bigint NOT NULL REFERENCES installations (id),
  full_name text NOT NULL,
  settings jsonb NOT NULL DEFAULT '{}',
  removed_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
-- Not unique: a renamed repository's old name may be taken by a new one before we hear of the rename.
CREATE INDEX repositories_full_name ON repositories (lower(full_name));
CREATE INDEX repositories_installation ON repositories (installation_id);

CREATE TABLE deliveries (
  id text PRIMARY KEY,
  event text NOT NULL,
  action text,
  installation_id bigint,
  repository_id bigint,
  received_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX deliveries_received_at ON deliveries (received_at);

-- One conversation per issue or pull request. A chat started on an issue keeps going in the pull
-- request it opened: pr_number points there, and lookups by either number find it.
CREATE TABLE chats (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  repository_id bigint NOT NULL REFERENCES repositories (id),
  number integer NOT NULL,
  kind text NOT NULL CHECK (kind IN ('issue', 'pull_request')),
  pr_number integer,
  branch text,
  -- The last seq handed out; bumping it under the row lock numbers concurrent appends.
  message_count integer NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (repository_id, number)
);
CREATE UNIQUE INDEX chats_pr ON chats (repository_id, pr_number) WHERE pr_number IS NOT NULL;

CREATE TABLE jobs (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  chat_id bigint NOT NULL REFERENCES chats (id),
  installation_id bigint NOT NULL,
  repository_id bigint NOT NULL REFERENCES repositories (id),
  repo text NOT NULL,
  number integer NOT NULL,
  trigger text NOT NULL,
  command text,
  requester text NOT NULL,
  instruction text NOT NULL DEFAULT '',
  status text NOT NULL DEFAULT 'queued' CHECK (status IN (
    'queued', 'running', 'acknowledged', 'refused', 'succeeded', 'failed', 'cancelled', 'dead'
  )),
  branch text,
  pr_number integer,
  trigger_comment_id bigint,
  progress_comment_id bigint,
  delivery_id text REFERENCES deliveries (id),
  -- What the later steps need from the webhook payload (clone URL, comment kind, ...).
  context jsonb NOT NULL DEFAULT '{}',
  error text,
  attempts integer NOT NULL DEFAULT 0,
  cancel_requested_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  started_at timestamptz,
  finished_at timestamptz,
  updated_at timestamptz NOT NULL DEFAULT now(),
  usage jsonb NOT NULL DEFAULT '{}',
  cost_usd numeric(12, 6) NOT NULL DEFAULT 0
);
CREATE INDEX jobs_chat ON jobs (chat_id, id);
CREATE INDEX jobs_repository_created ON jobs (repository_id, created_at);
CREATE INDEX jobs_unfinished ON jobs (id) WHERE finished_at IS NULL;

CREATE TABLE messages (
  chat_id bigint NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
  seq integer NOT NULL,
  role text NOT NULL CHECK (role IN ('user', 'assistant', 'system')),
  content jsonb NOT NULL,
  job_id bigint REFERENCES jobs (id),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (chat_id, seq)
);

-- History is append-only: a resumed chat must replay exactly what the model saw.
CREATE FUNCTION messages_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'messages are append-only';
END
$$;
CREATE TRIGGER messages_no_update BEFORE UPDATE ON messages
  FOR EACH ROW EXECUTE FUNCTION messages_append_only();

CREATE TABLE job_events (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  job_id bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  at timestamptz NOT NULL DEFAULT clock_timestamp(),
  type text NOT NULL,
  data jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX job_events_job ON job_events (job_id, id);
