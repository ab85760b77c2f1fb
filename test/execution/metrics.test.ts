// Checks pipelines/execution/verification/metrics.ts against the real scikit-learn / scipy / math.fsum in the pinned venv.
// All Python reference values come from one batched Python process for the whole file.
import { execa } from 'execa';
import { beforeAll, describe, expect, it } from 'vitest';

import { pythonEnvironment } from '../../pipelines/execution/launcher.ts';
import { seededRandom } from '../support/random.ts';
import {
  balancedAccuracy,
  eventF1,
  fsum,
  maxToleranceMatching,
  meanAbsoluteError,
  metricsAgree,
  ndcgAt10,
  normalizedMutualInfo,
  pixelRmse,
  rocAucConcordance,
  roundHalfEven,
  type EventCounts,
} from '../../pipelines/execution/verification/metrics.ts';
import { partialsSum } from '../../pipelines/execution/verification/exact-sum.ts';

const PYTHON = currentSettings().python.executable;

const random = seededRandom(7);
const rand = random.next;
const randInt = random.int;
const pick = random.pick;
const normal = random.normal;

const dv = new DataView(new ArrayBuffer(8));
const bitsOf = (x: number): string => {
  dv.setFloat64(0, x);
  return dv.getBigUint64(0).toString(16).padStart(16, '0');
};
const fromBitsHex = (h: string): number => {
  dv.setBigUint64(0, BigInt(`0x${h}`));
  return dv.getFloat64(0);
};

// ---------------------------------------------------------------------------------------------
// Random cases

// fsum: heavy cancellation over many exponents, plus known hard cases.
const fsumCases: number[][] = [
  [],
  [0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1],
  [1e100, 1, -1e100],
  [1e-16, 1, 1e16],
  [1, 1e100, 1, -1e100],
  [2 ** 53, 1, 2 ** -60],
  [2 ** 53, -0.5, -(2 ** -54)],
  [2 ** 53, 1, -(2 ** -60)],
  [-0, -0],
  [5e-324, 5e-324, -5e-324],
  [1.7976931348623157e308, -1.7976931348623157e308, 1],
  [1.7976931348623157e308, 1.7976931348623157e308],
  [Infinity, 1, 2],
  [-Infinity, 1e308, 1e308],
  [Infinity, -Infinity],
  [NaN, 1],
  [1, NaN, Infinity],
];
for (let c = 0; c < 300; c++) {
  const xs: number[] = [];
  const len = randInt(1, 60);
  for (let i = 0; i < len; i++) {
    const x = (rand() - 0.5) * 2 ** randInt(-60, 60);
    xs.push(x);
    if (rand() < 0.4) xs.push(-x * (1 + (rand() < 0.5 ? 2 ** -52 : 0)));
  }
  if (rand() < 0.3) xs.push(2 ** -1074 * randInt(-3, 3));
  for (let i = xs.length - 1; i > 0; i--) {
    const j = randInt(0, i);
    [xs[i], xs[j]] = [xs[j]!, xs[i]!];
  }
  fsumCases.push(xs);
}
for (let c = 0; c < 100; c++) {
  // half-way patterns: a big power of two, an odd multiple of its half-ulp, and small tails
  const big = 2 ** randInt(0, 80) * (rand() < 0.5 ? 1 : -1);
  const ulpHalf = Math.abs(big) * 2 ** -53;
  fsumCases.push([big, ulpHalf * pick([1, -1, 3, -3]), ulpHalf * 2 ** -randInt(1, 40) * pick([1, -1]), rand() < 0.5 ? 0 : big * 2]);
}
// long lists, as an image's squared errors and as sums that cancel across every exponent (fsum's
// fixed-point path, exact-sum.ts), and lists beside its limit of 2^969 (the rest go to the partials)
for (const size of [65_536, 40_000]) fsumCases.push(Array.from({ length: size }, () => (rand() * 0.1) ** 2));
for (let c = 0; c < 3; c++) {
  const xs = Array.from({ length: 30_000 }, () => (rand() - 0.5) * 2 ** randInt(-1074, 960));
  fsumCases.push([...xs, ...xs.slice(0, 10_000).map((x) => -x)]);
}
fsumCases.push([2 ** 969, -(2 ** 968), 1], [2 ** 969 - 2 ** 916, -(2 ** 968), 2 ** -1074], [2 ** 968, 2 ** 968, 2 ** 968, -(2 ** 969)]);

