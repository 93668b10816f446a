/** A hand-written SVG chart of S3P acquire-wait latency per library (log scale), from the JSON. */

export interface ChartRow {
  label: string;
  p50: number;
  p99: number;
  max: number;
  ours?: boolean;
}

export interface ChartPanel {
  title: string;
  rows: ChartRow[];
}

const esc = (s: string): string =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

const SERIES = [
  { key: 'p50', name: 'p50', color: '#4e79a7' },
  { key: 'p99', name: 'p99', color: '#f28e2b' },
  { key: 'max', name: 'max', color: '#e15759' },
] as const;

export function waitChartSvg(title: string, subtitle: string, panels: ChartPanel[]): string {
  const labelWidth = 300;
  const plotWidth = 560;
  const right = 70;
  const width = labelWidth + plotWidth + right;
  const barH = 7;
  const rowH = SERIES.length * barH + 10;
  const minMs = 0.1;
  const maxMs = 10_000;
  const decades = Math.log10(maxMs / minMs);
  const x = (ms: number): number =>
    labelWidth + (Math.log10(Math.min(maxMs, Math.max(minMs, ms)) / minMs) / decades) * plotWidth;
  const fmt = (ms: number): string =>
    !Number.isFinite(ms)
      ? 'n/a'
      : ms >= 100
        ? `${Math.round(ms)} ms`
        : ms >= 1
          ? `${ms.toFixed(1)} ms`
          : `${ms.toFixed(2)} ms`;

  const parts: string[] = [];
  let y = 58;
  for (const panel of panels) {
    const top = y;
    parts.push(
      `<text x="${labelWidth}" y="${y}" font-weight="bold" font-size="13">${esc(panel.title)}</text>`,
    );
    y += 12;
    const plotTop = y;
    const plotBottom = y + panel.rows.length * rowH;
    for (let d = 0; d <= decades; d++) {
      const ms = minMs * 10 ** d;
      const gx = x(ms);
      parts.push(`<line x1="${gx}" y1="${plotTop}" x2="${gx}" y2="${plotBottom}" stroke="#ddd"/>`);
      parts.push(
        `<text x="${gx}" y="${plotBottom + 14}" font-size="10" text-anchor="middle" fill="#555">${ms >= 1 ? ms : ms.toFixed(1)} ms</text>`,
      );
    }
    const bar = x(1_000);
    parts.push(
      `<line x1="${bar}" y1="${plotTop}" x2="${bar}" y2="${plotBottom}" stroke="#e15759" stroke-dasharray="4 3"/>`,
    );
    for (const row of panel.rows) {
      parts.push(
        `<text x="${labelWidth - 8}" y="${y + rowH / 2 + 3}" font-size="11" text-anchor="end"${row.ours ? ' font-weight="bold"' : ''}>${esc(row.label)}</text>`,
      );
      SERIES.forEach((series, i) => {
        const value = row[series.key];
        const by = y + 4 + i * barH;
        const w = Number.isFinite(value) ? Math.max(1, x(value) - labelWidth) : 0;
        parts.push(
          `<rect x="${labelWidth}" y="${by}" width="${w.toFixed(1)}" height="${barH - 1}" fill="${series.color}"><title>${esc(`${row.label} ${series.name}: ${fmt(value)}`)}</title></rect>`,
        );
        if (series.key === 'max') {
          parts.push(
            `<text x="${labelWidth + w + 4}" y="${by + barH - 1}" font-size="9" fill="#333">${fmt(value)}</text>`,
          );
        }
      });
      y += rowH;
    }
    y = plotBottom + 34;
    void top;
  }
  const height = y;
  const legend = SERIES.map(
    (s, i) =>
      `<rect x="${labelWidth + i * 70}" y="36" width="10" height="10" fill="${s.color}"/><text x="${labelWidth + i * 70 + 14}" y="45" font-size="11">${s.name}</text>`,
  ).join('');
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="10" y="18" font-size="15" font-weight="bold">${esc(title)}</text>`,
    `<text x="10" y="32" font-size="11" fill="#555">${esc(subtitle)}</text>`,
    legend,
    `<text x="${labelWidth + 230}" y="45" font-size="11" fill="#e15759">- - 1 s</text>`,
    ...parts,
    '</svg>',
    '',
  ].join('\n');
}
