import { describe, expect, it } from "vitest";
import { type Env, loadConfig } from "../../src/config/env.ts";

function loaded(env: Env) {
  const result = loadConfig(env, "/srv/vmpilot");
  if ("problems" in result) throw new Error(result.problems.join("\n"));
  return result.config.tracing;
}

function problems(env: Env): string[] {
  const result = loadConfig(env, "/srv/vmpilot");
  return "problems" in result ? result.problems : [];
}

describe("tracing configuration", () => {
  it("is off with no OTLP endpoint set, whatever else is", () => {
    expect(loaded({})).toBeUndefined();
    expect(loaded({ OTEL_SERVICE_NAME: "ci", OTEL_EXPORTER_OTLP_HEADERS: "a=b" })).toBeUndefined();
  });

  it("exports to the endpoint's /v1/traces, as OpenTelemetry's exporters do", () => {
    expect(loaded({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" })).toEqual({
      url: "http://collector:4318/v1/traces",
      headers: {},
      serviceName: "vmpilot",
      toolContent: false,
    });
    expect(loaded({ OTEL_EXPORTER_OTLP_ENDPOINT: "https://otlp.example.com/otlp/" })?.url).toBe(
      "https://otlp.example.com/otlp/v1/traces",
    );
  });

  it("takes the traces' own endpoint and headers as given, over the shared ones", () => {
    const tracing = loaded({
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318",
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://tempo:4318/custom/traces",
      OTEL_EXPORTER_OTLP_HEADERS: "x-team=a%20b, x-shared=1",
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: "X-Team=traces",
      OTEL_SERVICE_NAME: "vmpilot-eu",
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
      VMPILOT_TRACE_TOOL_CONTENT: "TRUE",
    });
    expect(tracing).toEqual({
      url: "http://tempo:4318/custom/traces",
      headers: { "x-team": "traces", "x-shared": "1" },
      serviceName: "vmpilot-eu",
      toolContent: true,
    });
  });

  it.each([{ OTEL_SDK_DISABLED: "true" }, { OTEL_TRACES_EXPORTER: "none" }])(
    "is off with %j, endpoint or not",
    (off) => {
      expect(
        loaded({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318", ...off }),
      ).toBeUndefined();
    },
  );

  it("refuses what would not export, naming the variable and never a header's value", () => {
    expect(
      problems({
        OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4317",
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "grpc",
        OTEL_EXPORTER_OTLP_HEADERS: "x-api-key",
        OTEL_EXPORTER_OTLP_TRACES_HEADERS: "authorization=Bearer%zzsecret-token",
        OTEL_SDK_DISABLED: "maybe",
        OTEL_TRACES_EXPORTER: "zipkin",
        VMPILOT_TRACE_TOOL_CONTENT: "yes",
      }),
    ).toEqual([
      "OTEL_EXPORTER_OTLP_ENDPOINT: must be an http(s) URL such as http://localhost:4318",
      "OTEL_EXPORTER_OTLP_HEADERS: must be comma-separated name=value pairs",
      "OTEL_EXPORTER_OTLP_TRACES_HEADERS: must be comma-separated name=value pairs",
      "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: must be http/json or http/protobuf: vmpilot sends OTLP over HTTP, in JSON, which collectors take on the same endpoint (not grpc)",
      "OTEL_TRACES_EXPORTER: must be otlp or none (vmpilot exports over OTLP only)",
      "OTEL_SDK_DISABLED: must be true or false",
      "VMPILOT_TRACE_TOOL_CONTENT: must be true or false",
    ]);
  });
});