const iscloseCases: [number, number][] = [
  [1, 1 + 1e-13],
  [1, 1 + 2e-12],
  [0, 1e-11],
  [0, 1.1e-10],
  [1e-10, 0],
  [1e6, 1e6 * (1 + 9e-13)],
  [1e6, 1e6 * (1 + 1.1e-12)],
  [Infinity, Infinity],
  [Infinity, -Infinity],
  [Infinity, 1e308],
  [NaN, NaN],
  [-0, 0],
];
for (let i = 0; i < 300; i++) {
  const a = normal() * 10 ** randInt(-12, 6);
  iscloseCases.push([a, a + normal() * 10 ** randInt(-14, -8) * (rand() < 0.5 ? Math.abs(a) : 1)]);
}

const roundCases: number[] = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 12.5, 37.5, 18, 36, 54, 0.49999999999999994, 4503599627370495.5];
for (let i = 0; i < 300; i++) roundCases.push(rand() < 0.5 ? randInt(-1000, 1000) / 2 : normal() * 100);

type Labels = (number | string)[];
const labelAlphabets: Labels[] = [
  [0, 1],
  [0, 1, 2],
  [3, 1, 4, 1, 5, 9, 2, 6],
  ['a', 'b', 'c'],
  ['setosa', 'versicolor', 'virginica', 'x'],
  [-1, 7],
];
function randomLabels(n: number, alphabet: Labels, k: number): Labels {
  const sub = alphabet.slice(0, Math.max(1, k));
  return Array.from({ length: n }, () => pick(sub));
}

const baCases: { yt: Labels; yp: Labels }[] = [];
for (let c = 0; c < 150; c++) {
  const alpha = pick(labelAlphabets);
  const n = randInt(1, 200);
  const yt = randomLabels(n, alpha, randInt(1, alpha.length));
  const noise = rand();
  const yp = yt.map((y) => (rand() < noise ? pick(alpha) : y));
  baCases.push({ yt, yp });
}

const maeCases: { t: number[]; p: number[] }[] = [];
for (let c = 0; c < 100; c++) {
  const n = randInt(1, 300);
  const scale = 10 ** randInt(-6, 8);
  const t = Array.from({ length: n }, () => normal() * scale);
  maeCases.push({ t, p: t.map((x) => x + normal() * scale * rand()) });
}

const rmseCases: { c: number[]; p: number[]; h: number; w: number }[] = [];
for (let k = 0; k < 40; k++) {
  const h = randInt(1, 40);
  const w = randInt(1, 40);
  const c = Array.from({ length: h * w }, () => rand());
  rmseCases.push({ c, p: c.map((x) => x + normal() * 0.1), h, w });
}

const nmiCases: { a: Labels; b: Labels }[] = [
  { a: [0, 0, 0], b: [1, 1, 1] },
  { a: [0, 0, 1, 1], b: [5, 5, 2, 2] },
  { a: [0, 0, 0, 0], b: [0, 1, 2, 3] },
  { a: [0, 1, 2, 3], b: [0, 0, 0, 0] },
  { a: ['x', 'y', 'x', 'y'], b: [1, 1, 2, 2] },
];
for (let c = 0; c < 150; c++) {
  const alpha = pick(labelAlphabets);
  const n = randInt(1, 300);
  const a = randomLabels(n, alpha, randInt(1, alpha.length));
  const noise = rand();
  const b = a.map((y) => (rand() < noise ? randInt(0, 5) : `k${String(y)}`));
  nmiCases.push({ a, b });
}

