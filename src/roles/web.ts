// The web role: GitHub's webhooks (the intake), the chat face and the web pages, on the process's
// HTTP server, once GitHub has told the app its slug.
import { createNodeMiddleware, Probot } from "probot";
import { SmeeClient } from "smee-client";
import { type ChatFaceDeps, mountChatFace } from "../chat/server.ts";
import type { Config } from "../config/env.ts";
import { attachmentPolicy } from "../github/images.ts";
import { intakeApp } from "../intake/app.ts";
import { capWebhookBody, type WebhookBodyLimits } from "../intake/body-limit.ts";
import { registerSecret } from "../log/redact.ts";
import { sharedSecret } from "../store/app-secrets.ts";
import type { Database } from "../store/database.ts";
import { mountWeb } from "../web/index.ts";
import { fetchAppSlug, type Handler, type RoleContext } from "./context.ts";
import { type Backoff, untilReachable } from "./until-reachable.ts";

export const WEBHOOK_PATH = "/api/github/webhooks";

/** What tests may change of the chat face (they point clone URLs at their git server). */
export type ChatOverrides = Partial<
  Pick<ChatFaceDeps, "cloneUrl" | "pollIntervalMs" | "githubCallsPerMinute" | "imageFetch">
>;

/** Mounts the web role's handlers behind `handlers`; resolves to the app's slug. */
export async function startWeb(
  ctx: RoleContext,
  handlers: Handler[],
  options: { chat?: ChatOverrides; githubRetry?: Backoff; webhooks?: WebhookBodyLimits },
): Promise<string> {
  const { config, db, queue, probot, logger, cleanup } = ctx;
  const web = mountWeb({
    db,
    logger,
    config: {
      publicUrl: config.publicUrl,
      sessionSecret: await webSessionSecret(config, db),
      oauth: config.oauth,
      githubApiUrl: config.baseUrl,
      githubWebUrl: config.githubWebUrl,
      defaults: ctx.defaults,
      plugins: ctx.plugins.map((plugin) => plugin.name),
      providers: config.providers,
      clientAddressHeader: config.clientAddressHeader,
    },
  });
  // Live job pages hold their connections open; the server cannot close before they end.
  cleanup.push(() => web.close());
  const appSlug = await untilReachable(() => fetchAppSlug(probot), {
    ...options.githubRetry,
    readiness: ctx.readiness,
    logger,
    cleanup,
  });
  const chat = mountChatFace({
    db,
    queue,
    operatorKey: config.apiKey,
    auth: (id) => probot.auth(id),
    allowedUsers: config.allowedUsers,
    cloneUrl: (fullName) => `${config.githubWebUrl}/${fullName}.git`,
    defaults: ctx.defaults,
    ratePerMinute: config.chatRatePerMinute,
    clientAddressHeader: config.clientAddressHeader,
    imageFetch: { policy: attachmentPolicy(config.baseUrl) },
    logger,
    ...options.chat,
  });
  cleanup.push(() => chat.close());
  const intake = intakeApp({ db, queue, appSlug, label: config.label, command: config.command });
  // Webhooks first: they are the hot path, and need no trip through the page router.
  const webhooks = await createNodeMiddleware(intake, {
    probot: intakeProbot(ctx),
    webhooksPath: WEBHOOK_PATH,
  });
  handlers.push(
    capWebhookBody(WEBHOOK_PATH, webhooks, options.webhooks, config.clientAddressHeader),
  );
  handlers.push(chat.handler);
  handlers.push(web.handler);
  return appSlug;
}

/**
 * The intake's own Probot. The intake calls no GitHub API (the worker does), yet an app's Probot
 * makes each handler of each delivery an installation client, with its app authentication and
 * all its plugins: a third of what Probot spends on a delivery. Given a token, Probot shares one
 * client among all events instead; that client is refused whatever it would ask of GitHub, so
 * the token, a placeholder, is never sent.
 */
function intakeProbot({ config, logger }: RoleContext): Probot {
  return new Probot({
    githubToken: "unused",
    secret: config.webhookSecret,
    baseUrl: config.baseUrl,
    log: logger,
    request: { fetch: () => Promise.reject(new Error("the intake makes no GitHub calls")) },
  });
}

/** WEBHOOK_PROXY_URL (development): deliveries from the smee.io channel to the server at `url`. */
export async function forwardWebhooks(ctx: RoleContext, url: string): Promise<void> {
  const { config, logger } = ctx;
  if (!config.webhookProxyUrl) return;
  const smee = new SmeeClient({
    source: config.webhookProxyUrl,
    target: `${url}${WEBHOOK_PATH}`,
    logger: { info: (msg) => logger.info(msg), error: (msg) => logger.error(msg) },
  });
  await smee.start();
  ctx.cleanup.push(() => smee.stop());
}

/**
 * SESSION_SECRET, or one made once and kept in the database: the .env that Probot's setup page
 * writes has none, and every web process behind the database must sign cookies alike.
 */
async function webSessionSecret(config: Config, db: Database): Promise<string> {
  const secret = config.sessionSecret ?? (await sharedSecret(db.pool, "web-session"));
  registerSecret(secret);
  return secret;
}
