// The benchmark's public helpers for the native engine (pipelines/evaluation/sandbox/wwb_helpers.py),
// run by the pinned runtime with only a copy of the file and the checkout root on sys.path: fit_surface
// is the controls' ridge table bit for bit (workflows.evaluation.ridge.table on surface.feature_rows,
// the distinct masks in first-seen order, as estimators.py calls it), suggest_experiments the
// continuation of ridge.greedy_design, the argument checks raise ValueError, and the published
// calculations that import the helpers (read from ../shared/published at test time) print what their
// receipts show.
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { loadSettings } from '../../pipelines/core/settings.ts';
import { runPython } from '../../pipelines/execution/launcher.ts';
import { type Random, seededRandom } from '../support/random.ts';

const PYTHON = join(ROOT, '.venv', 'bin', 'python');
const SKIP = existsSync(PYTHON) ? null : 'the pinned runtime (.venv) is not set up: npm run setup';
const settings = loadSettings({}, process.env);
const EPISODES = join(settings.paths.published, 'agent-episodes');
const SKIP_PUBLISHED = existsSync(EPISODES) ? null : `the published agent episodes (${EPISODES}) are absent`;

// the helpers as the sandbox's working folder holds them: a copy, away from the rest of pipelines/
const helpers = mkdtempSync(join(tmpdir(), 'wwref-wwb-helpers-'));
copyFileSync(join(ROOT, 'pipelines', 'evaluation', 'sandbox', 'wwb_helpers.py'), join(helpers, 'wwb_helpers.py'));
afterAll(() => rmSync(helpers, { recursive: true, force: true }));

interface Observation {
  mask: string;
  utility: number;
}

/** `script` in the pinned runtime, isolated (-I: no working folder, no PYTHON* variables on the path), `job` on stdin. */
function python(script: string, job: object) {
  return runPython(settings, ['-I', '-c', script], {
    input: JSON.stringify({ helpers, root: ROOT, ...job }),
    reject: false,
    stripFinalNewline: false,
  });
}

const PRELUDE = `
import json, sys
job = json.load(sys.stdin)
sys.path[:0] = [job["helpers"], job["root"]]
`;

const COMPARE = `${PRELUDE}
import numpy as np
import wwb_helpers
from workflows.evaluation import ridge
from workflows.evaluation.surface import feature_rows, mask_string

def distinct(observations):
    first = {}
    for o in observations:
        first.setdefault(o["mask"], o["utility"])
    return [int(m, 2) for m in first], np.array([float(u) for u in first.values()])

def hexes(values):
    return [float(v).hex() for v in values]

def table(case):
    w, d, obs = case["width"], case["degree"], case["observations"]
    got = wwb_helpers.fit_surface(obs, degree=d)
    observed, y = distinct(obs)
    rows = feature_rows(w, d)
    raw, chosen = ridge.table(rows, rows[observed], y)
    want = np.clip(raw, 0.0, 1.0)
    want[observed] = y
    return {
        "fields": list(got),
        "masks": list(got["predictions"]),
        "default_is_degree1": d != 1 or wwb_helpers.fit_surface(obs) == got,
        "got": {"table": hexes(got["predictions"].values()), "alpha": got["ridge_alpha"].hex(),
                "loss": got["observed_loo_mse"].hex(), "degree": got["degree"], "used": got["observations_used"],
                "hidden": got["hidden_outcomes_used"],
                "losses": {repr(a): v.hex() for a, v in got["observed_loo_mse_by_alpha"].items()}},
        "want": {"table": hexes(want), "alpha": chosen["alpha"].hex(), "loss": chosen["observed_loo_mse"].hex(),
                 "degree": d, "used": len(observed), "hidden": 0,
                 "losses": {a: v.hex() for a, v in chosen["loo_losses"].items()}},
    }

def design(case):
    w, d, obs, n, split = case["width"], case["degree"], case["observations"], case["count"], case["split"]
    got = wwb_helpers.suggest_experiments(obs, n, d)
    want = [mask_string(k, w) for k in ridge.greedy_design(feature_rows(w, d), distinct(obs)[0], n)]
    first = wwb_helpers.suggest_experiments(obs, split, d)
    bought = obs + [{"mask": m, "utility": 0.5} for m in first]
    return {"got": got, "want": want, "in_two_steps": first + wwb_helpers.suggest_experiments(bought, n - split, d),
            "default_is_one_of_degree1": wwb_helpers.suggest_experiments(obs) == wwb_helpers.suggest_experiments(obs, 1, 1)}

def attempt(expression):
    scope = {"fit_surface": wwb_helpers.fit_surface, "suggest_experiments": wwb_helpers.suggest_experiments,
             "features": wwb_helpers.features, "np": np, "nan": float("nan"), "inf": float("inf"),
             "two": [{"mask": "0000", "utility": 0.25}, {"mask": "1111", "utility": 0.75}]}
    try:
        eval(expression, scope)
        return {"error": None}
    except Exception as e:
        return {"error": type(e).__name__, "message": str(e)}

def coded(m, degree):
    masks, rows = wwb_helpers.features(m, degree)
    return {"masks": masks, "rows": rows.tolist(), "dtype": str(rows.dtype)}

print(json.dumps({"tables": [table(c) for c in job.get("tables", [])],
                  "designs": [design(c) for c in job.get("designs", [])],
                  "attempts": [attempt(e) for e in job.get("attempts", [])],
                  "features": [coded(m, d) for m, d in job.get("features", [])]}))
`;