interface NdcgCase {
  docs: string[];
  ranking: [string, string[]][];
  qrels: Record<string, Record<string, number>>;
  useMap: boolean;
}
const ndcgCases: NdcgCase[] = [];
for (let c = 0; c < 80; c++) {
  const nDocs = randInt(10, 80);
  const docSet = new Set<string>();
  while (docSet.size < nDocs) docSet.add(pick(['d', 'doc', '', 'D']) + String(randInt(0, 500)));
  const docs = [...docSet];
  const nq = randInt(1, 12);
  const graded = rand() < 0.4;
  const ranking: [string, string[]][] = [];
  const qrels: Record<string, Record<string, number>> = {};
  for (let q = 0; q < nq; q++) {
    const qid = rand() < 0.5 ? String(randInt(0, 1000)) : `q${randInt(0, 1000)}`;
    if (ranking.some(([x]) => x === qid)) continue;
    const shuffled = [...docs].sort(() => rand() - 0.5);
    ranking.push([qid, shuffled.slice(0, 10)]);
    const r = rand();
    if (r < 0.1) continue; // query absent from qrels
    const rel: Record<string, number> = {};
    const nRel = r < 0.2 ? 0 : randInt(1, Math.min(15, nDocs));
    const relDocs = rand() < 0.5 ? shuffled.slice(randInt(0, 12), 30) : [...docs].sort(() => rand() - 0.5);
    for (const d of relDocs.slice(0, nRel)) rel[d] = graded ? randInt(0, 3) : 1;
    qrels[qid] = rel;
  }
  ndcgCases.push({ docs, ranking, qrels, useMap: rand() < 0.5 });
}

const aucCases: { y: number[]; s: number[] }[] = [];
for (let c = 0; c < 150; c++) {
  const n = randInt(2, 300);
  const y = Array.from({ length: n }, () => (rand() < 0.5 ? 1 : 0));
  y[0] = 1;
  y[1] = 0;
  const levels = pick([2, 3, 10, 0]);
  const s = y.map((l) => {
    const v = rand() + 0.3 * l;
    return levels === 0 ? v : Math.round(v * levels) / levels;
  });
  aucCases.push({ y, s });
}
aucCases.push({ y: [1, 0, 1, 0], s: [0.5, 0.5, 0.5, 0.5] });
aucCases.push({ y: Array.from({ length: 102 }, (_, i) => (i < 51 ? 1 : 0)), s: new Array<number>(102).fill(0.5) });

interface EventCase {
  pred: number[];
  ref: number[];
  n: number;
  fs: number;
}
const eventCases: EventCase[] = [];
for (let c = 0; c < 120; c++) {
  const fs = pick([360, 250, 128, 500, 100, 360]);
  const n = randInt(3 * fs, 30 * fs);
  const ref: number[] = [];
  const dense = rand() < 0.3;
  let t = randInt(0, fs);
  while (t < n) {
    ref.push(t);
    t += dense ? randInt(1, Math.round(0.1 * fs)) : randInt(Math.round(0.25 * fs), 2 * fs);
  }
  let pred: number[] = [];
  const jitter = Math.round(pick([0.02, 0.06, 0.12, 0.3]) * fs);
  for (const r of ref) {
    if (rand() < 0.15) continue;
    pred.push(Math.min(n - 1, Math.max(0, r + randInt(-jitter, jitter))));
    if (rand() < 0.05) pred.push(Math.min(n - 1, r + randInt(0, jitter)));
  }
  for (let k = randInt(0, 5); k > 0; k--) pred.push(randInt(0, n - 1));
  if (rand() < 0.5) pred = [...new Set(pred)].sort((x, y) => x - y); // native shape: sorted, unique
  if (rand() < 0.1) pred = [];
  eventCases.push({ pred, ref: rand() < 0.05 ? [] : ref, n, fs });
}

