-- A chat's conversation as the agent last compacted it: these messages stand for the chat's first
-- covered_messages stored messages, so a later job resumes from the compacted form instead of
-- sending (and compacting) the whole history again. The messages table stays append-only.
CREATE TABLE chat_compactions (
  chat_id bigint PRIMARY KEY REFERENCES chats (id) ON DELETE CASCADE,
  covered_messages integer NOT NULL,
  messages jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
