# syntax=docker/dockerfile:1
# vmpilot: one image for both process groups (npm start -- --role web|worker).

# Production dependencies only; Node runs the TypeScript itself (bin/typescript.js), so there is no
# compile step.
FROM node:24-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

# The workspace image (`docker build --target workspace`): what a Fly Machine or a Kubernetes pod
# runs for one job. Its entry is the workspace agent; it holds no token and no app configuration,
# only the tools a repository's commands need. Not the last stage: a plain `docker build` makes
# the app image. Add a language's toolchain by building on it.
FROM node:24-slim AS workspace
# util-linux: setpriv, in the entry.
RUN apt-get update \
  && apt-get install -y --no-install-recommends git ca-certificates tini bash curl python3 make g++ util-linux \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/vmpilot
COPY --from=deps /app/node_modules/zod ./node_modules/zod
COPY package.json ./
COPY src ./src
# Commands run as `workspace`, which owns the checkout and its home; the agent and its code stay
# root's, so a command can neither signal, trace nor read the agent, nor change its code.
RUN useradd --create-home --uid 10002 --user-group --shell /bin/bash workspace \
  && mkdir -p /workspace && chown workspace:workspace /workspace
# The agent is root holding only CAP_SETUID, CAP_SETGID (to start commands as `workspace`) and
# CAP_KILL (to stop them), under no_new_privs, whatever the platform grants (a Fly Machine all of
# them; the Kubernetes pod spec those three): src/workspace/agent/identity.ts. Without them, or
# run as another user, the agent refuses to start.
USER 0
ENV VMPILOT_AGENT_ROOT=/workspace \
  VMPILOT_AGENT_HOME=/home/workspace \
  VMPILOT_AGENT_COMMAND_USER=10002:10002 \
  VMPILOT_AGENT_LISTEN=[::]:8080
EXPOSE 8080
ENTRYPOINT ["tini", "--", "setpriv", "--bounding-set=-all,+setuid,+setgid,+kill", "--inh-caps=-all", "--no-new-privs", "--"]
CMD ["node", "src/workspace/agent/main.ts"]

FROM node:24-slim AS runtime
# git: clone and push in the worker; bubblewrap: the workspace sandbox; socat: the sandbox's
# network bridge; tini: reaps the sandbox's processes and forwards signals.
RUN apt-get update \
  && apt-get install -y --no-install-recommends git bubblewrap socat ca-certificates tini \
  && rm -rf /var/lib/apt/lists/*
ENV NODE_ENV=production \
  HOST=0.0.0.0 \
  PORT=3000 \
  DATA_DIR=/data \
  LOG_FORMAT=json
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json package-lock.json tsconfig.json app.yml ./
COPY bin ./bin
COPY src ./src
COPY plugins ./plugins
RUN useradd --create-home --uid 10001 --user-group --shell /usr/sbin/nologin vmpilot \
  && mkdir -p /data \
  && chown vmpilot:vmpilot /data
USER vmpilot
VOLUME ["/data"]
EXPOSE 3000
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.PORT}/healthz`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["tini", "--"]
CMD ["npm", "start"]