// ---------------------------------------------------------------------------------------------
// One Python process for the whole file.
const PY_SCRIPT = `
import json, math, struct, sys, warnings
warnings.simplefilter('ignore')
import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_bipartite_matching
from sklearn.metrics import (balanced_accuracy_score, mean_absolute_error, ndcg_score,
                             normalized_mutual_info_score, roc_auc_score)
req = json.load(sys.stdin)
def f(h): return struct.unpack('>d', bytes.fromhex(h))[0]
def h(x): return struct.pack('>d', x).hex()
out = {}
def fs(xs):
    try: return h(math.fsum([f(x) for x in xs]))
    except Exception as e: return type(e).__name__
out['fsum'] = [fs(c) for c in req['fsum']]
out['isclose'] = [math.isclose(f(a), f(b), rel_tol=1e-12, abs_tol=1e-10) for a, b in req['isclose']]
out['round'] = [round(f(x)) for x in req['round']]
out['ba'] = [balanced_accuracy_score(c['yt'], c['yp']) for c in req['ba']]
out['mae'] = [mean_absolute_error(c['t'], c['p']) for c in req['mae']]
out['rmse'] = [float(np.sqrt(np.mean((np.array(c['c']).reshape(c['h'], c['w']) - np.array(c['p']).reshape(c['h'], c['w'])) ** 2))) for c in req['rmse']]
out['nmi'] = [float(normalized_mutual_info_score([str(x) for x in c['a']], [str(x) for x in c['b']], average_method='arithmetic')) for c in req['nmi']]
def ndcg(c):
    docs = sorted(c['docs'])
    idx = {d: i for i, d in enumerate(docs)}
    T = np.zeros((len(c['ranking']), len(docs)))
    S = np.zeros_like(T)
    for i, (q, ranked) in enumerate(c['ranking']):
        for d, g in c['qrels'].get(q, {}).items(): T[i, idx[d]] = g
        for r, d in enumerate(ranked): S[i, idx[d]] = 10 - r
    return float(ndcg_score(T, S, k=10))
out['ndcg'] = [ndcg(c) for c in req['ndcg']]
out['auc'] = [float(roc_auc_score(c['y'], c['s'])) for c in req['auc']]
def events(c):
    fsr, n = c['fs'], c['n']
    pred = np.asarray(c['pred'], dtype=np.int64)
    ref = np.asarray(c['ref'], dtype=np.int64)
    ref = ref[(ref >= fsr) & (ref < n - fsr)]
    res = {}
    for T in (50, 100, 150):
        tol = round(T * fsr / 1000)
        if len(pred) and len(ref):
            m = np.abs(pred[:, None] - ref[None, :]) <= tol
            match = maximum_bipartite_matching(csr_matrix(m.astype(np.int8)), perm_type='column')
            tp = int(np.sum(match >= 0))
        else:
            tp = 0
        npred, nref = len(pred), len(ref)
        res[str(T)] = dict(true_positive=tp, predicted_events=npred, reference_events=nref,
                           precision=tp / npred if npred else 0.0, recall=tp / nref if nref else 0.0,
                           f1=2 * tp / (npred + nref) if npred + nref else 1.0)
    return res
out['events'] = [events(c) for c in req['events']]
sys.stdout.write(json.dumps(out))
`;
import { currentSettings } from '../support/workspace.ts';

interface PyOut {
  fsum: string[];
  isclose: boolean[];
  round: number[];
  ba: number[];
  mae: number[];
  rmse: number[];
  nmi: number[];
  ndcg: number[];
  auc: number[];
  events: Record<'50' | '100' | '150', EventCounts>[];
}

