-- The repositories of the app's installations each signed-in person could push to, as GitHub
-- listed them with the person's own token when they last opened a page that lists them (/keys,
-- /jobs). The chat face asks GitHub about a person's access to these, not to every repository
-- installed (issue 26).
CREATE TABLE user_repositories (
  user_id bigint PRIMARY KEY,
  repository_ids bigint[] NOT NULL,
  listed_at timestamptz NOT NULL DEFAULT now()
);
