import { routeModel } from "../config/model-route.ts";
import type { ProviderTable } from "../config/providers.ts";
import { type RepoConfig, resolveSettings } from "../config/repo-config.ts";
import { readLessons } from "../github/memory-file.ts";
import { pageSettings } from "../jobs/run/settings.ts";
import { getRepository, setRepositorySettings, upsertRepository } from "../store/installations.ts";
import { administeredRepo } from "./access.ts";
import { requireCsrf, requireSession } from "./auth.ts";
import type { RequestContext, WebServices } from "./context.ts";
import type { UserRepo } from "./github-user.ts";
import { html } from "./html.ts";
import { readForm, redirect, send } from "./http.ts";
import { permissionsNotice } from "./installation-permissions.ts";
import { page } from "./layout.ts";
import type { Session } from "./session.ts";
import {
  configFromValues,
  type FormResult,
  type FormValues,
  overridesOf,
  valuesFromForm,
  valuesFromSettings,
} from "./settings-form.ts";
import { type SettingsView, settingsForm } from "./settings-view.ts";

export async function settingsIndex(web: WebServices, ctx: RequestContext): Promise<void> {
  const session = requireSession(ctx);
  const repos = (await web.github(session).repos()).filter((r) => r.admin);
  const byInstallation = new Map<number, UserRepo[]>();
  for (const repo of repos) {
    byInstallation.set(repo.installationId, [
      ...(byInstallation.get(repo.installationId) ?? []),
      repo,
    ]);
  }
  const sections = [...byInstallation].map(
    ([installationId, list]) => html`<section aria-labelledby="inst-${installationId}">
<h2 id="inst-${installationId}">${list[0]?.fullName.split("/")[0]}</h2>
${list[0] ? permissionsNotice(list[0].installation) : ""}
<ul>${list.map((r) => html`<li><a href="/settings/${r.fullName}">${r.fullName}</a>${r.private ? html` <span class="muted">(private)</span>` : ""}</li>`)}</ul>
</section>`,
  );
  const body = html`<h1>Settings</h1>
${
  sections.length
    ? html`<p>Repositories where vmpilot is installed and you are an administrator:</p>${sections}`
    : html`<p>You administer no repository where vmpilot is installed.</p>`
}`;
  send(ctx.res, 200, page({ title: "Settings", session, nav: "settings", body }));
}

export async function repoSettings(web: WebServices, ctx: RequestContext): Promise<void> {
  const session = requireSession(ctx);
  const repo = await administeredRepo(web, session, repoName(ctx));
  const state = await loadState(web, session, repo);
  const resolved = resolveSettings({ defaults: web.defaults, page: state.page, file: state.file });
  const pageOnly = resolveSettings({ defaults: web.defaults, page: state.page }).values;
  show(web, ctx, session, 200, {
    ...state,
    repo: repo.fullName,
    values: valuesFromSettings(pageOnly),
    sources: resolved.sources,
    errors: {},
    general: [],
    saved: ctx.url.searchParams.has("saved"),
  });
}

export async function saveRepoSettings(web: WebServices, ctx: RequestContext): Promise<void> {
  const form = await readForm(ctx.req);
  const session = ctx.session;
  requireCsrf(session, form);
  const repo = await administeredRepo(web, session, repoName(ctx));
  const values: FormValues = valuesFromForm(form);
  const result = withConfiguredModel(configFromValues(values), web.config.providers ?? new Map());
  if (!result.ok) {
    const state = await loadState(web, session, repo);
    const { sources } = resolveSettings({
      defaults: web.defaults,
      page: state.page,
      file: state.file,
    });
    show(web, ctx, session, 422, {
      ...state,
      repo: repo.fullName,
      values,
      sources,
      ...result,
      saved: false,
    });
    return;
  }
  // The repository may predate our records of it (installed before this database existed).
  if (!(await getRepository(web.pool, repo.id))) {
    await upsertRepository(web.pool, {
      id: repo.id,
      installationId: repo.installationId,
      fullName: repo.fullName,
    });
  }
  await setRepositorySettings(web.pool, repo.id, overridesOf(result.config, web.defaults));
  redirect(ctx.res, `/settings/${repo.fullName}?saved=1`);
}

/** A model whose provider the operator has not configured would fail every job: refused here. */
function withConfiguredModel(result: FormResult, providers: ProviderTable): FormResult {
  if (!result.ok || result.config.model === undefined) return result;
  try {
    routeModel(result.config.model, providers);
    return result;
  } catch (error) {
    const message = (error as Error).message;
    const sentence = `${message.charAt(0).toUpperCase()}${message.slice(1)}.`;
    return { ok: false, errors: { model: [sentence] }, general: [] };
  }
}

interface StoredState {
  page: RepoConfig | null;
  file: RepoConfig | null;
  fileError: string | null;
  lessons: SettingsView["lessons"];
}

async function loadState(web: WebServices, session: Session, repo: UserRepo): Promise<StoredState> {
  const stored = await getRepository(web.pool, repo.id);
  const github = web.github(session);
  const load = await github.repoConfig(repo.fullName);
  const page = pageSettings(stored?.settings);
  const file = load.ok && load.source !== undefined ? load.config : null;
  // The lessons every job reads: the file the settings name, on the default branch.
  const { memory } = resolveSettings({ defaults: web.defaults, page, file }).values;
  const text = memory.enabled ? await github.repoFile(repo.fullName, memory.path) : undefined;
  return {
    page,
    file,
    fileError: load.ok ? null : load.message,
    lessons: memory.enabled ? { path: memory.path, list: readLessons(text ?? "") } : null,
  };
}

function show(
  web: WebServices,
  ctx: RequestContext,
  session: Session,
  status: number,
  view: Omit<SettingsView, "session" | "plugins" | "providers">,
): void {
  const body = settingsForm({
    ...view,
    session,
    plugins: web.config.plugins ?? [],
    providers: ["anthropic", ...(web.config.providers?.keys() ?? [])],
  });
  send(ctx.res, status, page({ title: `Settings · ${view.repo}`, session, nav: "settings", body }));
}

function repoName(ctx: RequestContext): string {
  return `${ctx.params[0]}/${ctx.params[1]}`;
}