let py: PyOut;
beforeAll(async () => {
  const input = JSON.stringify({
    fsum: fsumCases.map((c) => c.map(bitsOf)),
    isclose: iscloseCases.map(([a, b]) => [bitsOf(a), bitsOf(b)]),
    round: roundCases.map(bitsOf),
    ba: baCases,
    mae: maeCases,
    rmse: rmseCases,
    nmi: nmiCases,
    ndcg: ndcgCases,
    auc: aucCases,
    events: eventCases,
  });
  const { stdout } = await execa(PYTHON, ['-c', PY_SCRIPT], { input, env: pythonEnvironment(currentSettings()) });
  py = JSON.parse(stdout) as PyOut;
}, 120_000);

function expectAgree(got: number[], want: number[]): void {
  expect(got).toHaveLength(want.length);
  const bad = got.flatMap((g, i) => (metricsAgree(g, want[i]!) ? [] : [`#${i}: ts ${g} py ${want[i]}`]));
  expect(bad).toEqual([]);
}

// ---------------------------------------------------------------------------------------------
describe('fsum', () => {
  it(`is bit-identical to math.fsum on ${fsumCases.length} cases (incl. specials and errors)`, () => {
    const bad: string[] = [];
    fsumCases.forEach((xs, i) => {
      let got: string;
      try {
        got = bitsOf(fsum(xs));
      } catch (e) {
        got = (e as Error).message.includes('overflow') ? 'OverflowError' : 'ValueError';
      }
      const want = py.fsum[i]!;
      // NaN payloads may differ; compare NaN-ness only.
      const isHex = (x: string): boolean => /^[0-9a-f]{16}$/.test(x);
      const same = got === want || (isHex(got) && isHex(want) && Number.isNaN(fromBitsHex(got)) && Number.isNaN(fromBitsHex(want)));
      if (!same) bad.push(`#${i} [${xs.join(', ')}]: ts ${got} py ${want}`);
    });
    expect(bad).toEqual([]);
  });

  it('takes the same bits by its fixed-point path as by the partials, past its carries (2^20 values) and at its limit', () => {
    const seeded = seededRandom(11);
    const lists: number[][] = [];
    // over 2^21 values cancelling to a negative total, with subnormals among them
    const long = Array.from({ length: 2 ** 21 + 5 }, () => (seeded.next() - 0.55) * 2 ** seeded.int(-1074, 900));
    lists.push(
      long,
      long.map((x) => -x),
      long.map((x) => x * 2 ** -100),
    );
    // one value over and over whose lowest limb is 2^32 − 1: its limb passes 2^53 without the carries
    lists.push(new Array<number>(2 ** 21 + 5).fill((2 ** 53 - 1) * 2 ** -50));
    // the same with zeros where the carries would fall if they were counted by index, not by value added
    lists.push(Array.from({ length: 3 * 2 ** 20 + 5 }, (_, i) => ((i + 1) % 2 ** 20 === 0 ? 0 : (2 ** 53 - 1) * 2 ** -50)));
    for (let c = 0; c < 2000; c++) {
      const xs = Array.from({ length: seeded.int(1, 40) }, () => (seeded.next() - 0.5) * 2 ** seeded.int(-1074, 975));
      if (seeded.next() < 0.5) xs.push(-xs[0]! * (1 + 2 ** -52));
      lists.push(xs);
    }
    const differing = lists.filter((xs) => {
      const expected = (() => {
        try {
          return partialsSum(xs);
        } catch (e) {
          return (e as Error).message;
        }
      })();
      try {
        return !Object.is(fsum(xs), expected);
      } catch (e) {
        return (e as Error).message !== expected;
      }
    });
    expect(differing.map((xs) => xs.slice(0, 5))).toEqual([]);
  });

  it('hand-checked values', () => {
    expect(fsum([])).toBe(0);
    expect(fsum(new Array<number>(10).fill(0.1))).toBe(1);
    expect(fsum([1e100, 1, -1e100])).toBe(1);
    expect(fsum([1e-16, 1, 1e16])).toBe(10000000000000002);
    expect(Object.is(fsum([-0]), 0)).toBe(true);
    expect(fsum(new Float64Array([0.5, 0.25]))).toBe(0.75);
    expect(() => fsum([Infinity, -Infinity])).toThrow();
    expect(() => fsum([1.7976931348623157e308, 1.7976931348623157e308])).toThrow(/overflow/);
  });
});

