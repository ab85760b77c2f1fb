// Figures as files: `wwref report --figures DIR --condition wine --condition co2` on the committed
// reference tables (read only) writes each condition's response surface and effect heat map as SVG and
// PNG (matplotlib in the pinned runtime); the files are opened and checked: one per figure and format,
// PNG decoded (size, many colours, not blank), SVG with one bar per mask and the heat map. The same
// references give the same bytes. The HTML report names its conditions for scripts/check-report.ts,
// which therefore checks a report of any number of conditions.
import { existsSync, linkSync, lstatSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { colourStats, decodePng, reportConditions } from '../../scripts/check-report.ts';
import { cliInProcess } from '../support/cli.ts';
import { useTempWorkspace, type Workspace } from '../support/workspace.ts';

const REFERENCES = join(ROOT, 'outputs', 'references');
const CONDITIONS = ['wine', 'co2'];
let ws: Workspace;
let figures: string;
let stdout: string;

beforeAll(async () => {
  ws = useTempWorkspace();
  figures = join(ws.root, 'figures');
  const outcome = await cliInProcess(
    ['report', '--figures', figures, '--references', REFERENCES, ...CONDITIONS.flatMap((c) => ['--condition', c])],
    ws.root,
  );
  expect(outcome.stderr).toBe('');
  expect(outcome.code).toBe(0);
  stdout = outcome.stdout;
});
afterAll(() => ws.dispose());

describe('wwref report --figures', () => {
  it('writes one SVG and one PNG per figure: a surface and a heat map per condition, nothing else', () => {
    const expected = CONDITIONS.flatMap((c) => ['surface', 'effects'].flatMap((k) => [`${c}.${k}.png`, `${c}.${k}.svg`]));
    expect(readdirSync(figures).sort()).toEqual(expected.sort());
    expect(stdout).toContain(`8 figure file(s) of 2 condition(s) written to ${figures}`);
  });

  it('PNG files are real images of a sensible size, with colour', () => {
    for (const name of readdirSync(figures).filter((f) => f.endsWith('.png'))) {
      const bytes = readFileSync(join(figures, name));
      expect(bytes.length, name).toBeGreaterThan(10_000);
      const image = decodePng(bytes);
      expect(image.width, name).toBeGreaterThanOrEqual(500);
      expect(image.height, name).toBeGreaterThanOrEqual(250);
      const stats = colourStats(image);
      expect(stats.distinct, `${name}: distinct colours`).toBeGreaterThan(100);
      expect(stats.colouredShare, `${name}: coloured share`).toBeGreaterThan(0.05);
    }
  });

  it('SVG files are standalone drawings: one bar per mask (best mask included) and the heat map', () => {
    for (const condition of CONDITIONS) {
      const surface = readFileSync(join(figures, `${condition}.surface.svg`), 'utf8');
      expect(surface).toMatch(/^<\?xml[^>]*>\s*<!DOCTYPE svg[^>]*>\s*<svg [^>]*width="[\d.]+pt" height="[\d.]+pt"/);
      const bars = [...surface.matchAll(/id="mask-([01]+)"/g)].map((m) => m[1]!);
      expect(bars).toHaveLength(16); // wine and co2: four options
      expect(new Set(bars).size).toBe(16);
      const heat = readFileSync(join(figures, `${condition}.effects.svg`), 'utf8');
      expect(heat).toContain('id="effects"');
      expect(heat).toMatch(/<image [^>]*xlink:href="data:image\/png;base64,/);
    }
  });

  it('the same references give the same bytes (no dates, fixed ids)', async () => {
    const again = join(ws.root, 'again');
    const outcome = await cliInProcess(['report', '--figures', again, '--references', REFERENCES, '--condition', 'wine'], ws.root);
    expect(outcome.code).toBe(0);
    for (const name of readdirSync(again))
      expect(readFileSync(join(again, name)).equals(readFileSync(join(figures, name))), name).toBe(true);
  });

  it('a figure replaces what stands at its name (a link, a hard link), never writing through it', async () => {
    const planted = join(ws.root, 'planted');
    mkdirSync(planted);
    const victims = ['linked.txt', 'hard.txt'].map((name) => {
      const path = join(ws.root, name);
      writeFileSync(path, `keep ${name}\n`);
      return path;
    });
    symlinkSync(victims[0]!, join(planted, 'wine.effects.png'));
    linkSync(victims[1]!, join(planted, 'wine.surface.svg'));
    const outcome = await cliInProcess(['report', '--figures', planted, '--references', REFERENCES, '--condition', 'wine'], ws.root);
    expect(outcome.code, outcome.stderr).toBe(0);
    expect(readFileSync(victims[0]!, 'utf8')).toBe('keep linked.txt\n');
    expect(readFileSync(victims[1]!, 'utf8')).toBe('keep hard.txt\n');
    for (const name of ['wine.effects.png', 'wine.surface.svg']) {
      expect(lstatSync(join(planted, name)).isFile(), name).toBe(true);
      expect(readFileSync(join(planted, name)).equals(readFileSync(join(figures, name))), name).toBe(true);
    }
    expect(readdirSync(planted).filter((f) => f.endsWith('.partial'))).toEqual([]);
  });

  it('the HTML page names its conditions, so check-report expects exactly those (any number)', async () => {
    const html = join(ws.root, 'two.html');
    const outcome = await cliInProcess(
      ['report', '--out', html, '--references', REFERENCES, '--condition', 'wine', '--condition', 'co2'],
      ws.root,
    );
    expect(outcome.code).toBe(0);
    expect(reportConditions(readFileSync(html, 'utf8'))).toEqual(['wine', 'co2']);
    expect(reportConditions('<html></html>')).toBeUndefined();
  });

  it('needs --out, --figures or both (exit 2, one line)', async () => {
    mkdirSync(join(ws.root, 'none'), { recursive: true });
    const outcome = await cliInProcess(['report', '--references', REFERENCES, '--condition', 'wine'], join(ws.root, 'none'));
    expect(outcome.code).toBe(2);
    expect(outcome.stderr).toBe('wwref: wwref report needs --out FILE (the HTML page), --figures DIR (SVG and PNG files), or both\n');
    expect(existsSync(join(ws.root, 'none', 'figures'))).toBe(false);
  });
});
