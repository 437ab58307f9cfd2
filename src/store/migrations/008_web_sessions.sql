-- Secrets the app makes for itself and every process behind this database shares (the web
-- session key when SESSION_SECRET is not set).
CREATE TABLE app_secrets (
  name text PRIMARY KEY,
  value text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Signed-in browser sessions. The cookie carries the id; only its SHA-256 is stored. Signing out
-- revokes the row, so a copied cookie stops working too.
CREATE TABLE web_sessions (
  id_hash text PRIMARY KEY,
  user_id bigint NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  revoked_at timestamptz
);
CREATE INDEX web_sessions_expires_at ON web_sessions (expires_at);