describe('metricsAgree / roundHalfEven', () => {
  it('equals math.isclose(rel_tol=1e-12, abs_tol=1e-10)', () => {
    expect(iscloseCases.map(([a, b]) => metricsAgree(a, b))).toEqual(py.isclose);
    expect(metricsAgree(NaN, NaN)).toBe(false);
    expect(metricsAgree(0, 1e-10)).toBe(true);
    expect(metricsAgree(0, 2e-10)).toBe(false);
  });
  it('equals Python round()', () => {
    expect(roundCases.map(roundHalfEven)).toEqual(py.round);
  });
});

describe('balancedAccuracy', () => {
  it(`agrees with sklearn balanced_accuracy_score on ${baCases.length} random cases`, () => {
    expectAgree(
      baCases.map((c) => balancedAccuracy(c.yt, c.yp)),
      py.ba,
    );
  });
  it('hand-checked: per-class recall mean, single class, foreign predictions', () => {
    expect(balancedAccuracy([0, 0, 1, 1], [0, 1, 1, 1])).toBe(0.75);
    expect(balancedAccuracy([2, 2, 2], [2, 3, 2])).toBe(2 / 3);
    expect(balancedAccuracy(['a', 'b', 'b', 'b'], ['a', 'z', 'z', 'b'])).toBe(fsum([1, 1 / 3]) / 2);
    expect(balancedAccuracy(new BigInt64Array([1n, 2n]), new BigInt64Array([1n, 1n]))).toBe(0.5);
    expect(() => balancedAccuracy([], [])).toThrow();
    expect(() => balancedAccuracy([1], [1, 2])).toThrow();
  });
});

describe('meanAbsoluteError / pixelRmse', () => {
  it(`MAE agrees with sklearn mean_absolute_error on ${maeCases.length} random cases`, () => {
    expectAgree(
      maeCases.map((c) => meanAbsoluteError(c.t, Float64Array.from(c.p))),
      py.mae,
    );
  });
  it(`RMSE agrees with numpy sqrt(mean(d**2)) on ${rmseCases.length} random images`, () => {
    expectAgree(
      rmseCases.map((c) => pixelRmse(c.c, c.p)),
      py.rmse,
    );
  });
  it('hand-checked', () => {
    expect(meanAbsoluteError([1, 2, 3], [2, 2, 5])).toBe(1);
    expect(pixelRmse([0, 0, 0, 0], [1, -1, 1, -1])).toBe(1);
    expect(pixelRmse([3, 4], [0, 0])).toBe(Math.sqrt(12.5));
    expect(pixelRmse([0.25], [0.25])).toBe(0);
    expect(() => meanAbsoluteError([], [])).toThrow();
    expect(() => pixelRmse([1, NaN], [1, 1])).toThrow();
  });
});

describe('normalizedMutualInfo', () => {
  it(`agrees with sklearn normalized_mutual_info_score on ${nmiCases.length} cases`, () => {
    // Python gets str() of every label; use the same labels here.
    expectAgree(
      nmiCases.map((c) => normalizedMutualInfo(c.a.map(String), c.b.map(String))),
      py.nmi,
    );
  });
  it('hand-checked edge cases', () => {
    expect(normalizedMutualInfo([0, 0, 1, 1], [1, 1, 0, 0])).toBe(1);
    expect(normalizedMutualInfo([0, 0, 0], [7, 7, 7])).toBe(1);
    expect(normalizedMutualInfo([], [])).toBe(1);
    expect(normalizedMutualInfo([0, 0, 0, 0], [0, 1, 2, 3])).toBe(0);
    expect(normalizedMutualInfo([0, 0, 1, 1], [0, 1, 0, 1])).toBe(0);
    // clusters are a function of the labels, so MI = H_p: NMI = 2·H_p / (H_y + H_p)
    const hp = Math.log(3) / 3 + (2 / 3) * Math.log(1.5);
    expect(normalizedMutualInfo(new Int32Array([0, 0, 1, 1, 2, 2]), new Int32Array([1, 1, 0, 0, 0, 0]))).toBeCloseTo(
      (2 * hp) / (Math.log(3) + hp),
      14,
    );
  });
});

