// GitHub App user-to-server OAuth: authorize URL and the code exchange.

export interface OAuthApp {
  clientId: string;
  clientSecret: string;
}

export function authorizeUrl(
  webUrl: string,
  app: OAuthApp,
  redirectUri: string,
  state: string,
): string {
  const url = new URL(`${webUrl}/login/oauth/authorize`);
  url.searchParams.set("client_id", app.clientId);
  url.searchParams.set("redirect_uri", redirectUri);
  url.searchParams.set("state", state);
  url.searchParams.set("allow_signup", "false");
  return url.toString();
}

export async function exchangeCode(
  webUrl: string,
  app: OAuthApp,
  code: string,
  redirectUri: string,
): Promise<string> {
  const res = await fetch(`${webUrl}/login/oauth/access_token`, {
    method: "POST",
    headers: {
      accept: "application/json",
      "content-type": "application/x-www-form-urlencoded",
      "user-agent": "vmpilot",
    },
    body: new URLSearchParams({
      client_id: app.clientId,
      client_secret: app.clientSecret,
      code,
      redirect_uri: redirectUri,
    }),
  });
  const body = (await res.json().catch(() => ({}))) as {
    access_token?: string;
    error?: string;
    error_description?: string;
  };
  if (!res.ok || !body.access_token) {
    // GitHub answers 200 with an error field for bad or expired codes.
    throw new Error(
      `GitHub refused the sign-in: ${body.error_description ?? body.error ?? res.status}`,
    );
  }
  return body.access_token;
}
