-- Set when the worker finds a chat's pull request closed or merged: a push to the base branch then
-- makes no job for it (each such job costs a GitHub call). A pull request the chat opens or
-- updates later clears it.
ALTER TABLE chats ADD COLUMN pr_closed_at timestamptz;