describe('ndcgAt10', () => {
  const toArgs = (c: NdcgCase) => {
    const ranking = c.useMap ? new Map(c.ranking) : Object.fromEntries(c.ranking);
    return [ranking, c.qrels] as const;
  };
  it(`agrees with sklearn ndcg_score(k=10) on the dense matrices for ${ndcgCases.length} cases`, () => {
    expectAgree(
      ndcgCases.map((c) => ndcgAt10(...toArgs(c))),
      py.ndcg,
    );
  });
  it('hand-checked: perfect ranking, no relevant docs (scores 0), second rank', () => {
    const docs = Array.from({ length: 10 }, (_, i) => `d${i}`);
    expect(ndcgAt10({ q: docs }, { q: { d0: 1, d1: 1 } })).toBe(1);
    expect(ndcgAt10({ q: docs }, { q: {} })).toBe(0);
    expect(ndcgAt10({ q: docs }, {})).toBe(0);
    expect(ndcgAt10({ q: docs }, { q: { d1: 1 } })).toBe(1 / Math.log2(3));
    expect(ndcgAt10({ q: docs, r: docs }, { q: { d1: 1 }, r: { d0: 1, zz: 1 } })).toBe(
      fsum([1 / Math.log2(3), 1 / (1 + 1 / Math.log2(3))]) / 2,
    );
    expect(() => ndcgAt10({ q: docs.slice(0, 9) }, {})).toThrow();
    expect(() => ndcgAt10({ q: [...docs.slice(0, 9), 'd0'] }, {})).toThrow();
    expect(() => ndcgAt10({}, {})).toThrow();
  });
});

describe('rocAucConcordance', () => {
  it(`agrees with sklearn roc_auc_score on ${aucCases.length} cases (with ties)`, () => {
    expectAgree(
      aucCases.map((c) => rocAucConcordance(c.y, c.s)),
      py.auc,
    );
  });
  it('hand-checked: ties count one half, single class throws', () => {
    expect(rocAucConcordance([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])).toBe(0.75);
    expect(rocAucConcordance([1, 0, 1, 0], [0.5, 0.5, 0.5, 0.5])).toBe(0.5);
    expect(rocAucConcordance([1, 0, 1, 0], [0.5, 0.5, 0.7, 0.1])).toBe((1 + 0.5 + 1 + 1) / 4);
    expect(rocAucConcordance([true, false], [-0, 0])).toBe(0.5);
    expect(rocAucConcordance([0, 1], [2, 1])).toBe(0);
    expect(() => rocAucConcordance([1, 1], [0.2, 0.3])).toThrow();
    expect(() => rocAucConcordance([0, 2], [0.2, 0.3])).toThrow();
  });
});