interface TableResult {
  fields: string[];
  masks: string[];
  default_is_degree1: boolean;
  got: Record<string, unknown>;
  want: Record<string, unknown>;
}
interface DesignResult {
  got: string[];
  want: string[];
  in_two_steps: string[];
  default_is_one_of_degree1: boolean;
}
interface Attempt {
  error: string | null;
  message?: string;
}
interface Compared {
  tables: TableResult[];
  designs: DesignResult[];
  attempts: Attempt[];
  features: { masks: string[]; rows: number[][]; dtype: string }[];
}

function compare(job: object): Compared {
  const result = python(COMPARE, job);
  expect(result.stderr, 'the comparison script failed').toBe('');
  expect(result.exitCode).toBe(0);
  return JSON.parse(String(result.stdout));
}

const maskString = (k: number, width: number) => k.toString(2).padStart(width, '0');
const allMasks = (width: number) => Array.from({ length: 2 ** width }, (_, k) => maskString(k, width));

/** Main and pair effects plus noise, clipped to [0, 1] (exact 0 and 1 occur), or plain uniform values. */
function surface(width: number, random: Random): number[] {
  if (random.next() < 0.25) return Array.from({ length: 2 ** width }, () => random.next());
  const main = Array.from({ length: width }, () => random.normal() * 0.2);
  const pair = Array.from({ length: width * width }, () => (random.next() < 0.4 ? random.normal() * 0.08 : 0));
  return Array.from({ length: 2 ** width }, (_, k) => {
    const coded = Array.from({ length: width }, (_, i) => ((k >> (width - 1 - i)) & 1 ? 1 : -1));
    let u = 0.6 + random.normal() * 0.03;
    for (let i = 0; i < width; i++) {
      u += main[i]! * coded[i]!;
      for (let j = i + 1; j < width; j++) u += pair[i * width + j]! * coded[i]! * coded[j]!;
    }
    return Math.min(1, Math.max(0, u));
  });
}

/**
 * `total` observations (3 to 40) of `distinct` masks: the anchors first then a random order (as an
 * episode buys them), or a wholly random order; the rest repeats of those masks (same utility) put
 * anywhere, a repeat placed before the original becoming the first sighting.
 */
