// `wwref report`: one self-contained HTML page (inline CSS and SVG, no script, no external resource)
// with the catalog summary and, per condition, the response surface (utility per mask, in mask order)
// and the heat map of conditional effects (options × backgrounds). Deterministic: no timestamps.
// The page names its conditions in <meta name="wwref-conditions"> (what scripts/check-report.ts
// expects to find rendered). With a figure folder, the same figures are also written as SVG and PNG
// files by matplotlib (figures.ts).
import { diffReferencesWithSides } from './diff.ts';
import { diffSection, surfacesOf } from './diff-html.ts';
import { UserError } from '../core/errors.ts';
import { ABSOLUTE_FLOOR, analyzeReferences, REVERSAL_FLOORS, summarize, type CatalogSummary, type ConditionAnalysis } from './effects.ts';
import { writeFileAtomic } from '../core/fsutil.ts';
import { maskIndex, maskString } from '../catalog/masks.ts';
import { checkOutputPath } from '../core/containment.ts';
import type { Settings } from '../core/settings.ts';
import { writeFigures } from './figures.ts';
import { ReferenceStore } from '../references/store.ts';

const esc = (s: string | number): string =>
  String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
const num = (x: number, digits = 4): string =>
  x === 0 ? '0' : Math.abs(x) < 1e-3 || Math.abs(x) >= 1e4 ? x.toExponential(2) : x.toFixed(digits);

// ---------------------------------------------------------------------------------------------
// Colour scales

type RGB = [number, number, number];
const mix = (a: RGB, b: RGB, t: number): RGB => [0, 1, 2].map((k) => Math.round(a[k]! + (b[k]! - a[k]!) * t)) as RGB;
const css = ([r, g, b]: RGB): string => `rgb(${r},${g},${b})`;

/** Sequential (dark blue → teal → yellow), t in [0, 1]. */
const SEQUENTIAL: RGB[] = [
  [48, 18, 99],
  [38, 110, 142],
  [53, 183, 121],
  [253, 231, 37],
];
function sequential(t: number): string {
  const x = Math.min(1, Math.max(0, t)) * (SEQUENTIAL.length - 1);
  const k = Math.min(SEQUENTIAL.length - 2, Math.floor(x));
  return css(mix(SEQUENTIAL[k]!, SEQUENTIAL[k + 1]!, x - k));
}

/** Diverging blue (negative) – white (0) – red (positive), t in [−1, 1]. */
function diverging(t: number): string {
  const x = Math.min(1, Math.max(-1, t));
  return css(x < 0 ? mix([255, 255, 255], [33, 102, 172], -x) : mix([255, 255, 255], [178, 24, 43], x));
}

// ---------------------------------------------------------------------------------------------
// Per-condition figures

function surfaceSvg(a: ConditionAnalysis): string {
  const { utilities } = a.surface;
  const d = a.dimensions;
  const n = utilities.length;
  const barW = d <= 4 ? 26 : 12;
  const left = 58;
  const top = 10;
  const plotH = 130;
  const labelH = d * 9 + 8;
  const width = left + n * barW + 10;
  const height = top + plotH + labelH;
  const range = a.response_range;
  // The axis spans [min, max] with a small margin below, so even the worst mask has a visible bar.
  const lo = a.min_utility - (range > 0 ? 0.08 * range : 0.5);
  const span = a.max_utility - lo;
  const y = (u: number) => top + plotH - ((u - lo) / span) * plotH;
  const parts: string[] = [];
  parts.push(`<line x1="${left}" y1="${top}" x2="${left}" y2="${top + plotH}" class="axis"/>`);
  for (const u of [a.max_utility, a.min_utility]) {
    parts.push(`<line x1="${left - 4}" y1="${y(u)}" x2="${left + n * barW}" y2="${y(u)}" class="grid"/>`);
    parts.push(`<text x="${left - 6}" y="${y(u) + 3}" class="tick" text-anchor="end">${esc(num(u))}</text>`);
  }
  const best = maskIndex(a.best_mask, d);
  utilities.forEach((u, k) => {
    const x = left + k * barW;
    const t = range > 0 ? (u - a.min_utility) / range : 1;
    const mask = maskString(k, d);
    parts.push(
      `<rect x="${x + 1}" y="${y(u)}" width="${barW - 2}" height="${top + plotH - y(u)}" ` +
        `fill="${sequential(t)}"${k === best ? ' class="best"' : ''}>` +
        `<title>${mask}: utility ${u}${k === best ? ' (best)' : ''}</title></rect>`,
    );
    // Mask labels written vertically, one character per line, so that option A is on top.
    const chars = [...mask].map((c, row) => `<tspan x="${x + barW / 2}" dy="${row === 0 ? 0 : 9}">${c}</tspan>`).join('');
    parts.push(`<text y="${top + plotH + 11}" class="mask${k === best ? ' best-label' : ''}" text-anchor="middle">${chars}</text>`);
  });
  return (
    `<svg class="surface" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" ` +
    `aria-label="utility per mask of ${esc(a.condition)}">${parts.join('')}</svg>`
  );
}

