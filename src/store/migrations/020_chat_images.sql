-- Images a chat's messages show (screenshots attached to an issue or a comment), stored once per
-- chat by their SHA-256. Messages and compactions hold a reference in place of the bytes, so a
-- conversation loaded for every turn, or shown the same image again, does not copy it.
CREATE TABLE chat_images (
  chat_id bigint NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
  sha256 text NOT NULL,
  media_type text NOT NULL,
  data bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (chat_id, sha256)
);
