import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { z } from "zod";
import { findOrCreateConversation } from "../../../src/store/conversations.ts";
import type { Database } from "../../../src/store/database.ts";
import { upsertRepository } from "../../../src/store/installations.ts";
import { appendJobEvent, defineJobEvent } from "../../../src/store/job-events.ts";
import { insertJob, type Job, type JobPatch, updateJob } from "../../../src/store/jobs.ts";
import { mountWeb, type Web } from "../../../src/web/index.ts";
import { openTestDatabase } from "../../helpers/db.ts";
import { type FakeRepo, type GitHubFake, startGitHubFake } from "./github-fake.ts";

/** mountWeb served on a loopback port, on an in-memory PGlite store, against a fake GitHub. */
export interface WebHarness {
  url: string;
  db: Database;
  github: GitHubFake;
  web: Web;
  addRepo(repo: FakeRepo): Promise<FakeRepo>;
  addJob(repo: FakeRepo, patch?: JobPatch & { number?: number }): Promise<Job>;
  addEvent(job: Job, type: string, data?: Record<string, unknown>): Promise<number>;
  close(): Promise<void>;
}

export async function startWebHarness(
  options: { oauth?: boolean /** Shared, and left open on close. */; db?: Database } = {},
): Promise<WebHarness> {
  const github = await startGitHubFake();
  const db = options.db ?? (await openTestDatabase());
  let web: Web | undefined;
  const server: Server = createServer(async (req, res) => {
    if (!(await web?.handler(req, res))) res.writeHead(404).end("not found");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  web = mountWeb({
    db,
    config: {
      publicUrl: url,
      sessionSecret: randomBytes(32).toString("hex"),
      oauth:
        options.oauth === false
          ? null
          : { clientId: github.clientId, clientSecret: github.clientSecret },
      githubApiUrl: github.apiUrl,
      githubWebUrl: github.webUrl,
      plugins: ["code_review", "docs"],
      providers: new Map([
        [
          "ollama",
          {
            name: "ollama",
            baseUrl: "http://gpu-box:11434/v1",
            prices: {},
            defaultPrice: { input: 0, output: 0 },
            stream: true,
          },
        ],
      ]),
      pollIntervalMs: 50,
    },
  });
  const mounted = web;
  let issue = 1;
  return {
    url,
    db,
    github,
    web: mounted,
    async addRepo(repo) {
      github.repos.push(repo);
      await upsertRepository(db.pool, {
        id: repo.id,
        installationId: repo.installationId,
        fullName: repo.fullName,
      });
      return repo;
    },
    async addJob(repo, patch = {}) {
      const { number = issue++, ...rest } = patch;
      const conversation = await findOrCreateConversation(db.pool, {
        repositoryId: repo.id,
        number,
        kind: "issue",
      });
      const job = await insertJob(db.pool, {
        conversationId: conversation.id,
        installationId: repo.installationId,
        repositoryId: repo.id,
        repo: repo.fullName,
        number,
        trigger: "label",
        requester: "alice",
        instruction: "fix it",
      });
      return Object.keys(rest).length ? ((await updateJob(db.pool, job.id, rest)) as Job) : job;
    },
    async addEvent(job, type, data = {}) {
      // Any type with any fields, as rows of every version of the app may hold.
      const event = defineJobEvent(type, z.looseObject({}));
      return (await appendJobEvent(db.pool, job.id, event, data)).id;
    },
    async close() {
      mounted.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await github.close();
      if (!options.db) await db.close();
    },
  };
}

/** A cookie-keeping HTTP client that does not follow redirects, like a careful browser. */
export class Client {
  readonly cookies = new Map<string, string>();

  private readonly base: string;
  constructor(base: string) {
    this.base = base;
  }

  async get(path: string, headers: Record<string, string> = {}): Promise<Response> {
    return this.request(path, { method: "GET", headers });
  }

  async post(path: string, form: Record<string, string | string[]>): Promise<Response> {
    const body = new URLSearchParams();
    for (const [key, value] of Object.entries(form)) {
      for (const v of Array.isArray(value) ? value : [value]) body.append(key, v);
    }
    return this.request(path, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: body.toString(),
    });
  }

  async request(path: string, init: RequestInit): Promise<Response> {
    const url = new URL(path, this.base);
    const headers = new Headers(init.headers);
    if (url.origin === new URL(this.base).origin && this.cookies.size) {
      headers.set("cookie", [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; "));
    }
    const res = await fetch(url, { ...init, headers, redirect: "manual" });
    for (const line of res.headers.getSetCookie()) {
      const [pair = "", ...attrs] = line.split(";");
      const eq = pair.indexOf("=");
      const name = pair.slice(0, eq).trim();
      const expired = attrs.some((a) => a.trim().toLowerCase() === "max-age=0");
      if (expired) this.cookies.delete(name);
      else this.cookies.set(name, pair.slice(eq + 1));
    }
    return res;
  }

  /** The whole OAuth dance against the fake: /login → authorize → callback. */
  async signIn(github: GitHubFake, login: string, next = "/", id?: number): Promise<Response> {
    github.signInAs(login, id);
    const start = await this.get(`/login?next=${encodeURIComponent(next)}`);
    const authorize = await this.request(start.headers.get("location") ?? "", {});
    return this.get(authorize.headers.get("location") ?? "");
  }

  /** The CSRF token a page's forms carry. */
  static csrf(page: string): string {
    const token = /name="csrf" value="([^"]+)"/.exec(page)?.[1];
    if (!token) throw new Error("no CSRF field on the page");
    return token;
  }
}
