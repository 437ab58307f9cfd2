-- Whose money a job spends, for the monthly per-person budget (maxMonthlyCostUsdPerUser) and
-- /usage: an issue job's requester by GitHub user id (jobs.context.requesterId), or by login for
-- a job that never recorded the id; a chat turn's is its chat's owner (chats.api_owner_id, through
-- chats_api_owner_id). Each job's reservation sums the person's jobs of the month.
CREATE INDEX jobs_spender_created ON jobs ((coalesce(context->>'requesterId', 'login:' || requester)), created_at)
  WHERE trigger <> 'chat';
