// GitHub App user-to-server OAuth, through @octokit/oauth-methods: the authorize URL and the code
// exchange. The web host (github.com, or an Enterprise server) follows from the API URL.

import { exchangeWebFlowCode, getWebFlowAuthorizationUrl } from "@octokit/oauth-methods";
import { RequestError } from "@octokit/request-error";
import { ProbotOctokit } from "probot";
import { z } from "zod";

export interface OAuthApp {
  clientId: string;
  clientSecret: string;
}

/** GitHub did not sign the user in (a bad or expired code, wrong client credentials). */
export class SignInRefused extends Error {
  override name = "SignInRefused";
}

const OAuthError = z.object({
  error: z.string().optional(),
  error_description: z.string().optional(),
});

function requestFor(apiUrl: string) {
  return new ProbotOctokit({ baseUrl: apiUrl }).request;
}

export function authorizeUrl(
  apiUrl: string,
  app: OAuthApp,
  redirectUri: string,
  state: string,
): string {
  return getWebFlowAuthorizationUrl({
    clientType: "github-app",
    clientId: app.clientId,
    redirectUrl: redirectUri,
    state,
    allowSignup: false,
    request: requestFor(apiUrl),
  }).url;
}

export async function exchangeCode(
  apiUrl: string,
  app: OAuthApp,
  code: string,
  redirectUri: string,
): Promise<string> {
  try {
    const { authentication } = await exchangeWebFlowCode({
      clientType: "github-app",
      clientId: app.clientId,
      clientSecret: app.clientSecret,
      code,
      redirectUrl: redirectUri,
      request: requestFor(apiUrl),
    });
    return authentication.token;
  } catch (error) {
    // GitHub answers 200 with an error field for bad or expired codes; Octokit raises it.
    if (error instanceof RequestError) {
      const body = OAuthError.safeParse(error.response?.data);
      const why = body.success ? (body.data.error_description ?? body.data.error) : undefined;
      throw new SignInRefused(`GitHub refused the sign-in: ${why ?? error.status}`);
    }
    throw error;
  }
}
