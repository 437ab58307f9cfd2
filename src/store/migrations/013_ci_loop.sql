-- After the pull request opens. The commit vmpilot pushed last to a chat's branch, and the job that
-- pushed it: a failing check on exactly that head is vmpilot's to fix (a head someone else pushed
-- afterwards is not), and that job's requester is who gets asked for a review.
ALTER TABLE chats ADD COLUMN last_pushed_sha text;
ALTER TABLE chats ADD COLUMN last_push_job_id bigint;
-- The head vmpilot marked ready for review (once per head), and when it said on the pull request
-- that the CI fix attempts ran out (once per chat).
ALTER TABLE chats ADD COLUMN ready_sha text;
ALTER TABLE chats ADD COLUMN ci_cap_noticed_at timestamptz;
