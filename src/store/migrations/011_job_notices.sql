-- A trigger that arrives while its conversation's job runs is acknowledged at once, by a notice
-- posted before its own job starts. Set when that notice claims the job's first comment, so the job
-- itself, starting later, edits that comment instead of posting a second one.
ALTER TABLE jobs ADD COLUMN noticed_at timestamptz;