function heatmapSvg(a: ConditionAnalysis): string {
  const d = a.dimensions;
  const cols = 2 ** (d - 1);
  const cell = d <= 4 ? 30 : 16;
  const left = 24;
  const top = 6;
  const legendH = 34;
  const width = Math.max(left + cols * cell + 10, 230);
  const height = top + d * cell + legendH;
  const scale = Math.max(...a.effects.map((e) => Math.abs(e.effect)), 1e-300);
  const parts: string[] = [];
  // Effects come option by option with backgrounds ascending, so row i holds effects[i*cols .. ).
  for (let i = 0; i < d; i++) {
    const rowY = top + i * cell;
    const letter = a.effects[i * cols]!.option;
    parts.push(`<text x="${left - 6}" y="${rowY + cell / 2 + 4}" class="opt" text-anchor="end">${letter}</text>`);
    for (let j = 0; j < cols; j++) {
      const e = a.effects[i * cols + j]!;
      parts.push(
        `<rect x="${left + j * cell}" y="${rowY}" width="${cell}" height="${cell}" fill="${diverging(e.effect / scale)}" class="cell">` +
          `<title>Δ_${e.option}(${e.background} → ${e.mask}) = ${e.effect}</title></rect>`,
      );
    }
  }
  // Legend: a gradient from −max|Δ| to +max|Δ|.
  const ly = top + d * cell + 10;
  const steps = 40;
  const lw = 200;
  for (let s = 0; s < steps; s++) {
    parts.push(
      `<rect x="${left + (s * lw) / steps}" y="${ly}" width="${lw / steps + 0.5}" height="8" fill="${diverging((2 * s) / (steps - 1) - 1)}"/>`,
    );
  }
  parts.push(`<text x="${left}" y="${ly + 20}" class="tick">${esc(num(-scale))}</text>`);
  parts.push(`<text x="${left + lw / 2}" y="${ly + 20}" class="tick" text-anchor="middle">0</text>`);
  parts.push(`<text x="${left + lw}" y="${ly + 20}" class="tick" text-anchor="end">${esc(num(scale))}</text>`);
  return (
    `<svg class="heatmap" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" ` +
    `aria-label="conditional effects of ${esc(a.condition)}">${parts.join('')}</svg>`
  );
}

function reversalBadges(a: ConditionAnalysis): string {
  return REVERSAL_FLOORS.map((f) => {
    const options = a.reversals[f.key]!.options;
    return (
      `<span class="badge ${options.length ? 'yes' : 'no'}" title="floor ${esc(a.reversals[f.key]!.floor)}">` +
      `${esc(f.label)}: ${options.length ? esc(options.join('')) : '—'}</span>`
    );
  }).join(' ');
}

