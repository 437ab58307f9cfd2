import { type Html, html } from "./html.ts";

export interface Bar {
  label: string;
  value: number;
  /** Shown in the bar's tooltip and to screen readers. */
  title: string;
}

/** A bar chart as inline SVG, scaled to the largest value; no script, no external assets. */
export function barChart(bars: Bar[], caption: string): Html {
  const width = 720;
  const height = 200;
  const bottom = 24;
  const max = Math.max(...bars.map((b) => b.value), 0);
  const slot = bars.length ? width / bars.length : width;
  const barWidth = Math.max(2, slot * 0.7);
  const rects = bars.map((bar, i) => {
    const h = max > 0 ? Math.round((bar.value / max) * (height - bottom - 8)) : 0;
    const x = (i * slot + (slot - barWidth) / 2).toFixed(1);
    const y = height - bottom - h;
    return html`<rect x="${x}" y="${y}" width="${barWidth.toFixed(1)}" height="${h}" class="bar"><title>${bar.title}</title></rect>`;
  });
  // About five axis labels, so the axis stays readable on a phone.
  const step = Math.max(1, Math.ceil(bars.length / 5));
  const labels = bars.map((bar, i) =>
    i % step === 0
      ? html`<text x="${(i * slot + slot / 2).toFixed(1)}" y="${height - 6}" text-anchor="middle">${bar.label}</text>`
      : "",
  );
  return html`<figure class="chart">
  <svg viewBox="0 0 ${width} ${height}" role="img" aria-labelledby="chart-caption">
    <line x1="0" y1="${height - bottom}" x2="${width}" y2="${height - bottom}" class="axis"></line>
    ${rects}${labels}
  </svg>
  <figcaption id="chart-caption">${caption}</figcaption>
</figure>`;
}
