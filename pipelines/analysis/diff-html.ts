// The "diff" section of an HTML page for `wwref diff A B --html FILE`: the per-condition table of
// what changed, and for the conditions that changed most the two response surfaces side by side on
// one axis (changed masks marked). Self-contained: inline SVG and CSS, no script. Kept apart from
// report.ts so the references report and the diff can evolve separately; `diffSection` is the piece a
// report page can embed.
import { maskIndex, maskString } from '../catalog/masks.ts';
import { conditionChanged, type ConditionDiff, type DiffReport } from './diff.ts';
import { REVERSAL_FLOORS } from './effects.ts';

const esc = (s: string | number): string =>
  String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
const fmt = (x: number | null): string => (x === null ? '–' : x === 0 ? '0' : Math.abs(x) < 1e-3 ? x.toExponential(1) : x.toFixed(3));

/** Bars of A (grey) and B (blue) per mask on one axis; masks whose hash or utility changed are marked. */
function pairedSurfaceSvg(d: ConditionDiff, a: readonly number[], b: readonly number[]): string {
  const n = a.length;
  const barW = d.dimensions <= 4 ? 28 : 12;
  const left = 56;
  const top = 8;
  const plotH = 120;
  const width = left + n * barW + 8;
  const height = top + plotH + 18;
  const all = [...a, ...b];
  const min = Math.min(...all);
  const max = Math.max(...all);
  const lo = min - (max > min ? 0.08 * (max - min) : 0.5);
  const y = (u: number) => top + plotH - ((u - lo) / (max - lo)) * plotH;
  const changed = new Set([...d.hash_changed, ...d.utility_changed.map((u) => u.mask)]);
  const parts = [
    `<text x="${left - 6}" y="${y(max) + 3}" class="tick" text-anchor="end">${esc(fmt(max))}</text>`,
    `<text x="${left - 6}" y="${y(min) + 3}" class="tick" text-anchor="end">${esc(fmt(min))}</text>`,
  ];
  for (let k = 0; k < n; k++) {
    const x = left + k * barW;
    const mask = maskString(k, d.dimensions);
    const half = (barW - 2) / 2;
    parts.push(
      `<rect x="${x + 1}" y="${y(a[k]!)}" width="${half}" height="${top + plotH - y(a[k]!)}" class="a"><title>${mask} A: ${a[k]}</title></rect>`,
    );
    parts.push(
      `<rect x="${x + 1 + half}" y="${y(b[k]!)}" width="${half}" height="${top + plotH - y(b[k]!)}" class="b">` +
        `<title>${mask} B: ${b[k]}</title></rect>`,
    );
    if (changed.has(mask))
      parts.push(`<circle cx="${x + barW / 2}" cy="${top + plotH + 8}" r="2.5" class="mark"><title>${mask} changed</title></circle>`);
  }
  return (
    `<svg width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" ` +
    `aria-label="surfaces A and B of ${esc(d.condition)}">${parts.join('')}</svg>`
  );
}

/** How much a condition changed, for ordering: its effect MAE relative to A's range, then its max relative delta. */
function magnitude(d: ConditionDiff): number {
  const s = d.surface;
  return (s && s.a_range > 0 ? s.effect_mae / s.a_range : 0) + (d.max_rel_delta ?? 0) + d.status_changed.length;
}

/**
 * The section: totals, one table row per changed condition, and the paired surfaces of the `top`
 * conditions that changed most. `surfaces` gives each condition's utilities in mask order (A, B).
 */