function conditionSection(a: ConditionAnalysis): string {
  // Interactions below the absolute floor are rounding noise of additive surfaces: shown as 0.
  const pairs = a.pairs.map((p) => `${p.pair} ${Math.abs(p.interaction) <= ABSOLUTE_FLOOR ? '0' : num(p.interaction)}`).join(' · ');
  return (
    `<section class="condition" id="condition-${esc(a.condition)}" data-condition="${esc(a.condition)}">
<h2>${esc(a.condition)} <span class="meta">${esc(a.family)} · ${a.dimensions} options · source ${esc(a.source)}</span></h2>
<p class="facts">range ${num(a.response_range)} (${num(a.min_utility)} … ${num(a.max_utility)}) · A<sub>t</sub> ${num(a.mean_abs_effect)} · ` +
    `best mask <code>${esc(a.best_mask)}</code> (${num(a.best_utility)}) · ${a.equivalence_class_count} equivalence class(es)</p>
<p class="facts">sign reversals (options): ${reversalBadges(a)}</p>
<div class="figures">
<figure><figcaption>Response surface: utility per mask, axis from min to max ` +
    `(ascending mask order, option A on top of each label; outlined bar = best mask)</figcaption>${surfaceSvg(a)}</figure>
<figure><figcaption>Conditional effects Δ<sub>i</sub>(z): rows = options, columns = backgrounds z (z<sub>i</sub> = 0) ` +
    `in ascending order</figcaption>${heatmapSvg(a)}</figure>
</div>
<p class="pairs">mean pair interactions J: ${esc(pairs)}</p>
</section>`
  );
}

// ---------------------------------------------------------------------------------------------
// Page

function summarySection(summary: CatalogSummary, analyses: readonly ConditionAnalysis[]): string {
  const counts: [string, number][] = [
    ['conditions', summary.conditions],
    ['four-option conditions', summary.four_option_conditions],
    ['six-option conditions', summary.six_option_conditions],
    ['masks', summary.masks],
    ['conditional effects', summary.conditional_effects],
    ['pair interactions', summary.pair_interactions],
    ['equivalence classes', summary.equivalence_classes],
  ];
  const reversals = Object.values(summary.reversals)
    .map(
      (r) =>
        `<tr><td>${esc(r.floor)}</td><td>${r.conditions}/${summary.conditions}</td>` +
        `<td>${r.four_option}/${summary.four_option_conditions}</td><td>${r.six_option}/${summary.six_option_conditions}</td></tr>`,
    )
    .join('');
  const index = analyses
    .map(
      (a) =>
        `<tr><td><a href="#condition-${esc(a.condition)}">${esc(a.condition)}</a></td><td>${esc(a.family)}</td><td>${a.dimensions}</td>` +
        `<td>${num(a.response_range)}</td><td>${num(a.mean_abs_effect)}</td><td><code>${esc(a.best_mask)}</code></td>` +
        REVERSAL_FLOORS.map((f) => `<td>${a.reversals[f.key]!.options.length ? '✓' : ''}</td>`).join('') +
        '</tr>',
    )
    .join('');
  return (
    `<section class="summary" id="summary">
<h2>Catalog summary</h2>
<div class="figures">
<table><tbody>${counts.map(([k, v]) => `<tr><th>${k}</th><td>${v.toLocaleString('en-US')}</td></tr>`).join('')}</tbody></table>
<table><thead><tr><th>reversal floor</th><th>conditions</th><th>four-option</th><th>six-option</th></tr></thead><tbody>${reversals}</tbody></table>
</div>
<table class="index"><thead><tr><th>condition</th><th>family</th><th>d</th><th>range</th><th>A<sub>t</sub></th><th>best</th>` +
    `${REVERSAL_FLOORS.map((f) => `<th>rev. ${esc(f.label)}</th>`).join('')}</tr></thead><tbody>${index}</tbody></table>
</section>`
  );
}

const STYLE =
  `
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d232b;background:#f6f7f9;margin:0;padding:20px 28px;max-width:1500px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:0 0 4px}
.lead{color:#555;margin:0 0 16px}
section{background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:12px 16px;margin:0 0 14px}
.meta{font-weight:normal;color:#667;font-size:13px}
.facts,.pairs{margin:2px 0;color:#333;font-size:13px}.pairs{color:#666;font-size:12px}
.figures{display:flex;flex-wrap:wrap;gap:18px 36px;align-items:flex-start;margin-top:8px}
figure{margin:0}figcaption{font-size:12px;color:#555;margin-bottom:4px;max-width:560px}
table{border-collapse:collapse;font-size:13px}th,td{padding:2px 10px;border-bottom:1px solid #eceef1;text-align:left}
table.index{margin-top:12px}
code{font:12px ui-monospace,Menlo,Consolas,monospace}
.badge{display:inline-block;padding:0 6px;border-radius:3px;font-size:12px}` +
  `.badge.yes{background:#fde2e1;color:#8a1c1c}.badge.no{background:#e8f3ea;color:#2a5d34}
svg text{font-family:ui-monospace,Menlo,Consolas,monospace}
.tick{font-size:10px;fill:#444}.mask{font-size:9px;fill:#555}.best-label{fill:#c2410c;font-weight:bold}
.opt{font-size:12px;font-weight:bold;fill:#333}
.axis{stroke:#888}.grid{stroke:#ccc;stroke-dasharray:2 2}
rect.best{stroke:#c2410c;stroke-width:2}rect.cell{stroke:#fff;stroke-width:0.5}
`;

