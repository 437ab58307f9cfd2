import type { IncomingMessage, ServerResponse } from "node:http";
import type pg from "pg";
import type { ProviderTable } from "../config/providers.ts";
import { defaults, type RepoConfig, type RepoSettings } from "../config/repo-config.ts";
import { TtlCache } from "../http/cache.ts";
import type { Logger } from "../log/logger.ts";
import { GitHubUserApi } from "./github-user.ts";
import { type FeedLimits, JobFeeds } from "./job-feed.ts";
import type { OAuthApp } from "./oauth.ts";
import { CookieJar, type Session } from "./session.ts";

export interface WebConfig {
  /** Where browsers reach this server, e.g. https://vmpilot.example.com; OAuth redirects here. */
  publicUrl: string;
  /** Signs session cookies and derives the key that encrypts the GitHub token inside them. */
  sessionSecret: string;
  /** The GitHub App's OAuth client; without it nobody can sign in. */
  oauth: OAuthApp | null;
  /** REST API base: https://api.github.com, or https://HOST/api/v3 on Enterprise. */
  githubApiUrl: string;
  /** Web base for OAuth and links: https://github.com, or https://HOST on Enterprise. */
  githubWebUrl: string;
  /** Settings defaults; repo-config's `defaults` unless given. */
  defaults?: RepoSettings;
  /** Installed plugin names offered on the settings page. */
  plugins?: string[];
  /** OpenAI-compatible model providers: the settings page lists them and refuses others. */
  providers?: ProviderTable;
  /** How often a live job page looks for new events. Default 500 ms. */
  pollIntervalMs?: number;
  /** CLIENT_ADDRESS_HEADER: where a trusted proxy puts the client's address. */
  clientAddressHeader?: string;
  /** Live streams per job and per client address, on each web process. Default 50 and 10. */
  streamLimits?: FeedLimits;
}

export interface WebDeps {
  db: { pool: pg.Pool };
  config: WebConfig;
  logger?: Logger;
}

/** One request, as route functions see it. */
export interface RequestContext {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  session: Session | null;
  /** Path parameters captured by the route pattern. */
  params: string[];
}

/** What every route shares: configuration, the database, cookies and GitHub clients. */
export class WebServices {
  readonly jar: CookieJar;
  /** Served over https (PUBLIC_URL): cookies are Secure and pages send HSTS. */
  readonly secure: boolean;
  readonly pool: pg.Pool;
  readonly config: WebConfig;
  readonly logger: Logger | undefined;
  /** Live event streams, ended on close so the HTTP server can stop. */
  readonly streams = new Set<ServerResponse>();
  /** One poll per watched job, shared by its streams. */
  readonly feeds: JobFeeds;
  /** Whether a repository is public, and its config file, as an anonymous visitor sees them. */
  // Anonymous GitHub calls are rate-limited per server address; visibility changes are rare.
  readonly publicFacts = new TtlCache<{ isPublic: boolean; file: RepoConfig | null }>(5 * 60_000);

  constructor(deps: WebDeps) {
    // It signs sessions and derives the token encryption key: guessable means forgeable.
    if (deps.config.sessionSecret.length < 32) {
      throw new Error("the web session secret (SESSION_SECRET) must be at least 32 characters");
    }
    this.config = deps.config;
    this.pool = deps.db.pool;
    this.feeds = new JobFeeds(
      this.pool,
      deps.config.pollIntervalMs ?? 500,
      deps.config.streamLimits ?? { perJob: 50, perClient: 10 },
    );
    this.logger = deps.logger;
    this.secure = deps.config.publicUrl.startsWith("https:");
    this.jar = new CookieJar(deps.config.sessionSecret, this.secure);
  }

  /** The lowest layer of every repository's settings. */
  get defaults(): RepoSettings {
    return this.config.defaults ?? defaults;
  }

  /** GitHub as the signed-in user, or anonymously without a session. */
  github(session: Session | null): GitHubUserApi {
    return new GitHubUserApi(this.config.githubApiUrl, session?.token ?? null);
  }

  absoluteUrl(path: string): string {
    return new URL(path, this.config.publicUrl).toString();
  }
}
