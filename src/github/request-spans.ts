// Every call of the app's GitHub clients as a span of the job that made it (docs/tracing.md): the
// pull request and comment writes among them. A span names the route and its answer's status,
// never a body.
import { RequestError } from "@octokit/request-error";
import type { ProbotOctokit } from "probot";
import { inSpan, SpanKind } from "../log/trace.ts";

type Hooks = Pick<InstanceType<typeof ProbotOctokit>, "hook">;

/** An Octokit plugin (the app's clients are made with it, main.ts). */
export function traceRequests(octokit: Hooks): void {
  octokit.hook.wrap("request", (request, options) => {
    const method = String(options.method);
    // A route (`/repos/{owner}/{repo}/pulls`), or a whole URL (a next page's link): its path.
    const url = String(options.url);
    const route = URL.canParse(url) ? new URL(url).pathname : url;
    const attributes = {
      "http.request.method": method,
      [route.includes("{") ? "url.template" : "url.path"]: route,
      "server.address": hostOf(options.baseUrl),
    };
    return inSpan(`${method} ${route}`, { kind: SpanKind.CLIENT, attributes }, async (span) => {
      try {
        const response = await request(options);
        span.setAttribute("http.response.status_code", response.status);
        return response;
      } catch (error) {
        if (error instanceof RequestError) {
          span.setAttribute("http.response.status_code", error.status);
        }
        throw error;
      }
    });
  });
}

function hostOf(baseUrl: unknown): string {
  return typeof baseUrl === "string" && URL.canParse(baseUrl) ? new URL(baseUrl).hostname : "";
}
