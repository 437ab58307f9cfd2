// Permissions vmpilot asked for after its first installations (app.yml): an installation made
// before keeps what it had until an owner accepts the new ones on GitHub, and until then vmpilot
// hears nothing of the checks or commit statuses on its pull requests (no CI fixes; no ready for
// review, or one while CI that reports statuses is red).
import { type Html, html } from "./html.ts";

const LEVELS = ["read", "write", "admin"];
const NEWER: Readonly<Record<string, string>> = {
  checks: "write",
  actions: "read",
  statuses: "read",
};

export interface InstallationGrant {
  /** The installation's page on GitHub, where an owner accepts new permissions. */
  url?: string;
  /** What the installation granted; undefined when GitHub did not say. */
  permissions?: Record<string, string>;
}

/** The newer permissions the installation lacks, as `checks (write)`; none when unknown. */
function missingPermissions(granted: Record<string, string> | undefined): string[] {
  if (!granted) return [];
  return Object.entries(NEWER).flatMap(([name, level]) =>
    LEVELS.indexOf(granted[name] ?? "") >= LEVELS.indexOf(level) ? [] : [`${name} (${level})`],
  );
}

export function permissionsNotice(installation: InstallationGrant): Html | "" {
  const missing = missingPermissions(installation.permissions);
  if (missing.length === 0) return "";
  const page = "the installation's page on GitHub";
  // Made here, on the rare page that needs it: one made as the module loads cost every server
  // start some 18 ms, for ICU's data.
  const and = new Intl.ListFormat("en", { type: "conjunction" });
  const where = installation.url ? html`<a href="${installation.url}">${page}</a>` : page;
  return html`<p class="notice error">This installation has not accepted the ${and.format(missing)} permission${missing.length > 1 ? "s" : ""} yet: vmpilot cannot fix failing CI on its pull requests or tell when they are ready for review. An owner can accept them on ${where}.</p>`;
}
