// The HTML report: its structure (no browser), and a render in headless Chromium through
// scripts/check-report.ts when /usr/bin/chromium exists.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, describe, expect, it } from 'vitest';
import { writeReport } from '../../pipelines/analysis/report.ts';
import { checkReport, CHROMIUM } from '../../scripts/check-report.ts';
import { writeSurfaceCatalog } from '../support/fixtures.ts';
import { ROOT } from '../../pipelines/core/paths.ts';
import { currentSettings } from '../support/workspace.ts';

const root = mkdtempSync(join(tmpdir(), 'wwref-report-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
// the reference folder, and beside it (never inside: only wwref writes there) the page
const dir = join(root, 'references');
const widths = { alpha_d4: 4, beta_d6: 6, gamma_d4: 4, delta_d6: 6 };
// Effects of both signs (C reverses with A), a main effect per option and a condition-specific offset.
// Condition n of the list: retrieval when n is even, clustering when odd, offset by 0.02n.
writeSurfaceCatalog(
  dir,
  Object.entries(widths).map(([condition, dimensions], n) => ({
    condition,
    dimensions,
    family: n % 2 ? 'clustering' : 'retrieval',
    metric: 'm',
    utility: (z: number[]) => {
      const [a, b, c, d, e = 0, f = 0] = z as [number, number, number, number, number?, number?];
      return 0.3 + 0.02 * n + 0.15 * a + 0.08 * b - 0.05 * c + 0.12 * a * c + 0.03 * d - 0.02 * e + 0.06 * f * b;
    },
  })),
  { gitCommit: 'abcdef0123456789' },
);
const html = join(root, 'report.html');
const summary = writeReport(currentSettings({ references: dir }), html, []);
const text = readFileSync(html, 'utf8');

describe('HTML report structure (no browser)', () => {
  it('has one section per condition, each with its surface and its heat map', () => {
    expect(summary.conditions).toBe(4);
    const sections = text.split('<section class="condition"').slice(1);
    expect(sections).toHaveLength(4);
    for (const id of Object.keys(widths)) {
      const body = sections.find((s) => s.includes(`data-condition="${id}"`));
      expect(body, `section of ${id}`).toBeDefined();
      expect(body).toContain('<svg class="surface"');
      expect(body).toContain('<svg class="heatmap"');
      expect(text).toContain(`<a href="#condition-${id}">`);
    }
  });

  it('draws one bar per mask and one heat-map cell per conditional effect', () => {
    const section = (id: string) => text.split('<section class="condition"').find((s) => s.includes(`data-condition="${id}"`))!;
    const count = (s: string, re: RegExp) => (s.match(re) ?? []).length;
    expect(count(section('alpha_d4'), /<title>\d{4}: utility /g)).toBe(16);
    expect(count(section('beta_d6'), /<title>\d{6}: utility /g)).toBe(64);
    expect(count(section('alpha_d4'), /class="cell"/g)).toBe(32);
    expect(count(section('beta_d6'), /class="cell"/g)).toBe(192);
    // Δ_C(0000 → 0010) = −0.05 on alpha; the best six-option mask is 111101 (A, B, C with A, D, F with B; not E).
    expect(section('alpha_d4')).toMatch(/<title>Δ_C\(0000 → 0010\) = -0\.0(49999|50000)\d*<\/title>/);
    expect(section('beta_d6')).toContain('best mask <code>111101</code>');
  });

  it('shows the catalog summary', () => {
    expect(text).toMatch(/<th>conditional effects<\/th><td>448<\/td>/); // 2·32 + 2·192
    expect(text).toMatch(/<th>pair interactions<\/th><td>42<\/td>/); // 2·6 + 2·15
    expect(text).toContain('code abcdef012345');
  });

  it('is self-contained: no script, no external stylesheet, image or link', () => {
    expect(text).not.toMatch(/<script|<link|<img|<iframe|@import|url\(/i);
    expect(text).not.toMatch(/(src|href)="(https?:)?\/\//i);
    const hrefs = [...text.matchAll(/href="([^"]*)"/g)].map((m) => m[1]!);
    expect(hrefs.every((h) => h.startsWith('#'))).toBe(true);
  });
});

const hasChromium = existsSync(CHROMIUM);
const browserTitle = hasChromium
  ? 'renders in headless Chromium: screenshot and every condition section in the DOM'
  : `SKIPPED: ${CHROMIUM} not found (apt-get install -y chromium) — headless render check not run`;

describe('HTML report in headless Chromium', () => {
  it.skipIf(!hasChromium)(browserTitle, async () => {
    const result = await checkReport({ html, png: join(root, 'report.png'), conditions: Object.keys(widths) });
    expect(result.problems).toEqual([]);
    expect(result.ok).toBe(true);
    expect(result.sections.sort()).toEqual(Object.keys(widths).sort());
    expect(result.png.width).toBe(1400);
    expect(result.png.colours).toBeGreaterThan(50);
  });

  it.skipIf(!hasChromium)('the check fails when a condition section is missing or the page is blank', async () => {
    const missing = await checkReport({ html, png: join(root, 'missing.png'), conditions: [...Object.keys(widths), 'epsilon_d4'] });
    expect(missing.ok).toBe(false);
    expect(missing.problems).toContain("condition section 'epsilon_d4' is missing from the rendered DOM");
    const blank = join(root, 'blank.html');
    writeFileSync(blank, '<!DOCTYPE html><html><body></body></html>');
    const empty = await checkReport({ html: blank, png: join(root, 'blank.png'), conditions: ['alpha_d4'] });
    expect(empty.ok).toBe(false);
    expect(empty.problems.join('\n')).toMatch(/distinct colours|coloured|bytes/);
  });

  it.skipIf(!hasChromium)('runs as a script (exit 0) on a report written by the CLI', async () => {
    const cwd = ROOT;
    const out = `${dir}-cli-report.html`; // outputs may not go inside a reference folder
    await execa('node', ['bin/wwref.mjs', 'report', '--references', dir, '--out', out], { cwd });
    const { stdout, exitCode } = await execa('npx', ['tsx', 'scripts/check-report.ts', out], {
      cwd,
      env: { WWREF_REFERENCES_DIR: dir },
      reject: false,
    });
    expect(stdout).toContain('4 condition section(s) in the DOM, 4 expected');
    expect(exitCode).toBe(0);
  });
});
