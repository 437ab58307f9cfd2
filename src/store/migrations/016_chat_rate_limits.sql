-- The chat face's requests per key per minute, counted here rather than in each web process, so
-- several web processes allow the limit between them. One row per key ("operator", or an
-- api_keys id): the start of its current minute and the requests in it.
CREATE TABLE chat_rate_limits (
  key_id text PRIMARY KEY,
  window_start timestamptz NOT NULL,
  requests integer NOT NULL
);
