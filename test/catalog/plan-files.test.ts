// Reading construction plan files, through the real command line and the catalog the reference store
// loads: a plan larger than MAX_PLAN_BYTES (a 50 MB one threw a RangeError), one that is not UTF-8 or
// starts with a byte-order mark, one holding a lone surrogate ("\ud800" crashed the plan hash), one
// naming an inherited property as its recipe, and malformed JSON or shape are each refused with one
// wwref line and exit 2, by `add-source --dry-run`, by replay and by the catalog of a reference folder.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_PLAN_BYTES } from '../../pipelines/catalog/catalog.ts';
import { loadCatalog } from '../../pipelines/references/store.ts';
import { UserError } from '../../pipelines/core/errors.ts';
import { cliInProcess } from '../support/cli.ts';
import { tinyCameraPlan, writeSurfaceCatalog } from '../support/fixtures.ts';
import { readReferenceManifest, writeReferenceManifest } from '../support/raw-references.ts';
import { currentSettings, useTempWorkspace, type Workspace } from '../support/workspace.ts';

let ws: Workspace;
beforeAll(() => {
  ws = useTempWorkspace();
});
afterAll(() => ws.dispose());

const good = () => JSON.stringify(tinyCameraPlan('pf_plan'), null, 2);

/** Each bad plan: its bytes and the one line that refuses it. */
const cases: [string, () => string | Buffer, RegExp][] = [
  [
    '50 MB',
    () => good().replace('"plan_version"', `"$comment": "${'x'.repeat(50_000_000)}",\n  "plan_version"`),
    new RegExp(`is larger than ${MAX_PLAN_BYTES} bytes \\(1 MiB\\), the most a plan may have; refused$`),
  ],
  [
    'Latin-1 (not UTF-8) on line 4',
    () => Buffer.from(good().replace(/"title": "[^"]*"/, '"title": "caf\u00e9"'), 'latin1'),
    /is not UTF-8 text \(line 4\); save it as UTF-8$/,
  ],
  ['a byte-order mark', () => `\ufeff${good()}`, /starts with a UTF-8 byte-order mark; save it as UTF-8 without one$/],
  [
    'a lone surrogate in a string',
    () => good().replace(/"title": "[^"]*"/, '"title": "a\\ud800b"'),
    /: title: a \\u escape encodes half a character \(a lone surrogate/,
  ],
  [
    'a lone surrogate in a key',
    () => good().replace('"params": {', '"params": {"\\udc00": 1,'),
    /: preparation\.params\.\udc00: a \\u escape encodes half a character/u,
  ],
  [
    'an inherited name as recipe',
    () => good().replace('"recipe": "skimage_image"', '"recipe": "__proto__"'),
    /: preparation\.recipe: unknown recipe '__proto__' \(known: tabular, /,
  ],
  ['an array', () => '[1, 2]', /: \(plan\): Invalid input: expected object, received array$/],
  ['truncated JSON', () => good().slice(0, 200), /: not JSON \(/],
];

function writePlan(name: string, bytes: string | Buffer): string {
  const file = join(ws.root, `${name.replace(/\W+/g, '_')}.plan.json`);
  writeFileSync(file, bytes);
  return file;
}

/** exit 2 and exactly one line on stderr, the wwref message, no stack. */
function oneLine(outcome: { code: number; stdout: string; stderr: string }, message: RegExp): void {
  expect(outcome.code, outcome.stderr).toBe(2);
  expect(outcome.stderr).toMatch(/^wwref: [^\n]*\n$/);
  expect(outcome.stderr.trimEnd()).toMatch(message);
}

describe('a bad plan file is one line, exit 2', () => {
  it('the good plan the cases start from passes the dry run', async () => {
    const outcome = await cliInProcess(
      ['add-source', writePlan('good', good()), '--dry-run', '--references', join(ws.root, 'refs')],
      ws.root,
    );
    expect(outcome.stderr).toBe('');
    expect(outcome.code).toBe(0);
  });

  for (const [what, bytes, message] of cases) {
    it(`${what}: add-source --dry-run, replay and the catalog of a reference folder refuse it`, async () => {
      const file = writePlan(what, bytes());
      oneLine(await cliInProcess(['add-source', file, '--dry-run', '--references', join(ws.root, 'refs')], ws.root), message);

      // a reference folder whose manifest names the plan (as add-source records it)
      const dir = join(ws.root, `refs_${what.replace(/\W+/g, '_')}`);
      writeSurfaceCatalog(dir, [{ condition: 'pf_plan', dimensions: 4, utility: () => 0.5 }]);
      const manifest = readReferenceManifest(dir)!;
      manifest.conditions.pf_plan!.plan_file = file;
      writeReferenceManifest(manifest, dir);
      oneLine(await cliInProcess(['replay', '--references', dir, '--report', join(ws.root, 'replay.json')], ws.root), message);
      let error: unknown;
      try {
        loadCatalog(currentSettings({ references: dir }));
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(UserError);
      expect((error as Error).message).toMatch(message);
    });
  }

  it('the plan files here are what the cases say (a 50 MB file; Latin-1 bytes)', () => {
    expect(readFileSync(join(ws.root, '50_MB.plan.json')).length).toBeGreaterThan(50_000_000);
    expect(readFileSync(join(ws.root, 'Latin_1_not_UTF_8_on_line_4.plan.json')).includes(0xe9)).toBe(true);
  });
});
