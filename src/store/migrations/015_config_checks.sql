-- The heads whose `.github/vmpilot.yml` was queued for a "vmpilot config" check run: a push and a
-- pull request event naming the same commit, or a redelivery of either, queue one check.
CREATE TABLE config_checks (
  repository_id bigint NOT NULL,
  head_sha text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (repository_id, head_sha)
);
