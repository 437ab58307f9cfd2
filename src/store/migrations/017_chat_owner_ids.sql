-- A chat of the chat face belongs to a kind of principal, never to a login (issue 26): the operator
-- (VMPILOT_API_KEY), or a person by GitHub's numeric user id. A login can be anyone's: a GitHub
-- user named "operator", a name someone gave up and someone else registered. api_owner stays as
-- the login to show.
ALTER TABLE chats ADD COLUMN api_operator boolean NOT NULL DEFAULT false;
ALTER TABLE chats ADD COLUMN api_owner_id bigint;
ALTER TABLE chats ADD CONSTRAINT chats_api_principal CHECK (NOT (api_operator AND api_owner_id IS NOT NULL));

-- Existing chats: "operator" was the operator's unless a person with that very login had a key;
-- then a turn that recorded it (jobs.context.operator, written since shortly before this) decides.
-- A chat's turns may be jobs of the chat it was branched from.
CREATE TEMPORARY TABLE chat_operator_flags ON COMMIT DROP AS
SELECT c.id AS chat_id,
       bool_or(j.context->>'operator' = 'true') AS said_operator,
       bool_or(j.context->>'operator' = 'false') AS said_person
  FROM chats c
  JOIN jobs j ON j.chat_id = c.id OR j.id IN (SELECT t.job_id FROM chat_turns t WHERE t.chat_id = c.id)
 WHERE c.kind = 'api' AND c.api_owner = 'operator'
 GROUP BY c.id;

UPDATE chats c SET api_operator = true
 WHERE c.kind = 'api' AND c.api_owner = 'operator'
   AND (NOT EXISTS (SELECT 1 FROM api_keys k WHERE k.owner_login = 'operator')
        OR EXISTS (SELECT 1 FROM chat_operator_flags f
                    WHERE f.chat_id = c.id AND f.said_operator AND NOT f.said_person));

-- A person's chats: the owner of the keys made under that login, when the keys name one person.
-- Keys were only ever made by someone signed in, so they carry GitHub's id. A login whose keys name
-- two people (one gave it up, another took it) leaves its chats to nobody rather than to a guess.
UPDATE chats c SET api_owner_id = k.owner_id
  FROM (SELECT owner_login, min(owner_id) AS owner_id FROM api_keys
         GROUP BY owner_login HAVING count(DISTINCT owner_id) = 1) k
 WHERE c.kind = 'api' AND NOT c.api_operator AND c.api_owner = k.owner_login
   AND (c.api_owner <> 'operator'
        OR EXISTS (SELECT 1 FROM chat_operator_flags f
                    WHERE f.chat_id = c.id AND f.said_person AND NOT f.said_operator));

-- A client's chat id names one chat per principal. Two logins of one person may both have used
-- one; the newer chat keeps it.
UPDATE chats c SET client_chat_id = NULL
 WHERE c.kind = 'api' AND c.client_chat_id IS NOT NULL
   AND (NOT c.api_operator AND c.api_owner_id IS NULL
        OR EXISTS (SELECT 1 FROM chats d
                    WHERE d.kind = 'api' AND d.client_chat_id = c.client_chat_id AND d.id > c.id
                      AND d.api_operator = c.api_operator
                      AND d.api_owner_id IS NOT DISTINCT FROM c.api_owner_id));
DROP INDEX chats_client;
CREATE UNIQUE INDEX chats_client_person ON chats (api_owner_id, client_chat_id)
  WHERE client_chat_id IS NOT NULL AND api_owner_id IS NOT NULL;
CREATE UNIQUE INDEX chats_client_operator ON chats (client_chat_id)
  WHERE client_chat_id IS NOT NULL AND api_operator;
-- A person's chats, for their job list and their scratch budget.
CREATE INDEX chats_api_owner_id ON chats (api_owner_id) WHERE api_owner_id IS NOT NULL;
CREATE INDEX chats_api_operator ON chats (id) WHERE api_operator;
