// biome-ignore-all lint/suspicious/noTemplateCurlyInString: ${secrets.NAME} is what vmpilot.yml writes.
import { describe, expect, it } from "vitest";
import { loadMcpSecrets, loadMcpServers, resolveHeaders } from "../../src/config/mcp.ts";
import { defaults, parseRepoConfig, resolveSettings } from "../../src/config/repo-config.ts";

const SECRETS = [{ name: "TRACKER_TOKEN", host: "mcp.tracker.example" }, { name: "DOCS_KEY" }];

describe("mcp in vmpilot.yml", () => {
  it("accepts stdio and streamable HTTP servers with the operator's secrets in headers", () => {
    const text = `
mcp:
  docs:
    command: [node, tools/mcp-docs.mjs]
    tools: [search, fetch_page]
  tracker:
    url: https://mcp.tracker.example/mcp
    headers:
      Authorization: "Bearer \${secrets.TRACKER_TOKEN}"
      X-Docs: "\${secrets.DOCS_KEY}"
`;
    expect(parseRepoConfig(text, SECRETS)).toEqual({
      ok: true,
      config: {
        mcp: {
          docs: { command: ["node", "tools/mcp-docs.mjs"], tools: ["search", "fetch_page"] },
          tracker: {
            url: "https://mcp.tracker.example/mcp",
            headers: {
              Authorization: "Bearer ${secrets.TRACKER_TOKEN}",
              "X-Docs": "${secrets.DOCS_KEY}",
            },
          },
        },
      },
    });
  });

  it.each([
    [
      "unknown secret",
      'mcp:\n  t:\n    url: https://a.example/mcp\n    headers:\n      Authorization: "Bearer ${secrets.HOME_TOKEN}"',
      5,
      "mcp.t.headers.Authorization: names the secret HOME_TOKEN, which the operator does not list in MCP_SECRETS",
    ],
    [
      "secret bound to another host",
      'mcp:\n  t:\n    url: https://evil.example/mcp\n    headers:\n      Authorization: "Bearer ${secrets.TRACKER_TOKEN}"',
      5,
      "mcp.t.headers.Authorization: names the secret TRACKER_TOKEN, which may only be sent to mcp.tracker.example",
    ],
    [
      "an environment variable",
      'mcp:\n  t:\n    url: https://a.example/mcp\n    headers:\n      Authorization: "Bearer ${GITHUB_TOKEN}"',
      5,
      "mcp.t.headers.Authorization: ${GITHUB_TOKEN} is not a secret",
    ],
    [
      "both kinds at once",
      "mcp:\n  docs:\n    command: [node, s.mjs]\n    url: https://a.example/mcp",
      2,
      "mcp.docs: must have exactly one of command (stdio) or url",
    ],
    [
      "neither kind",
      "mcp:\n  docs:\n    tools: [a]",
      2,
      "mcp.docs: must have exactly one of command (stdio) or url",
    ],
    [
      "headers on a stdio server",
      "mcp:\n  docs:\n    command: [node]\n    headers: {A: b}",
      4,
      "mcp.docs.headers: only apply to a server with url",
    ],
    ["an empty command", "mcp:\n  docs:\n    command: []", 3, "mcp.docs.command: must name"],
    [
      "a bad server name",
      "setup: [x]\nmcp:\n  Docs__x:\n    command: [node]",
      3,
      "mcp.Docs__x: must be lowercase letters and digits",
    ],
    ["an unknown key", "mcp:\n  docs:\n    command: [node]\n    env: {A: b}", 4, "unknown key"],
    [
      "credentials in the URL",
      "mcp:\n  t:\n    url: https://me:pw@a.example/mcp",
      3,
      "mcp.t.url: must not hold credentials",
    ],
    ["a non-http URL", "mcp:\n  t:\n    url: file:///etc/passwd", 3, "mcp.t.url: must be an http"],
    [
      "a header vmpilot sets",
      "mcp:\n  t:\n    url: https://a.example/\n    headers: {Mcp-Session-Id: x}",
      4,
      "is set by vmpilot itself",
    ],
    [
      "a header value with a line break",
      'mcp:\n  t:\n    url: https://a.example/\n    headers: {A: "x\\r\\nHost: b"}',
      4,
      "mcp.t.headers.A: must be one line",
    ],
  ])("refuses %s, pointing at its line", (_what, text, line, expected) => {
    const result = parseRepoConfig(text, SECRETS);
    if (result.ok) throw new Error("accepted");
    expect(result.message).toContain(expected);
    expect(result.issues[0]?.line).toBe(line);
  });

  it("knows the operator's secrets from MCP_SECRETS by default", () => {
    const text =
      'mcp:\n  t:\n    url: https://a.example/mcp\n    headers: {A: "${secrets.MCP_TEST_TOKEN}"}';
    const before = { ...process.env };
    try {
      expect(parseRepoConfig(text).ok).toBe(false);
      process.env.MCP_SECRETS = "MCP_TEST_TOKEN";
      process.env.MCP_TEST_TOKEN = "s3cret-value-1234";
      expect(parseRepoConfig(text).ok).toBe(true);
    } finally {
      process.env = before;
    }
  });
});

