import { join } from "node:path";
import { sh } from "../jobs/pipeline-harness.ts";

/**
 * The example payloads' repository as a bare remote under `<base>/served`: default branch
 * master, a README with the typo issue #1 names, and a test that fails until it is fixed.
 * Returns the remote's path.
 */
export function seedServedRepo(base: string, repo: string): string {
  const seed = join(base, "seed");
  sh(base, `git init -q -b master ${seed}`);
  sh(
    seed,
    `printf 'Helo World\\n' > README.md && printf 'grep -q "Hello World" README.md\\n' > test.sh && git add -A && git commit -qm init`,
  );
  const remote = join(base, "served", `${repo}.git`);
  sh(base, `git clone -q --bare ${seed} ${remote}`);
  return remote;
}

/** Issue #1 of that repository as the GitHub fake holds it: it reports the README's typo. */
export const TYPO_ISSUE = {
  title: "Spelling error in the README file",
  body: "Helo?",
  user: "Codertocat",
};
