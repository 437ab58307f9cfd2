import { type Html, html } from "./html.ts";

export interface Bar {
  label: string;
  value: number;
  /** Shown in the bar's tooltip and to screen readers. */
  title: string;
}

const WIDTH = 720;
const HEIGHT = 180;
const LEFT = 56;
const RIGHT = 20;
const BOTTOM = 24;
const TOP = 10;

/** A bar chart as inline SVG, scaled to the largest value; no script, no external assets. */
export function barChart(bars: Bar[], caption: string, formatValue: (v: number) => string): Html {
  const max = Math.max(...bars.map((b) => b.value), 0);
  const plot = HEIGHT - BOTTOM - TOP;
  const slot = (WIDTH - LEFT - RIGHT) / Math.max(bars.length, 1);
  const barWidth = Math.max(2, slot * 0.7);
  // About five axis labels, always including the newest bar, so the axis stays readable.
  const every = Math.max(1, Math.ceil(bars.length / 5));
  const items = bars.map((bar, i) => {
    const h = max > 0 ? Math.round((bar.value / max) * plot) : 0;
    const x = LEFT + i * slot;
    const label =
      (bars.length - 1 - i) % every === 0
        ? html`<text x="${(x + slot / 2).toFixed(1)}" y="${HEIGHT - 6}" text-anchor="middle">${bar.label}</text>`
        : "";
    return html`<rect x="${(x + (slot - barWidth) / 2).toFixed(1)}" y="${HEIGHT - BOTTOM - h}" width="${barWidth.toFixed(1)}" height="${h}" class="bar"><title>${bar.title}</title></rect>${label}`;
  });
  return html`<figure class="chart">
  <svg viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img" aria-labelledby="chart-caption">
    <line x1="${LEFT}" y1="${HEIGHT - BOTTOM}" x2="${WIDTH - RIGHT}" y2="${HEIGHT - BOTTOM}" class="axis"></line>
    <line x1="${LEFT}" y1="${TOP}" x2="${WIDTH - RIGHT}" y2="${TOP}" class="grid"></line>
    <text x="${LEFT - 6}" y="${TOP + 4}" text-anchor="end">${formatValue(max)}</text>
    <text x="${LEFT - 6}" y="${HEIGHT - BOTTOM + 4}" text-anchor="end">${formatValue(0)}</text>
    ${items}
  </svg>
  <figcaption id="chart-caption">${caption}</figcaption>
</figure>`;
}
