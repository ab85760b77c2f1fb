// The comparison as one HTML page (report.html beside compare.json): the methods with their colours and
// where they were read, the family-macro tables per track (recovery and paired differences, 3
// significant digits with intervals), the ranking, the figure, every condition's drill-down (each
// method's mean recovery at each budget), the cells left out and the command that made it. Every
// number in a table carries its full value in `data-value` (what the browser test compares with
// compare.json). A small script only records, in the page's own DOM, whether each figure loaded and
// any script error (read back by the browser test); nothing is fetched from elsewhere.
import type { Comparison } from './statistics.ts';
import { printable, significant, TRACK_TITLES } from './tables.ts';

/** Text as the page shows it: HTML-escaped, a character it cannot show as itself (a bidi override, U+2060…) as '?'. */
const esc = (s: string | number): string =>
  printable(String(s)).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

const STYLE = `body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.6em 0 1.4em}th,td{padding:.25em .6em;border-bottom:1px solid #ddd;text-align:right}
th:first-child,td:first-child{text-align:left}th{background:#f4f4f4}.swatch{display:inline-block;width:.9em;height:.9em;border-radius:2px;margin-right:.4em;vertical-align:-.1em}
.interval{color:#666;font-size:90%}code,pre{background:#f6f6f6;padding:.1em .3em}pre{padding:.6em;overflow-x:auto;white-space:pre-wrap}
img{max-width:100%}details{margin:.3em 0}summary{cursor:pointer}.note{color:#555}`;

/** A number cell: 3 significant digits shown, the whole value in data-value, the interval beside it. */
function valueCell(value: number, interval: readonly [number, number], signed: boolean, attrs: string): string {
  return `<td ${attrs} data-value="${value}" data-low="${interval[0]}" data-high="${interval[1]}">${esc(significant(value, signed))} <span class="interval">[${esc(significant(interval[0], signed))}, ${esc(significant(interval[1], signed))}]</span></td>`;
}

function swatch(colour: string | undefined): string {
  return colour ? `<span class="swatch" style="background:${esc(colour)}"></span>` : '';
}

function trackSection(comparison: Comparison, track: string, colours: Record<string, string>): string {
  const cells = comparison.cells.filter((c) => c.track === track);
  const order = comparison.ranking.map((r) => r.method);
  const head = `<tr><th>method</th>${cells.map((c) => `<th>B = ${c.budget}</th>`).join('')}</tr>`;
  const recovery = order
    .map(
      (m) =>
        `<tr><td>${swatch(colours[m])}${esc(m)}</td>${cells
          .map((c) =>
            valueCell(
              c.methods[m]!.recovery,
              c.methods[m]!.interval,
              false,
              `data-kind="recovery" data-track="${esc(track)}" data-budget="${c.budget}" data-method="${esc(m)}"`,
            ),
          )
          .join('')}</tr>`,
    )
    .join('\n');
  const differences = cells[0]!.differences
    .map(
      (d, k) =>
        `<tr><td>${esc(d.a)} − ${esc(d.b)}</td>${cells
          .map((c) => {
            const e = c.differences[k]!;
            return valueCell(
              e.difference,
              e.interval,
              true,
              `data-kind="difference" data-track="${esc(track)}" data-budget="${c.budget}" data-a="${esc(e.a)}" data-b="${esc(e.b)}"`,
            );
          })
          .join('')}</tr>`,
    )
    .join('\n');
  const shared = cells
    .map((c) => `B = ${c.budget}: ${c.conditions.length} condition(s), ${c.sources} source(s), ${c.families} family(ies)`)
    .join('; ');
  return `<section class="track" data-track="${esc(track)}">
<h2>${esc(TRACK_TITLES[track] ?? track)}</h2>
<p class="note">Shared cells: ${esc(shared)}.</p>
<h3>Family-macro effect recovery</h3>
<table class="recovery">${head}
${recovery}</table>
<h3>Paired differences (a − b, the same source draws for both)</h3>
<table class="differences">${head.replace('<th>method</th>', '<th>difference</th>')}
${differences}</table>
</section>`;
}

