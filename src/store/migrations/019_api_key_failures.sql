-- Wrong API keys per client address, counted here so that every web process holds an address back
-- alike: the start of its current window and the failures in it (issue 26).
CREATE TABLE api_key_failures (
  address text PRIMARY KEY,
  window_start timestamptz NOT NULL,
  failures integer NOT NULL
);
CREATE INDEX api_key_failures_window ON api_key_failures (window_start);
