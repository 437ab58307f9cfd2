// No Docker engine on these machines: the Dockerfile and fly.toml are parsed and checked, and the
// image's health check command is run against real HTTP servers.
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { resolve } from "node:path";
import { promisify } from "node:util";
import { parse as parseToml } from "smol-toml";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { egressFor } from "../../src/workspace/vm/settings.ts";

const ROOT = resolve(import.meta.dirname, "../..");
const read = (file: string) => readFileSync(resolve(ROOT, file), "utf8");

interface Instruction {
  keyword: string;
  args: string;
}

/** Dockerfile instructions, with line continuations joined and comments dropped. */
function parseDockerfile(text: string): Instruction[] {
  const logical = text
    .split("\n")
    .filter((line) => !/^\s*#/.test(line))
    .join("\n")
    .replace(/\\\n/g, " ");
  return logical
    .split("\n")
    .map((line) => line.trim())
    .filter(Boolean)
    .map((line) => {
      const [keyword = "", ...rest] = line.split(/\s+/);
      return { keyword: keyword.toUpperCase(), args: rest.join(" ") };
    });
}

/** Instructions per build stage, each starting at its FROM. */
function stages(instructions: Instruction[]): Instruction[][] {
  const out: Instruction[][] = [];
  for (const instruction of instructions) {
    if (instruction.keyword === "FROM") out.push([]);
    out.at(-1)?.push(instruction);
  }
  return out;
}

describe("Dockerfile", () => {
  const instructions = parseDockerfile(read("Dockerfile"));
  const all = stages(instructions);
  const final = all.at(-1) ?? [];
  const args = (keyword: string, stage = final) =>
    stage.filter((i) => i.keyword === keyword).map((i) => i.args);

  it("is multi-stage on Node 24 slim", () => {
    expect(all.length).toBeGreaterThanOrEqual(2);
    for (const stage of all) expect(stage[0]?.args).toMatch(/^node:24-slim\b/);
    expect(args("COPY").some((a) => a.startsWith("--from=deps"))).toBe(true);
  });

  it("builds the workspace image as its own stage: the agent as entry, no app files, commands as another user", () => {
    const workspace = all.find((stage) => /\bAS workspace$/i.test(stage[0]?.args ?? "")) ?? [];
    expect(args("CMD", workspace).at(-1)).toBe('["node", "src/workspace/agent/main.ts"]');
    // The agent is root with only setuid, setgid and kill, under no_new_privs; its commands run as
    // a numeric user of their own, who can neither signal nor read it.
    expect(args("USER", workspace).at(-1)).toBe("0");
    const entry = args("ENTRYPOINT", workspace).at(-1) ?? "";
    expect(entry).toContain('"--bounding-set=-all,+setuid,+setgid,+kill"');
    expect(entry).toContain('"--no-new-privs"');
    expect(args("ENV", workspace).join(" ")).toMatch(
      /VMPILOT_AGENT_COMMAND_USER=[1-9]\d*:[1-9]\d*/,
    );
    const copied = args("COPY", workspace).join(" ");
    expect(copied).not.toMatch(/app\.yml|\.env|bin\b|plugins/);
    expect(all.indexOf(workspace)).toBeLessThan(all.length - 1);
  });

  it("installs git, bubblewrap and socat in the runtime image", () => {
    const install = args("RUN").find((a) => a.includes("apt-get install")) ?? "";
    for (const pkg of ["git", "bubblewrap", "socat", "ca-certificates"]) {
      expect(install.split(/\s+/)).toContain(pkg);
    }
    expect(install).toContain("--no-install-recommends");
    expect(install).toContain("rm -rf /var/lib/apt/lists/*");
  });

  it("runs as a non-root user and listens on all interfaces", () => {
    const user = args("USER").at(-1);
    expect(user).toBeDefined();
    expect(["root", "0"]).not.toContain(user?.split(":")[0]);
    expect(args("RUN").some((a) => a.includes(`useradd`) && a.includes(user as string))).toBe(true);
    expect(args("ENV").join(" ")).toMatch(/\bHOST=0\.0\.0\.0\b/);
    expect(args("ENV").join(" ")).toMatch(/\bDATA_DIR=\/data\b/);
  });

  it("starts with npm start and copies only files that exist and are not ignored", () => {
    expect(args("CMD").at(-1)).toBe('["npm", "start"]');
    const ignored = read(".dockerignore")
      .split("\n")
      .map((line) => line.trim())
      .filter((line) => line && !line.startsWith("#"));
    for (const copy of [...args("COPY"), ...args("COPY", all[0])]) {
      if (copy.startsWith("--from")) continue;
      const sources = copy.split(/\s+/).slice(0, -1);
      for (const source of sources) {
        expect(existsSync(resolve(ROOT, source)), source).toBe(true);
        expect(ignored, source).not.toContain(source);
      }
    }
    for (const secret of [".env", "*.pem", "node_modules", ".git"])
      expect(ignored).toContain(secret);
  });

  describe("HEALTHCHECK", () => {
    const healthcheck = args("HEALTHCHECK").at(-1) ?? "";
    const command = JSON.parse(healthcheck.slice(healthcheck.indexOf("CMD ") + 4)) as string[];

    async function check(status: number): Promise<number> {
      const server: Server = createServer((req, res) => {
        res.writeHead(req.url === "/healthz" ? status : 404).end();
      });
      await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
      const { port } = server.address() as AddressInfo;
      try {
        const [bin, ...rest] = command;
        await promisify(execFile)(bin === "node" ? process.execPath : (bin as string), rest, {
          env: { PORT: String(port) },
        });
        return 0;
      } catch (error) {
        return (error as { code: number }).code;
      } finally {
        server.close();
      }
    }

    it("hits /healthz with a timeout", () => {
      expect(healthcheck).toMatch(/--timeout=\d+s/);
      expect(command[0]).toBe("node");
    });

    it("passes when /healthz answers 200 and fails on 503", async () => {
      expect(await check(200)).toBe(0);
      expect(await check(503)).toBe(1);
    });
  });
});

describe("fly.toml", () => {
  // biome-ignore lint/suspicious/noExplicitAny: checked field by field below.
  const fly = parseToml(read("fly.toml")) as any;

  it("runs web and worker process groups from one image", () => {
    expect(fly.processes).toEqual({
      web: "npm start -- --role web",
      worker: "npm start -- --role worker",
    });
    expect(fly.build.dockerfile).toBe("Dockerfile");
  });

  it("routes HTTP to web and health-checks both groups on /healthz", () => {
    expect(fly.http_service.processes).toEqual(["web"]);
    expect(String(fly.http_service.internal_port)).toBe(fly.env.PORT);
    expect(fly.http_service.checks[0].path).toBe("/healthz");
    expect(fly.checks.worker_health).toMatchObject({ processes: ["worker"], path: "/healthz" });
    expect(fly.env.HOST).toBe("0.0.0.0");
  });

  it("mounts a volume at DATA_DIR for the workers", () => {
    expect(fly.mounts).toEqual([
      { processes: ["worker"], source: "vmpilot_data", destination: fly.env.DATA_DIR },
    ]);
  });

  it("has the web role read each client's address from the header Fly's proxy sets", () => {
    expect(fly.env.CLIENT_ADDRESS_HEADER).toBe("fly-client-ip");
  });

  it("takes DATABASE_URL from the Postgres attachment, not from the file", () => {
    expect(fly.env.DATABASE_URL).toBeUndefined();
    expect(read("fly.toml")).toContain("fly postgres attach");
  });

  it("isolates Fly workspaces' network by default, on the apps and the port the docs make", () => {
    // As a worker Machine of this file reads its environment: the VMs reach its proxy only
    // through the gateway at the worker app's Flycast name.
    const env = { ...fly.env, FLY_MACHINE_ID: "148e21ea7e0d89", FLY_APP_NAME: fly.app };
    const route = egressFor("fly", env);
    expect(route).toMatchObject({ host: "127.0.0.1", gateway: expect.any(Object) });
    expect(fly.env.FLY_WORKER_FLYCAST).toBe(`${fly.app}.flycast`);
    const docs = read("docs/vm-workspaces.md");
    const workspaceApp = /fly apps create (\S+) --network \S+/.exec(docs)?.[1];
    expect(fly.env.FLY_WORKSPACE_FLYCAST).toBe(`${workspaceApp}.flycast`);
    expect(docs).toContain(`fly ips allocate-v6 --private -a ${workspaceApp} `);
    expect(docs).toContain(`fly ips allocate-v6 --private -a ${fly.app} --network`);
    // The worker process answers the VMs on that port, with room for their downloads.
    const port = Number(fly.env.FLY_WORKER_PROXY_PORT);
    expect(fly.services).toEqual([
      expect.objectContaining({
        processes: ["worker"],
        internal_port: port,
        protocol: "tcp",
        ports: [{ port }],
      }),
    ]);
    expect(fly.services[0].concurrency.hard_limit).toBeGreaterThan(25);
  });
});

describe("deploy/kubernetes", () => {
  const documents = parseAllDocuments(read("deploy/kubernetes/vmpilot.yaml")).map(
    // biome-ignore lint/suspicious/noExplicitAny: checked field by field below.
    (document) => document.toJS() as any,
  );

  it("has the web role read each client's address from the header the ingress sets", () => {
    const web = documents.find((d) => d.kind === "Deployment" && d.metadata.name === "vmpilot-web");
    const env = web.spec.template.spec.containers[0].env as { name: string; value: string }[];
    const header = env.find((variable) => variable.name === "CLIENT_ADDRESS_HEADER")?.value;
    expect(["x-forwarded-for", "x-real-ip"]).toContain(header);
  });
});
