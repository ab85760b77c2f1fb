// `wwref controls`: the published grid against the published summary (read from ../shared/published at
// test time), records that grade --records accepts, an added source, bad input, and an interrupted run
// that resumes.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa, execaSync } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasPublished } from '../../pipelines/catalog/published.ts';
import { ROOT } from '../../pipelines/core/paths.ts';
import { loadSettings } from '../../pipelines/core/settings.ts';
import { loadCatalog } from '../../pipelines/references/store.ts';
import { BIN, cliInProcess } from '../support/cli.ts';

const settings = loadSettings({}, process.env);
const PUBLISHED = settings.paths.published;
const CONTROLS = join(PUBLISHED, 'controls');
const dir = mkdtempSync(join(tmpdir(), 'wwref-controls-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const lines = (file: string) => readFileSync(file, 'utf8').split('\n').filter(Boolean);
const json = (file: string) => JSON.parse(readFileSync(file, 'utf8'));
const wwref = (...args: string[]) => cliInProcess(args, ROOT);

interface Cell {
  condition: string;
  method: string;
  budget: number;
  [field: string]: unknown;
}

describe('the published grid', () => {
  const out = join(dir, 'published');
  let outcome: Awaited<ReturnType<typeof wwref>>;
  beforeAll(async () => {
    outcome = await wwref('controls', 'run', '--grid', 'published', '--out', out, '--workers', '2');
  });

  it('writes one record per (condition, method, seed, budget), the summaries and the figure', () => {
    expect(outcome.code, outcome.stderr).toBe(0);
    const records = lines(join(out, 'records.jsonl')).map((l) => JSON.parse(l));
    const summary = json(join(out, 'summary.json'));
    expect(summary.records).toBe(records.length);
    expect(outcome.stdout).toMatch(new RegExp(`^${records.length} control records`));
    // the spec's grid: (4 plain methods + 20 random seeds) per budget; code-aware methods on paired six-option conditions
    const catalog = loadCatalog(settings);
    let expected = 0;
    for (const c of catalog.conditions.values()) {
      const track = c.dimensions === 4 ? 4 : c.condition.paired_with ? 7 : 5;
      expected += track * (24 + (c.dimensions === 6 && c.condition.paired_with ? 3 : 0));
    }
    expect(records.length).toBe(expected);
    expect(existsSync(join(out, 'records.jsonl.partial'))).toBe(false);
    for (const name of ['summary.csv', 'macro.csv', 'controls-recovery.svg', 'controls-recovery.png'])
      expect(existsSync(join(out, name)), name).toBe(true);
    for (const r of records) expect(r.actual_credits).toBeLessThanOrEqual(r.budget);
  });

  it('every record passes grade --records with 0 differences', async () => {
    const graded = await wwref('grade', '--records', join(out, 'records.jsonl'));
    expect(graded.code, graded.stderr.slice(0, 2000)).toBe(0);
    expect(graded.stderr).toMatch(/stored score\(s\) compared: 0 difference\(s\)/);
  });

  it.skipIf(!hasPublished(PUBLISHED) || !existsSync(join(CONTROLS, 'control_summary.json')))(
    'every cell of a comparable condition equals the published cell (numbers within 1e-9 relative, counts exactly)',
    () => {
      const comparable = new Set(
        [...loadCatalog(settings).conditions.values()].filter((c) => c.plan.plan.published.comparable).map((c) => c.id),
      );
      const published = new Map<string, Cell>(
        (json(join(CONTROLS, 'control_summary.json')) as Cell[]).map((c) => [`${c.condition}/${c.method}/${c.budget}`, c]),
      );
      const cells = json(join(out, 'summary.json')).cells as Cell[];
      expect(cells.length).toBe(published.size);
      let compared = 0;
      const differences: string[] = [];
      for (const cell of cells) {
        const p = published.get(`${cell.condition}/${cell.method}/${cell.budget}`);
        expect(p, `${cell.condition} ${cell.method} ${cell.budget}`).toBeDefined();
        if (!comparable.has(cell.condition)) continue;
        compared++;
        for (const [field, value] of Object.entries(p!)) {
          const ours = cell[field];
          const count = ['records', 'exact_count', 'strict_count'].includes(field);
          const equal =
            typeof value === 'number' && !count && typeof ours === 'number'
              ? Math.abs(ours - value) <= 1e-9 * Math.max(1, Math.abs(value))
              : ours === value;
          if (!equal) differences.push(`${cell.condition} ${cell.method} B=${cell.budget} ${field}: ours ${ours}, published ${value}`);
        }
      }
      expect(differences).toEqual([]);
      // all but the conditions whose inputs differ from the published ones
      expect(compared).toBeGreaterThan(850);
    },
  );

  it.skipIf(!existsSync(join(CONTROLS, 'records_sample.jsonl')))(
    'the published sample records are ours bit for bit: observations in order, trajectories, parameters, prediction tables',
    () => {
      const ours = lines(join(out, 'records.jsonl')).map((l) => JSON.parse(l));
      const samples = lines(join(CONTROLS, 'records_sample.jsonl')).map((l) => JSON.parse(l));
      for (const sample of samples) {
        const width = Object.keys(sample.observations)[0]!.length;
        const mine = ours.find(
          (r) =>
            r.instance === sample.instance &&
            r.method === sample.method &&
            r.budget === sample.budget &&
            Object.keys(r.observations)[0]!.length === width &&
            (r.method !== 'random_degree2' || r.seed === sample.seed),
        );
        expect(mine, `${sample.instance} ${sample.method} ${sample.budget}`).toBeDefined();
        // the published line's own key order (JSON.parse would put integer-like masks such as "111111" first)
        const written = [...lines(join(CONTROLS, 'records_sample.jsonl'))[samples.indexOf(sample)]!.matchAll(/"([01]{4,6})": /g)];
        expect(mine.acquisition_order).toEqual(written.map((m) => m[1]).slice(0, mine.acquisition_order.length));
        expect(Object.entries(mine.observations).sort()).toEqual(Object.entries(sample.observations).sort());
        expect(mine.score.prediction_table).toEqual(sample.score.prediction_table);
        if (sample.trajectory) expect(mine.trajectory).toEqual(sample.trajectory);
        const parameters = sample.final_parameters ?? sample.parameters;
        if (parameters) expect(mine.final_parameters).toEqual(parameters);
        for (const field of ['effect_recovery', 'selected_mask', 'exact_optimal_choice', 'strict_effect_reconstruction'])
          expect(mine.score[field], field).toEqual(sample.score[field]);
      }
    },
  );

  it("a control's purchases, replayed as an episode with its budget, spend its credits and score as its record", async () => {
    const records = lines(join(out, 'records.jsonl')).map((l) => JSON.parse(l));
    const picks = [
      records.find((r) => r.method === 'design_degree2' && r.condition === 'wine' && r.budget === 8),
      records.find((r) => r.method === 'random_degree2' && r.condition === 'co2__d6' && r.budget === 20 && r.seed === 3),
      records.find((r) => r.method === 'gp_code_effect_variance' && r.condition === 'astronaut__d6' && r.budget === 62),
    ];
    for (const record of picks) {
      expect(record).toBeDefined();
      const episode = join(dir, `episode-${record.condition}-${record.method}`);
      const ok = async (...args: string[]) => {
        const r = await wwref('episode', ...args, '--episode', episode);
        expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(0);
        return JSON.parse(r.stdout);
      };
      await ok('start', '--condition', record.condition, '--budget', String(record.budget));
      const bought = record.acquisition_order.slice(2);
      for (const mask of bought) await ok('observe', '--masks', mask);
      const status = await ok('status');
      expect(status.credits_remaining).toBe(record.budget - record.actual_credits);
      const table = join(dir, `table-${record.condition}-${record.method}.json`);
      writeFileSync(table, JSON.stringify(record.score.prediction_table));
      await ok('submit', '--prediction', table);
      const score = await ok('score');
      for (const field of ['effect_mae', 'effect_recovery', 'grid_mae', 'support_regret', 'selected_mask', 'strict_effect_reconstruction'])
        expect(score[field], `${record.method} ${field}`).toBe(record.score[field]);
    }
  });

  it.skipIf(!existsSync(join(CONTROLS, 'records_sample.jsonl')))(
    "controls summary reads the benchmark's own records, which name only the instance: the mask width finds the condition",
    async () => {
      const sample = join(CONTROLS, 'records_sample.jsonl');
      const r = await wwref('controls', 'summary', '--records', sample, '--out', join(dir, 'sample'));
      expect(r.code, r.stderr).toBe(0);
      const cells = json(join(dir, 'sample', 'summary.json')).cells as Cell[];
      for (const record of lines(sample).map((l) => JSON.parse(l))) {
        const width = Object.keys(record.observations)[0]!.length;
        const cell = cells.find((c) => c.method === record.method && c.budget === record.budget && c.condition.startsWith(record.instance));
        expect(cell, record.method).toBeDefined();
        expect(cell!.condition).toBe(width === 6 ? `${record.instance}__d6` : record.instance);
        expect(cell!.recovery_mean).toBe(record.score.effect_recovery);
      }
    },
  );

  it('controls summary refuses a run folder as --out; a record given twice is counted once, and its cell says so', async () => {
    const intoRun = await wwref('controls', 'summary', '--records', join(out, 'records.jsonl'), '--out', out);
    expect(intoRun.code).toBe(2);
    expect(intoRun.stderr).toMatch(/is a controls run's folder, whose summary belongs to its records/);
    const twice = await wwref(
      'controls',
      'summary',
      '--records',
      join(out, 'records.jsonl'),
      join(out, 'records.jsonl'),
      '--out',
      join(dir, 'twice'),
      '--workers',
      '2',
    );
    expect(twice.code, twice.stderr).toBe(0);
    const records = lines(join(out, 'records.jsonl')).length;
    expect(twice.stdout).toContain(`${records} records summarised, each recomputed on the references (${records} second copies left out)`);
    const cells = json(join(dir, 'twice', 'summary.json')).cells as Cell[];
    const own = json(join(out, 'summary.json')).cells as Cell[];
    // the same numbers as the run's, each cell naming the copies it left out
    expect(cells.map(({ left_out: _l, ...c }) => c)).toEqual(own.map(({ left_out: _l, ...c }) => c));
    for (const cell of cells) {
      expect((cell.left_out as unknown[]).length, `${cell.condition} ${cell.method} ${cell.budget}`).toBe(cell.records);
      expect(cell.left_out).toContainEqual({
        record: expect.stringMatching(/records\.jsonl line \d+$/),
        why: expect.stringMatching(/^a second copy of .*records\.jsonl line \d+$/),
      });
    }
  });

  it('controls summary of the records reproduces the run summary', async () => {
    const again = join(dir, 'again');
    const r = await wwref('controls', 'summary', '--records', join(out, 'records.jsonl'), '--out', again);
    expect(r.code, r.stderr).toBe(0);
    expect(json(join(again, 'summary.json')).cells).toEqual(json(join(out, 'summary.json')).cells);
    expect(readFileSync(join(again, 'macro.csv'), 'utf8')).toBe(readFileSync(join(out, 'macro.csv'), 'utf8'));
  });
});

describe('an added source', () => {
  it('gets code-aware controls from the equivalences its plan declares; a plan without says why they are skipped', async () => {
    const out = join(dir, 'examples');
    const examples = join(ROOT, 'outputs', 'examples');
    const r = await wwref(
      'controls',
      'run',
      '--references',
      examples,
      '--condition',
      'diabetes__d6',
      'macrodata_realgdp__d6',
      '--budget',
      '8',
      '62',
      '--seeds',
      '2',
      '--out',
      out,
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/macrodata_realgdp__d6: gp_code_effect_variance, .* skipped: its plan declares no equivalences/);
    const records = lines(join(out, 'records.jsonl')).map((l) => JSON.parse(l));
    const methods = (condition: string) => new Set(records.filter((x) => x.condition === condition).map((x) => x.method));
    expect(methods('diabetes__d6').size).toBe(8);
    expect(methods('macrodata_realgdp__d6').size).toBe(5);
    // diabetes__d6 declares two inactive options: 64 − 28 masks are equivalent to another, so the code-aware design stops early
    const code = records.find((x) => x.method === 'code_canonical_design_degree2' && x.budget === 62);
    expect(code.actual_credits).toBeLessThan(62);
    expect(Object.keys(code.code_inferred_observations)).toHaveLength(64);
    const graded = await wwref('grade', '--references', examples, '--records', join(out, 'records.jsonl'));
    expect(graded.code, graded.stderr.slice(0, 2000)).toBe(0);
  });
});

describe('bad input', () => {
  it('is refused in one line with exit status 2, and nothing is written', async () => {
    const out = join(dir, 'refused');
    const cases: [string[], RegExp][] = [
      [['--condition', 'wine', '--method', 'nope'], /unknown method 'nope' \(methods: design_degree1,/],
      [['--condition', 'wine', '--budget', '15'], /--budget 15 is outside 0 … 14 for wine/],
      [['--condition', 'wine', '--budget', '0x3'], /--budget takes whole numbers written in decimal digits, not '0x3'/],
      [['--condition', 'wine', '--seeds', '0'], /--seeds must be a whole number from 1 to 1000, not 0/],
      [['--condition', 'wine', '--seeds', '1001'], /--seeds must be a whole number from 1 to 1000, not 1001/],
      [['--condition', 'wine', '--seeds', ''], /--seeds takes one whole number written in decimal digits, not ''/],
      [['--condition', 'wine', '--method', 'design_degree2', '--seeds', '3'], /--seeds is for random_degree2, which --method leaves out/],
      [['--condition', 'wine', '--seeds', '-1'], /--seeds takes one whole number written in decimal digits, not '-1'/],
      [['--condition', 'nope'], /unknown condition 'nope'/],
      [['--references', join(ROOT, 'outputs', 'examples'), '--condition', 'wine'], /no references for wine in .*outputs\/examples/],
      [['--grid', 'published', '--budget', '4'], /--grid published fixes the budgets/],
      [['--grid', 'published', '--references', join(ROOT, 'outputs', 'examples')], /no condition|published conditions only/],
    ];
    for (const [args, pattern] of cases) {
      const r = await wwref('controls', 'run', ...args, '--out', out);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr, args.join(' ')).toMatch(pattern);
      expect(r.stderr.trim().split('\n'), args.join(' ')).toHaveLength(1);
      expect(existsSync(out), args.join(' ')).toBe(false);
    }
    for (const inside of [join(ROOT, 'outputs', 'references', 'controls'), join(settings.paths.prepared, 'controls')]) {
      const r = await wwref('controls', 'run', '--condition', 'wine', '--out', inside);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/--out .* is inside .*, which only wwref itself writes/);
      expect(existsSync(inside)).toBe(false);
    }
  });
});

describe('what stands in a run folder', () => {
  it('a FIFO or a device at run.json or records.jsonl.partial is refused, never waited on or read', async () => {
    const args = ['controls', 'run', '--condition', 'wine', '--method', 'design_degree2', '--budget', '4'];
    const fifoRun = join(dir, 'fifo-run');
    mkdirSync(fifoRun);
    execaSync('mkfifo', [join(fifoRun, 'run.json')]);
    const refusedRun = await wwref(...args, '--out', fifoRun);
    expect(refusedRun.code).toBe(2);
    expect(refusedRun.stderr).toMatch(/run\.json .*(not a regular file|FIFO)/);

    const done = join(dir, 'fifo-partial');
    expect((await wwref(...args, '--out', done)).code).toBe(0);
    rmSync(join(done, 'records.jsonl'));
    for (const planted of [
      () => execaSync('mkfifo', [join(done, 'records.jsonl.partial')]),
      () => symlinkSync('/dev/zero', join(done, 'records.jsonl.partial')),
    ]) {
      planted();
      const r = await wwref(...args, '--out', done);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/records\.jsonl\.partial .*(not a regular file|FIFO|link)/);
      rmSync(join(done, 'records.jsonl.partial'));
    }
  });
});

describe('an interrupted run', () => {
  it('keeps the finished tasks, never a complete-looking records file, and the same command resumes to the same records', async () => {
    const args = ['controls', 'run', '--condition', 'wine__d6', 'spambase__d6', 'concrete__d6', '--workers', '1'];
    const whole = join(dir, 'whole');
    expect((await wwref(...args, '--out', whole)).code).toBe(0);

    const out = join(dir, 'interrupted');
    const child = execa('node', [BIN, ...args, '--out', out], { cwd: ROOT, reject: false });
    const partial = join(out, 'records.jsonl.partial');
    const deadline = Date.now() + 120_000;
    while (Date.now() < deadline && !(existsSync(partial) && lines(partial).length >= 10)) await new Promise((r) => setTimeout(r, 50));
    // a second run into the folder while the first one writes it is refused, not mixed in
    const second = await wwref(...args, '--out', out);
    expect(second.code).toBe(2);
    expect(second.stderr).toMatch(/is being written by another wwref process/);
    child.kill('SIGINT');
    const stopped = await child;
    expect(stopped.exitCode).toBe(130);
    expect(String(stopped.stderr)).toMatch(/the finished tasks are kept in .*records\.jsonl\.partial; run the same command to resume/);
    expect(existsSync(join(out, 'records.jsonl'))).toBe(false);
    const kept = lines(partial);
    expect(kept.length).toBeGreaterThan(0);

    // lines a resumed run must not take as written: a repeated record, a record that is not one, a
    // changed score, a torn line
    const first = JSON.parse(kept[0]!);
    const changed = { ...first, score: { ...first.score, effect_recovery: 0.999 } };
    const fake = { condition: first.condition, method: 'gp_effect_variance', budget: 0 };
    writeFileSync(partial, [kept[0], JSON.stringify(changed), JSON.stringify(fake), ...kept, '{"condition": "wi'].join('\n'));

    const resumed = await wwref(...args, '--out', out);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stderr).toMatch(/resuming: \d+ of \d+ task\(s\) kept from .*; line\(s\) left out: .*a repeated record/);
    expect(resumed.stderr).toMatch(/a score whose effect_recovery grade does not give/);
    expect(lines(join(out, 'records.jsonl')).sort()).toEqual(lines(join(whole, 'records.jsonl')).sort());
    expect(readdirSync(out).sort()).toEqual(readdirSync(whole).sort());

    // another grid into the same folder is refused, not mixed in
    const other = await wwref('controls', 'run', '--condition', 'wine', '--out', out);
    expect(other.code).toBe(2);
    expect(other.stderr).toMatch(/holds the controls of another run: the grid \(conditions, methods, budgets or seeds\) changed since/);
  });
});