export interface ReportContext {
  title?: string;
  /** A line under the title, e.g. where the tables came from. */
  provenance?: string;
  /** Further sections after the conditions (e.g. the diff against other references), as HTML. */
  sections?: readonly string[];
}

export function renderReport(analyses: readonly ConditionAnalysis[], context: ReportContext = {}): string {
  const summary = summarize(analyses);
  const title = context.title ?? 'WhatWorkedBench native references: response surfaces and conditional effects';
  return (
    `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="wwref-conditions" content="${esc(analyses.map((a) => a.condition).join(' '))}">
<title>${esc(title)}</title>
<style>${STYLE}</style>
</head>
<body>
<h1>${esc(title)}</h1>
<p class="lead">${esc(context.provenance ?? '')} Δ<sub>i</sub>(z) = u(z + e<sub>i</sub>) − u(z); A<sub>t</sub> = mean |Δ|; ` +
    `a sign reversal is an option with an effect above +floor on one background and below −floor on another ` +
    `(relative floors are fractions of the condition's response range). Hover a bar or cell for its exact value.</p>
${summarySection(summary, analyses)}
${analyses.map(conditionSection).join('\n')}
${(context.sections ?? []).join('\n')}
</body>
</html>
`
  );
}

/** `wwref report`: analyse the selected reference tables and write the page; returns the summary. */
export function writeReport(settings: Settings, out: string, conditions: readonly string[] = []): CatalogSummary {
  return writeReportFiles(settings, { out, conditions }).summary;
}

export interface ReportFiles {
  /** The HTML page (optional when figures are asked for). */
  out?: string;
  /** Folder of the figure files: <condition>.surface.svg/.png and <condition>.effects.svg/.png. */
  figures?: string;
  conditions?: readonly string[];
  dir?: string;
  /** Other references (a folder or a pack): the page gets a "diff" section comparing these with them. */
  diffWith?: string;
}

/** The page and/or the figure files of the selected conditions, from one analysis. */
export function writeReportFiles(settings: Settings, options: ReportFiles): { summary: CatalogSummary; figures: string[] } {
  const dir = options.dir ?? settings.paths.references;
  if (!options.out && !options.figures)
    throw new UserError('wwref report needs --out FILE (the HTML page), --figures DIR (SVG and PNG files), or both');
  if (options.out !== undefined) checkOutputPath(settings.paths, options.out, 'report page', { generated: [dir] });
  if (options.figures !== undefined)
    checkOutputPath(settings.paths, options.figures, 'figures folder', { kind: 'folder', generated: [dir] });
  const analyses = analyzeReferences(settings.paths, options.conditions ?? [], dir);
  if (!analyses.length) throw new UserError(`no reference tables to report in ${dir}`);
  const manifest = new ReferenceStore(dir, settings.paths).manifest();
  const commit = manifest?.code.git_commit;
  const provenance =
    `${analyses.length} reference table(s) from ${manifest?.generator ?? 'wwref'}` +
    `${commit ? `, code ${commit.slice(0, 12)}${manifest?.code.git_dirty ? ' (dirty)' : ''}` : ''}.`;
  const sections: string[] = [];
  if (options.diffWith) {
    const { report, a, b } = diffReferencesWithSides(settings.paths, dir, options.diffWith, options.conditions ?? []);
    sections.push(diffSection(report, surfacesOf(report, a.conditions, b.conditions)));
  }
  if (options.out) writeFileAtomic(options.out, renderReport(analyses, { provenance, sections }));
  const figures = options.figures ? writeFigures(settings, options.figures, analyses) : [];
  return { summary: summarize(analyses), figures };
}
