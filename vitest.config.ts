import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { defineConfig } from "vitest/config";
import { runTmpDir } from "./test/helpers/tmp-dir.ts";

// unit: no database, no server, no process of the app's (the process launcher included: a file
// whose workspace runs a command is an integration test), no sandbox: seconds, for `npm run
// test:unit`. e2e: the app as a person runs it (its processes, the binary, `npm start`, a browser).
// integration: everything else, so a new test file runs with `npm test` wherever it lands.
const UNIT = [
  "test/layers.test.ts",
  "test/agent/{cost,editor,editor-files,images,prompt}.test.ts",
  "test/github/**/*.test.ts",
  "test/chat/reply.test.ts",
  "test/cli/{args,progress,terminal-text}.test.ts",
  "test/config/{deploy,mcp,repo-config,skills,tracing}.test.ts",
  "test/fuzz/{agent-protocol,ci,images,trigger}.test.ts",
  "test/intake/{batcher,deliveries,trigger}.test.ts",
  "test/jobs/{ready-checks,worker-identity}.test.ts",
  "test/web/{hsts,html,installation-permissions,session,settings-form,timeline}.test.ts",
  "test/workspace/{isolation,limit-guard,output,paths,proxy}.test.ts",
];
const E2E = [
  "test/e2e/**/*.test.ts",
  "test/cli/{conversation,conversations,run}.test.ts",
  "test/config/{env,node-version,setup-env}.test.ts",
  "test/web/browser.test.ts",
];
// Integration files that may share their workers' modules (isolate: false), as the unit files do:
// importing the app once per file was about half a core-second of each. Each of them closes what
// it starts and waits for what it queued, and none mocks a module. Not here: files that mock
// modules (vi.mock), that need the network without nock's interceptor (intake/slow-senders,
// workspace/remote's streams), or whose processes and kernel limits a shared worker disturbs.
const SHARED = [
  "test/agent/{bash,loop,loop-seam,mcp,openai-provider,plugins,spans,testing-plugin}.test.ts",
  "test/agent/tool-input.test.ts",
  "test/chat/{budget,completions,conversation,gate,image-limits,images,installations}.test.ts",
  "test/chat/{models,processes,rate-limit,relay,server-error}.test.ts",
  "test/fuzz/{agent-server,parsers}.test.ts",
  "test/intake/{base-push,body-limit,ci,config-check,dev-proxy,enterprise,probot-context}.test.ts",
  "test/intake/{record,restart,server,shutdown}.test.ts",
  "test/jobs/{acknowledge,automations,automations-schedule,chat-turn-settings,ci-fix,gate}.test.ts",
  "test/jobs/{installation-sync,memory,merge-base,monthly-budget,pipeline,pipeline-commands}.test.ts",
  "test/jobs/{pipeline-images,pipeline-mcp,pipeline-units,queue,queue-crash,queue-shutdown}.test.ts",
  "test/jobs/{ready,redo,second-look,startup,vm-sweeper}.test.ts",
  "test/store/**/*.test.ts",
  "test/web/{auth,github-client,identity,job-feed,metrics,pages,probot-mount,queries}.test.ts",
  "test/workspace/{agent-code-cache,bundle-read,checkout,commit,fly-network,host}.test.ts",
  "test/workspace/{kubernetes-watch,publish,run-bundle,run-diff,setup,stale,warm-shell}.test.ts",
];
// The store, migrated once per run for every test file that opens one (test/helpers/db.ts).
const DATABASE_TEMPLATES = ["test/helpers/db-templates.ts"];

/** TMPDIR for every test and the processes it starts, when the run has one of its own. */
function tmpDirEnv(): { TMPDIR?: string } {
  const dir = runTmpDir();
  return dir ? { TMPDIR: dir } : {};
}

export default defineConfig({
  test: {
    // A bound for hangs, not a speed check: on a loaded 2-core machine a test that starts the CLI
    // (a cold TypeScript start, a sandbox, git) was seen taking 30 s once, 10 s alone.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // One file more than the cores: some 13 % of a run was cores waiting (on servers, processes
    // and the database), which the extra file fills. On 2 cores: 233 → 205 s, the same CPU; a
    // fourth file only added CPU (218 s).
    maxWorkers: availableParallelism() + 1,
    fileParallelism: true,
    // The servers, CLIs and database processes the tests start keep V8's compiled code (and the
    // stripped TypeScript) between starts, as bin/typescript.js does for people: about half
    // their start-up CPU.
    env: { NODE_COMPILE_CACHE: join(tmpdir(), "node-compile-cache"), ...tmpDirEnv() },
    // The run's temporary files on tmpfs (test/helpers/tmp-dir.ts), made before the first test.
    globalSetup: ["test/helpers/tmp-dir.ts"],
    projects: [
      // Unit files share their workers' modules: importing the app once per file was most of
      // their time. The others keep a fresh module graph per file, as their state needs.
      { test: { name: "unit", include: UNIT, isolate: false } },
      {
        test: {
          name: "integration-shared",
          include: SHARED,
          isolate: false,
          globalSetup: DATABASE_TEMPLATES,
        },
      },
      {
        test: {
          name: "integration",
          include: ["test/**/*.test.ts"],
          exclude: [...UNIT, ...E2E, ...SHARED],
          globalSetup: DATABASE_TEMPLATES,
        },
      },
      { test: { name: "e2e", include: E2E, globalSetup: DATABASE_TEMPLATES } },
    ],
  },
});