describe('eventF1', () => {
  it(`agrees with scipy maximum_bipartite_matching on ${eventCases.length} random cases`, () => {
    const bad: string[] = [];
    eventCases.forEach((c, i) => {
      const got = eventF1(c.pred, c.ref, c.n, c.fs);
      const want = py.events[i]!;
      for (const T of ['50', '100', '150'] as const) {
        const g = got.tolerances[T];
        const w = want[T];
        const ok =
          g.true_positive === w.true_positive &&
          g.predicted_events === w.predicted_events &&
          g.reference_events === w.reference_events &&
          metricsAgree(g.precision, w.precision) &&
          metricsAgree(g.recall, w.recall) &&
          metricsAgree(g.f1, w.f1);
        if (!ok) bad.push(`#${i} @${T}: ts ${JSON.stringify(g)} py ${JSON.stringify(w)}`);
      }
      if (got.native !== got.tolerances['100'].f1) bad.push(`#${i} native`);
    });
    expect(bad).toEqual([]);
  });

  it('Hopcroft–Karp equals a brute-force augmenting-path matching on 3000 small dense graphs', () => {
    const kuhn = (p: number[], e: number[], tol: number): number => {
      const mateOfRef = new Array<number>(e.length).fill(-1);
      const augment = (u: number, seen: boolean[]): boolean => {
        for (let v = 0; v < e.length; v++) {
          if (Math.abs(p[u]! - e[v]!) > tol || seen[v]) continue;
          seen[v] = true;
          if (mateOfRef[v] === -1 || augment(mateOfRef[v]!, seen)) {
            mateOfRef[v] = u;
            return true;
          }
        }
        return false;
      };
      let m = 0;
      for (let u = 0; u < p.length; u++) if (augment(u, new Array<boolean>(e.length).fill(false))) m++;
      return m;
    };
    const bad: string[] = [];
    for (let c = 0; c < 3000; c++) {
      const span = randInt(5, 40);
      const p = Array.from({ length: randInt(0, 12) }, () => randInt(0, span));
      const e = Array.from({ length: randInt(0, 12) }, () => randInt(0, span));
      const tol = randInt(0, 5);
      const got = maxToleranceMatching(p, e, tol);
      const want = kuhn(p, e, tol);
      if (got !== want) bad.push(`p=${p} e=${e} tol=${tol}: ${got} vs ${want}`);
    }
    expect(bad).toEqual([]);
  });

  it('hand-checked edge cases', () => {
    const empty = eventF1([], [], 3600, 360);
    expect(empty.tolerances['100']).toEqual({
      true_positive: 0,
      predicted_events: 0,
      reference_events: 0,
      precision: 0,
      recall: 0,
      f1: 1,
    });
    expect(empty.native).toBe(1);
    // no predictions, some references
    expect(eventF1([], [400, 800], 3600, 360).tolerances['50']).toMatchObject({ precision: 0, recall: 0, f1: 0 });
    // references outside [fs, n - fs) are dropped (359 and 3240 go, 360 and 3239 stay)
    const r = eventF1([360, 3239], [359, 360, 3239, 3240], 3600, 360);
    expect(r.tolerances['50']).toMatchObject({ reference_events: 2, true_positive: 2, f1: 1 });
    // tolerance in samples uses round-half-even: fs 250 -> 12.5 -> 12, 25 -> 25, 37.5 -> 38
    const t = eventF1([1000], [1013], 5000, 250).tolerances;
    expect([t['50'].true_positive, t['100'].true_positive]).toEqual([0, 1]);
    const t2 = eventF1([1000], [1038], 5000, 250).tolerances;
    expect([t2['100'].true_positive, t2['150'].true_positive]).toEqual([0, 1]);
    // the matching must be maximum, not first-come: 100 may take 120 or 90, 130 only 120
    const m = eventF1([100 + 360, 130 + 360], [120 + 360, 90 + 360], 3600, 360).tolerances['100'];
    expect(m).toMatchObject({ true_positive: 2, precision: 1, recall: 1, f1: 1 });
    // one prediction cannot match two references
    expect(eventF1([1000], [990, 1010], 3600, 360).tolerances['100']).toMatchObject({
      true_positive: 1,
      precision: 1,
      recall: 0.5,
      f1: 2 / 3,
    });
    expect(maxToleranceMatching([5, 5, 5], [4, 6], 1)).toBe(2);
    expect(maxToleranceMatching([0, 10, 20], [9, 11, 30], 1)).toBe(1);
    expect(maxToleranceMatching([1, 2], [0, 1], 1)).toBe(2);
  });
});