function drillDown(comparison: Comparison): string {
  const names = comparison.methods.map((m) => m.name);
  const byCondition = new Map<string, Comparison['conditions']>();
  for (const row of comparison.conditions) byCondition.set(row.condition, [...(byCondition.get(row.condition) ?? []), row]);
  const sections = [...byCondition].map(([condition, rows]) => {
    const head = `<tr><th>method</th>${rows.map((r) => `<th>B = ${r.budget}</th>`).join('')}</tr>`;
    const body = names
      .map(
        (m) =>
          `<tr><td>${esc(m)}</td>${rows.map((r) => `<td data-kind="condition" data-condition="${esc(condition)}" data-budget="${r.budget}" data-method="${esc(m)}" data-value="${r.recovery[m]}">${esc(significant(r.recovery[m]!))} <span class="interval">(${r.rows[m]})</span></td>`).join('')}</tr>`,
      )
      .join('\n');
    return `<details data-condition="${esc(condition)}"><summary>${esc(condition)} (${esc(rows[0]!.family)}, ${esc(TRACK_TITLES[rows[0]!.track] ?? rows[0]!.track)})</summary>
<table>${head}
${body}</table></details>`;
  });
  return `<section id="conditions"><h2>Per condition</h2>
<p class="note">Each method's mean effect recovery over its runs of the condition at the budget (the number of runs in parentheses).</p>
${sections.join('\n')}</section>`;
}

export interface ReportContext {
  /** The command line that made the comparison. */
  command: string;
  colours: Record<string, string>;
  /** File names of the figure, beside the page. */
  figures: readonly string[];
}

export function renderComparisonReport(comparison: Comparison, context: ReportContext): string {
  const tracks = [...new Set(comparison.cells.map((c) => c.track))];
  const methods = comparison.methods
    .map(
      (m) =>
        `<tr><td>${swatch(context.colours[m.name])}${esc(m.name)}</td><td>${esc(m.kind)}</td><td>${m.rows}</td><td><code>${esc(m.from)}</code></td></tr>`,
    )
    .join('\n');
  const ranking = comparison.ranking
    .map(
      (r) => `<tr><td>${esc(r.method)}</td><td data-value="${r.mean_rank}">${esc(significant(r.mean_rank))}</td><td>${r.cells}</td></tr>`,
    )
    .join('\n');
  const left = comparison.not_shared.length
    ? `<details><summary>${comparison.not_shared.length} cell(s) not shared by every method, left out</summary><table><tr><th>method</th><th>condition</th><th>budget</th><th>runs</th><th>missing from</th></tr>
${comparison.not_shared.map((n) => `<tr><td>${esc(n.method)}</td><td>${esc(n.condition)}</td><td>${n.budget}</td><td>${n.rows}</td><td>${esc(n.missing_from.join(', '))}</td></tr>`).join('\n')}</table></details>`
    : '<p class="note">Every method has every cell of the others.</p>';
  const svg = context.figures.find((f) => f.endsWith('.svg'));
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>wwref: comparing ${esc(comparison.methods.map((m) => m.name).join(', '))}</title>
<style>${STYLE}</style>
</head>
<body data-figures="${context.figures.filter((f) => f.endsWith('.svg')).length}">
<h1>Comparing ${comparison.methods.length} methods</h1>
<p class="note">Family-macro effect recovery (repeats within a source, sources within a family, families equally weighted) on the conditions every method has, with 95 % source-bootstrap percentile intervals (${comparison.bootstrap.resamples} resamples, seed ${comparison.bootstrap.seed}); every method and every difference on the same draws (paired).</p>
<table class="methods"><tr><th>method</th><th>kind</th><th>runs</th><th>read from</th></tr>
${methods}</table>
<p class="note">Runs: a cohort's episodes, a control's records (each seed of the random design one), a published file's records; within a cell a method's runs of one source are averaged first.</p>
${svg ? `<figure><img class="figure" src="${esc(svg)}" alt="family-macro effect recovery against budget, with 95 % intervals"></figure>` : ''}
${tracks.map((t) => trackSection(comparison, t, context.colours)).join('\n')}
<h2>Ranking</h2>
<table class="ranking"><tr><th>method</th><th>mean rank</th><th>cells</th></tr>
${ranking}</table>
${left}
${drillDown(comparison)}
<h2>Made by</h2>
<pre>${esc(context.command)}</pre>
<script>
// records in the DOM whether each figure loaded, and any error (read back by the browser test)
const errors = [];
window.addEventListener('error', (event) => errors.push(String(event.message || event.type + ': ' + ((event.target && event.target.src) || ''))), true);
window.addEventListener('load', () => {
  const images = [...document.querySelectorAll('img.figure')];
  document.body.dataset.figuresLoaded = String(images.filter((i) => i.complete && i.naturalWidth > 0).length);
  document.body.dataset.errors = JSON.stringify(errors);
});
</script>
</body>
</html>
`;
}
