-- An agent run a job's attempt finished, kept before anything of it was pushed or written to GitHub:
-- what its delivery reads of the result, where its work began, and that work as a git bundle. An
-- attempt redone after it delivers this run instead of running the model again (jobs/run/kept.ts).
CREATE TABLE kept_runs (
  job_id bigint PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
  attempt integer NOT NULL,
  result jsonb NOT NULL,
  -- HEAD when the run began; '' in a repository without commits.
  base_sha text NOT NULL,
  -- The run's commits and what it left uncommitted, as one commit on base_sha; null when it changed nothing.
  bundle bytea,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- A kept run serves the job's next attempt only: a finished job's goes, bundle and all.
CREATE FUNCTION kept_runs_drop() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM kept_runs WHERE job_id = NEW.id;
  RETURN NULL;
END
$$;
CREATE TRIGGER jobs_finished_drop_kept_run AFTER UPDATE OF finished_at ON jobs
  FOR EACH ROW WHEN (OLD.finished_at IS NULL AND NEW.finished_at IS NOT NULL)
  EXECUTE FUNCTION kept_runs_drop();
