-- Who may trigger and with which label, as the repository's .github/vmpilot.yml last said when the
-- worker read it. NULL: not read yet, or changed by a push since. The intake never calls GitHub, so
-- this is how it knows the file's label.
ALTER TABLE repositories ADD COLUMN file_settings jsonb;

-- A trigger the file turned out not to want (another label, vmpilot disabled): dropped silently.
ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check CHECK (status IN (
  'queued', 'running', 'acknowledged', 'refused', 'ignored', 'succeeded', 'failed', 'cancelled', 'dead'
));