export function diffSection(report: DiffReport, surfaces: ReadonlyMap<string, { a: number[]; b: number[] }>, top = 6): string {
  const t = report.totals;
  const changed = report.conditions.filter(conditionChanged);
  const rows = changed
    .map((d) => {
      const s = d.surface;
      const rev = s
        ? REVERSAL_FLOORS.map((f) =>
            s.reversals[f.key]!.changed ? `${s.reversals[f.key]!.a.join('') || '∅'}→${s.reversals[f.key]!.b.join('') || '∅'}` : '=',
          ).join(' / ')
        : '–';
      return (
        `<tr><td>${esc(d.condition)}</td><td>${d.hash_changed.length}/${d.masks}</td>` +
        `<td>${d.utility_changed.length}</td><td>${d.status_changed.length}</td>` +
        `<td>${fmt(d.max_rel_delta)}</td><td>${s ? (s.best_mask.changed ? `${s.best_mask.a}→${s.best_mask.b}` : '=') : '–'}</td>` +
        `<td>${esc(rev)}</td><td>${s ? fmt(s.effect_mae) : '–'}</td>` +
        `<td>${s ? fmt(s.effect_recovery) : '–'}</td>` +
        `<td>${s ? (s.classes.changed ? `${s.classes.a.length}→${s.classes.b.length}` : '=') : '–'}</td></tr>`
      );
    })
    .join('\n');
  const figures = [...changed]
    .filter((d) => surfaces.has(d.condition))
    .sort((x, y) => magnitude(y) - magnitude(x))
    .slice(0, top)
    .map((d) => {
      const { a, b } = surfaces.get(d.condition)!;
      const best = d.surface ? ` best ${d.surface.best_mask.a}${d.surface.best_mask.changed ? ` → ${d.surface.best_mask.b}` : ''}` : '';
      return (
        `<figure><figcaption>${esc(d.condition)}: ${d.hash_changed.length} hashes, ${d.utility_changed.length} utilities changed; ` +
        `max |Δu| ${fmt(d.max_rel_delta)} of the range;${esc(best)}</figcaption>${pairedSurfaceSvg(d, a, b)}</figure>`
      );
    })
    .join('\n');
  return (
    `<section id="diff">
<h2>Diff: ${esc(report.a.path)} (A) → ${esc(report.b.path)} (B)</h2>
<p>${t.conditions_changed} of ${t.conditions} conditions changed; ` +
    `${t.hash_changed} of ${t.records} prediction hashes, ${t.utility_changed} utilities and ${t.status_changed} statuses changed; ` +
    `mean effect MAE ${fmt(t.mean_effect_mae)}, mean recovery R ${fmt(t.mean_effect_recovery)} (min ${fmt(t.min_effect_recovery)}). ` +
    `Best mask changed: ${esc(t.best_mask_changed.join(', ') || 'none')}.</p>
<table><thead><tr><th>condition</th><th>hashes</th><th>utilities</th><th>statuses</th><th>max |Δu| / range</th>` +
    `<th>best mask</th><th>reversals ${REVERSAL_FLOORS.map((f) => esc(f.label)).join(' / ')}</th>` +
    `<th>effect MAE</th><th>R</th><th>classes</th></tr></thead>
<tbody>
${rows}
</tbody></table>
<p class="legend"><span class="key a"></span> A <span class="key b"></span> B; a dot under a mask: its hash or utility changed.</p>
${figures}
</section>`
  );
}

const STYLE =
  `body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}table{border-collapse:collapse;margin:12px 0}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right;font-variant-numeric:tabular-nums}td:first-child,th:first-child{text-align:left}
figure{margin:16px 0}figcaption{font-size:13px;margin-bottom:4px}svg text{font-family:ui-monospace,monospace}.tick{font-size:10px;fill:#444}
rect.a{fill:#9ca3af}rect.b{fill:#2563eb}circle.mark{fill:#c2410c}` +
  `.key{display:inline-block;width:12px;height:12px;vertical-align:middle}.key.a{background:#9ca3af}.key.b{background:#2563eb}`;

/** A whole page holding only the diff section. */
export function renderDiffPage(report: DiffReport, surfaces: ReadonlyMap<string, { a: number[]; b: number[] }>): string {
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>wwref diff</title><style>${STYLE}</style></head>
<body>
${diffSection(report, surfaces)}
</body></html>
`;
}

/** Utilities in mask order of each condition both sides have complete (for the paired surfaces). */
export function surfacesOf(
  report: DiffReport,
  a: ReadonlyMap<string, readonly { mask: string; utility: number | null }[]>,
  b: typeof a,
): Map<string, { a: number[]; b: number[] }> {
  const out = new Map<string, { a: number[]; b: number[] }>();
  for (const d of report.conditions) {
    const n = 2 ** d.dimensions;
    const fill = (records: readonly { mask: string; utility: number | null }[] | undefined) => {
      const u = new Array<number>(n).fill(Number.NaN);
      for (const r of records ?? []) if (r.utility !== null) u[maskIndex(r.mask, d.dimensions)] = r.utility;
      return u;
    };
    const ua = fill(a.get(d.condition));
    const ub = fill(b.get(d.condition));
    if (ua.every(Number.isFinite) && ub.every(Number.isFinite)) out.set(d.condition, { a: ua, b: ub });
  }
  return out;
}
