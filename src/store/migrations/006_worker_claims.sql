-- Which worker instance runs a job's current attempt, and under which queue entry: a worker that
-- restarts with the same identity hands its dead predecessor's jobs back to the queue at once,
-- instead of waiting for their heartbeats to lapse.
ALTER TABLE jobs ADD COLUMN worker_id text;
ALTER TABLE jobs ADD COLUMN queue_job_id uuid;
CREATE INDEX jobs_unfinished_by_worker ON jobs (worker_id) WHERE finished_at IS NULL;
