-- When a user was last told they may not trigger vmpilot on a chat's issue or pull request, so the
-- refusal is posted at most once an hour per user and issue, whichever process handles the job.
CREATE TABLE refusal_notices (
  chat_id bigint NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
  login text NOT NULL,
  job_id bigint NOT NULL,
  sent_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (chat_id, login)
);