describe("the operator's servers and the file's", () => {
  const operator = {
    tracker: {
      url: "https://mcp.tracker.example/mcp",
      tools: ["read", "search"],
      from: "operator",
    },
  } as const;

  it("adds the file's servers to the operator's, which the file can narrow but not loosen", () => {
    const { values } = resolveSettings({
      defaults: { ...defaults, mcp: structuredClone(operator) as never },
      file: {
        mcp: {
          tracker: { url: "https://evil.example/mcp", tools: ["search", "delete"] },
          docs: { command: ["node", "docs.mjs"] },
        },
      },
    });
    expect(values.mcp).toEqual({
      tracker: { url: "https://mcp.tracker.example/mcp", tools: ["search"], from: "operator" },
      docs: { command: ["node", "docs.mjs"], from: "file" },
    });
  });

  it("keeps the operator's server whole when the file names it without tools", () => {
    const { values } = resolveSettings({
      defaults: { ...defaults, mcp: structuredClone(operator) as never },
      file: { mcp: { tracker: { command: ["sh", "-c", "steal"] } } },
    });
    expect(values.mcp).toEqual(operator);
  });

  it("reads MCP_SERVERS as JSON, with headers naming only MCP_SECRETS", () => {
    const env = {
      MCP_SECRETS: "TRACKER_TOKEN@mcp.tracker.example",
      TRACKER_TOKEN: "tok-0123456789",
      MCP_SERVERS: JSON.stringify({
        tracker: {
          url: "https://mcp.tracker.example/mcp",
          headers: { Authorization: "Bearer ${secrets.TRACKER_TOKEN}" },
        },
      }),
    };
    const secrets = loadMcpSecrets(env);
    if (!("secrets" in secrets)) throw new Error(secrets.problems.join("; "));
    expect(secrets.secrets).toEqual([
      { name: "TRACKER_TOKEN", value: "tok-0123456789", host: "mcp.tracker.example" },
    ]);
    const servers = loadMcpServers(env, secrets.secrets);
    if (!("servers" in servers)) throw new Error(servers.problems.join("; "));
    expect(servers.servers.tracker?.from).toBe("operator");
    expect(resolveHeaders(servers.servers.tracker ?? {}, secrets.secrets)).toEqual({
      Authorization: "Bearer tok-0123456789",
    });
    expect(() =>
      resolveHeaders(
        { url: "https://evil.example/", headers: { A: "${secrets.TRACKER_TOKEN}" } },
        secrets.secrets,
      ),
    ).toThrow(/TRACKER_TOKEN is not one this server may be sent/);
  });

  it.each([
    [{ MCP_SECRETS: "TOKEN" }, "MCP_SECRETS: names TOKEN, which is not set"],
    [{ MCP_SECRETS: "A-B" }, 'MCP_SECRETS: "A-B" is not NAME or NAME@host'],
    [{ MCP_SECRETS: "A@x@y", A: "v" }, 'MCP_SECRETS: "A@x@y" is not NAME or NAME@host'],
  ])("says what is wrong with MCP_SECRETS %j, never its values", (env, expected) => {
    const loaded = loadMcpSecrets(env);
    expect("problems" in loaded ? loaded.problems : []).toEqual([
      expect.stringContaining(expected),
    ]);
  });

  it("says what is wrong with MCP_SERVERS", () => {
    expect(loadMcpServers({ MCP_SERVERS: "{" }, [])).toEqual({
      problems: ["MCP_SERVERS: is not JSON"],
    });
    expect(
      loadMcpServers(
        { MCP_SERVERS: '{"t":{"url":"https://a.example/","headers":{"A":"${secrets.X}"}}}' },
        [],
      ),
    ).toEqual({
      problems: [
        "MCP_SERVERS: t.headers.A: names the secret X, which the operator does not list in MCP_SECRETS",
      ],
    });
  });
});
