import { describe, expect, it } from "vitest";
import { barChart } from "../../src/web/chart.ts";
import { escapeHtml, html } from "../../src/web/html.ts";

describe("html``", () => {
  it("escapes every interpolation unless it is markup built by html`` itself", () => {
    const evil = `<img src=x onerror="alert('x')">&\``;
    const out = html`<p title="${evil}">${evil}${html`<b>${evil}</b>`}</p>`.value;
    const escaped = "&lt;img src=x onerror=&quot;alert(&#39;x&#39;)&quot;&gt;&amp;&#96;";
    expect(out).toBe(`<p title="${escaped}">${escaped}<b>${escaped}</b></p>`);
  });

  it("joins arrays and drops null, undefined and false", () => {
    expect(html`${["<a>", html`<b></b>`]}${null}${undefined}${false}${0}`.value).toBe(
      "&lt;a&gt;<b></b>0",
    );
  });

  it("escapes plain strings the same way outside templates", () => {
    expect(escapeHtml("a<b>&'\"`")).toBe("a&lt;b&gt;&amp;&#39;&quot;&#96;");
  });
});

describe("barChart", () => {
  it("draws bars scaled to the largest value, with escaped titles", () => {
    const svg = barChart(
      [
        { label: "a", value: 1, title: "<one>" },
        { label: "b", value: 2, title: "two" },
        { label: "c", value: 0, title: "zero" },
      ],
      "Costs",
      (v) => `$${v}`,
    ).value;
    const heights = [...svg.matchAll(/height="(\d+)" class="bar"/g)].map((m) => Number(m[1]));
    expect(heights[1]).toBeGreaterThan(0);
    expect(heights[0]).toBe(Math.round((heights[1] ?? 0) / 2));
    expect(heights[2]).toBe(0);
    expect(svg).toContain("<title>&lt;one&gt;</title>");
    expect(svg).toContain('role="img" aria-labelledby="chart-caption"');
    expect(svg).toContain('text-anchor="end">$2</text>');
    // The newest bar is always labelled.
    expect(svg).toMatch(/>c<\/text>/);
  });
});