function observations(width: number, random: Random): Observation[] {
  const u = surface(width, random);
  const total = random.int(3, 40);
  const distinct = random.int(2, Math.min(total, 2 ** width));
  const order = Array.from({ length: 2 ** width }, (_, k) => k);
  for (let i = order.length - 1; i > 0; i--) {
    const j = random.int(0, i);
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  const anchorsFirst = random.next() < 0.7;
  const picked = (anchorsFirst ? [0, 2 ** width - 1, ...order.filter((k) => k !== 0 && k !== 2 ** width - 1)] : order).slice(0, distinct);
  const list = picked.map((k) => ({ mask: maskString(k, width), utility: u[k]! }));
  while (list.length < total) {
    const k = random.pick(picked);
    list.splice(random.int(0, list.length), 0, { mask: maskString(k, width), utility: u[k]! });
  }
  return list;
}

const distinctCount = (list: Observation[]) => new Set(list.map((o) => o.mask)).size;

describe.skipIf(SKIP !== null)(`wwb_helpers in the pinned runtime${SKIP ? ` (skipped: ${SKIP})` : ''}`, () => {
  it('fit_surface is the controls’ ridge table bit for bit (degree 1 and 2, 4 and 6 options, 3 to 40 observations with repeats)', () => {
    const random = seededRandom(71);
    const tables: { width: number; degree: number; observations: Observation[] }[] = [];
    for (const width of [4, 6])
      for (const degree of [1, 2]) for (let n = 0; n < 12; n++) tables.push({ width, degree, observations: observations(width, random) });
    // a flat surface: every penalty ties on its leave-one-out loss (the larger penalty wins)
    tables.push({ width: 4, degree: 2, observations: allMasks(4).map((mask) => ({ mask, utility: 0.5 })) });
    const { tables: results } = compare({ tables });
    expect(results).toHaveLength(tables.length);
    results.forEach((r, i) => {
      const c = tables[i]!;
      const label = `case ${i}: ${c.width} options, degree ${c.degree}, ${c.observations.length} observations (${distinctCount(c.observations)} distinct)`;
      expect(r.fields, label).toEqual([
        'predictions',
        'degree',
        'ridge_alpha',
        'observed_loo_mse',
        'observed_loo_mse_by_alpha',
        'observations_used',
        'hidden_outcomes_used',
      ]);
      expect(r.masks, label).toEqual(allMasks(c.width));
      expect(r.got, label).toEqual(r.want);
      expect(r.default_is_degree1, label).toBe(true);
    });
    // the comparison compared something: repeats in most cases, several chosen penalties
    expect(tables.filter((c) => distinctCount(c.observations) < c.observations.length).length).toBeGreaterThan(tables.length / 2);
    expect(new Set(results.map((r) => r.want.alpha)).size).toBeGreaterThan(2);
    expect(results.at(-1)!.got.alpha, 'the flat surface takes the largest penalty').toBe('0x1.4000000000000p+3'); // float.hex(10.0)
  });

  it('suggest_experiments continues ridge.greedy_design from the distinct observed masks; two steps give the same masks as one', () => {
    const random = seededRandom(72);
    const designs: { width: number; degree: number; observations: Observation[]; count: number; split: number }[] = [];
    for (const width of [4, 6])
      for (const degree of [1, 2]) {
        const anchors = [0, 2 ** width - 1].map((k) => ({ mask: maskString(k, width), utility: 0.5 }));
        designs.push({ width, degree, observations: anchors, count: 2 ** width - 2, split: random.int(0, 2 ** width - 2) });
        for (let n = 0; n < 6; n++) {
          const list = observations(width, random);
          const count = random.int(0, 2 ** width - distinctCount(list));
          designs.push({ width, degree, observations: list, count, split: random.int(0, count) });
        }
      }
    const { designs: results } = compare({ designs });
    results.forEach((r, i) => {
      const c = designs[i]!;
      const label = `case ${i}: ${c.width} options, degree ${c.degree}, ${distinctCount(c.observations)} observed, ${c.count} more`;
      expect(r.got, label).toEqual(r.want);
      expect(r.got, label).toHaveLength(c.count);
      expect(r.in_two_steps, label).toEqual(r.got);
      expect(r.default_is_one_of_degree1, label).toBe(true);
      const observed = new Set(c.observations.map((o) => o.mask));
      expect(
        r.got.filter((m) => observed.has(m)),
        label,
      ).toEqual([]);
    });
    // the exhaustive designs bought every other mask exactly once
    for (const i of [0, 7, 14, 21]) expect(new Set(results[i]!.got).size).toBe(2 ** designs[i]!.width - 2);
  });

  it('features: every mask by index and its coded row (constant, options ±1, then pairs i < j)', () => {
    const { features } = compare({
      features: [
        [3, 1],
        [3, 2],
      ],
    });
    const coded = (m: string) => [...m].map((b) => (b === '1' ? 1 : -1));
    const pairs = (x: number[]) => x.flatMap((a, i) => x.slice(i + 1).map((b) => a * b));
    expect(features[0]!.masks).toEqual(allMasks(3));
    expect(features[0]!.rows).toEqual(allMasks(3).map((m) => [1, ...coded(m)]));
    expect(features[1]!.rows).toEqual(allMasks(3).map((m) => [1, ...coded(m), ...pairs(coded(m))]));
    expect(features.map((f) => f.dtype)).toEqual(['float64', 'float64']);
  });

  it('refuses bad arguments with ValueError and a message that says what is wrong', () => {
    const refused: [string, RegExp][] = [
      ['fit_surface([])', /non-empty list/],
      ['fit_surface({"mask": "0000", "utility": 0.5})', /non-empty list/],
      ['fit_surface(tuple(two))', /non-empty list/],
      ['fit_surface([("0000", 0.5), ("1111", 0.7)])', /dict with "mask" and "utility"/],
      ['fit_surface([{"mask": "0000"}, {"mask": "1111", "utility": 0.7}])', /dict with "mask" and "utility"/],
      ['fit_surface([{"mask": "0", "utility": 0.5}, {"mask": "1", "utility": 0.7}])', /2 to 8 characters/],
      ['fit_surface([{"mask": "000000000", "utility": 0.5}, {"mask": "111111111", "utility": 0.7}])', /2 to 8 characters/],
      ['fit_surface(two + [{"mask": "01a1", "utility": 0.5}])', /2 to 8 characters/],
      ['fit_surface(two + [{"mask": 5, "utility": 0.5}])', /2 to 8 characters/],
      ['fit_surface(two + [{"mask": "0101", "utility": nan}])', /finite number in \[0, 1\]/],
      ['fit_surface(two + [{"mask": "0101", "utility": inf}])', /finite number in \[0, 1\]/],
      ['fit_surface(two + [{"mask": "0101", "utility": -0.01}])', /finite number in \[0, 1\]/],
      ['fit_surface(two + [{"mask": "0101", "utility": 1.5}])', /finite number in \[0, 1\]/],
      ['fit_surface(two + [{"mask": "0101", "utility": True}])', /finite number in \[0, 1\]/],
      ['fit_surface(two + [{"mask": "0101", "utility": "0.5"}])', /finite number in \[0, 1\]/],
      ['fit_surface(two + [{"mask": "0000", "utility": 0.3}])', /conflicting measurements of 0000/],
      ['fit_surface(two + [{"mask": "010", "utility": 0.3}])', /same number of options/],
      ['fit_surface([two[0], two[0]])', /at least two distinct/],
      ['fit_surface(two, degree=3)', /degree must be 1 .* or 2/],
      ['fit_surface(two, 0)', /degree must be 1 .* or 2/],
      ['suggest_experiments(two, 1, degree=3)', /degree must be 1 .* or 2/],
      ['suggest_experiments(two, -1)', /count must be a whole number from 0 to 14/],
      ['suggest_experiments(two, 15)', /count must be a whole number from 0 to 14/],
      ['suggest_experiments(two, 1.0)', /count must be a whole number/],
      ['suggest_experiments(two, True)', /count must be a whole number/],
      ['suggest_experiments([])', /non-empty list/],
      ['features(4, 3)', /degree must be 1 .* or 2/],
      ['features(0, 1)', /positive integer/],
      ['features("4", 1)', /positive integer/],
    ];
    const accepted = [
      'fit_surface([{"mask": "00", "utility": 0}, {"mask": "11", "utility": 1}, {"mask": "01", "utility": np.float64(0.5)}])',
      'fit_surface(two + two + [dict(two[0])])',
      'suggest_experiments(two[:1], 15, 2)',
      'suggest_experiments(two, np.int64(14))',
      'suggest_experiments(two, 0)',
      'features(np.int64(2), 2)',
    ];
    const { attempts } = compare({ attempts: [...refused.map(([e]) => e), ...accepted] });
    refused.forEach(([expression, message], i) => {
      expect(attempts[i]!.error, expression).toBe('ValueError');
      expect(attempts[i]!.message, expression).toMatch(message);
    });
    accepted.forEach((expression, i) => {
      expect(attempts[refused.length + i], expression).toEqual({ error: null });
    });
  });
});

const RUN = `${PRELUDE}
evidence = job["evidence"]
scope = {"__name__": "__main__", "__builtins__": __builtins__, "evidence": evidence, "task": evidence["task"],
         "observations": evidence["observations"]}
code = job["code"]
del job
exec(compile(code, "calculation.py", "exec"), scope)
`;

/** A published calculation that imports the helpers, with the observations it saw. */
interface Published {
  name: string;
  code: string;
  receipt: { returncode: number; stdout: string };
  evidence: Record<string, unknown> & { observations: Observation[] };
}

/**
 * The calculations of every published episode that import wwb_helpers, each with the observations of
 * its moment (anchors, then each observe event's new masks, up to the call); the other evidence fields
 * are the final ones, so a code that reads them, or reads the benchmark's own files, is left out.
 */
function publishedCalculations(): { runnable: Published[]; left: string[] } {
  const runnable: Published[] = [];
  const left: string[] = [];
  for (const episode of readdirSync(EPISODES, { withFileTypes: true }).filter((e) => e.isDirectory())) {
    const dir = join(EPISODES, episode.name);
    const final = JSON.parse(readFileSync(join(dir, 'evidence.json'), 'utf8'));
    const utility = new Map<string, number>(final.observations.map((o: Observation) => [o.mask, o.utility]));
    const order: string[] = JSON.parse(readFileSync(join(dir, 'calculation_order.json'), 'utf8'));
    const seen: string[] = final.observations.slice(0, 2).map((o: Observation) => o.mask);
    const atCall = new Map<string, string[]>();
    for (const line of readFileSync(join(dir, 'events.jsonl'), 'utf8').split('\n').filter(Boolean)) {
      const event = JSON.parse(line);
      if (event.event === 'observe') for (const m of event.masks as string[]) if (!seen.includes(m)) seen.push(m);
      if (event.event === 'calculation') atCall.set(order[event.number - 1]!, [...seen]);
    }
    expect(seen, `${episode.name}: the observe events rebuild the final order`).toEqual(final.observations.map((o: Observation) => o.mask));
    for (const [id, masks] of atCall) {
      const code = readFileSync(join(dir, 'calculations', id, 'code.py'), 'utf8');
      if (!/\bwwb_helpers\b/.test(code)) continue;
      const name = `${episode.name}/${id}`;
      if (/\bevidence\b|\btask\b|\/job\/|\bopen\(/.test(code)) {
        left.push(name);
        continue;
      }
      const receipt = JSON.parse(readFileSync(join(dir, 'calculations', id, 'receipt.json'), 'utf8'));
      const observations = masks.map((mask) => ({ mask, utility: utility.get(mask)! }));
      runnable.push({ name, code, receipt, evidence: { ...final, observations } });
    }
  }
  return { runnable, left };
}

const SKIP_RUN = SKIP ?? SKIP_PUBLISHED;
describe.skipIf(SKIP_RUN !== null)(`published calculations that import wwb_helpers${SKIP_RUN ? ` (skipped: ${SKIP_RUN})` : ''}`, () => {
  it('print the published stdout byte for byte and end with the published return code', () => {
    const { runnable, left } = publishedCalculations();
    if (left.length)
      console.warn(
        `wwb_helpers: ${left.length} published calculation(s) read the evidence or the benchmark's files, not run: ${left.join(', ')}`,
      );
    expect(runnable.length).toBeGreaterThan(0);
    for (const c of runnable) {
      const result = python(RUN, { code: c.code, evidence: c.evidence });
      expect(String(result.stdout), c.name).toBe(c.receipt.stdout);
      expect(result.exitCode, `${c.name}: ${String(result.stderr).split('\n').at(-2) ?? ''}`).toBe(c.receipt.returncode);
    }
  });
});
