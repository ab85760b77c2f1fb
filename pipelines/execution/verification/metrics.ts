// Independent TypeScript implementations of every native metric (docs/records.md,
// docs/families.md). They are written from the definitions on purpose, differently from
// the sklearn/scipy code the workers use; a recomputed metric only has to agree with the native one
// under metricsAgree (math.isclose with rel_tol 1e-12, abs_tol 1e-10), not bit for bit. Hashes,
// utilities and stored tolerance tables are compared exactly (docs/records.md).
//
// Inputs are plain arrays or typed arrays (ArrayLike). Every function throws on malformed input
// (length mismatch, empty input where the metric is undefined, non-finite numbers) rather than
// returning NaN.

import { fsum } from './exact-sum.ts';

type Num = number;
type Label = number | string | bigint | boolean;

// ---------------------------------------------------------------------------------------------
// Exact summation (exact-sum.ts: Python's math.fsum)

export { fsum };

// ---------------------------------------------------------------------------------------------
// Agreement

/** Python math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-10). NaN never agrees; equal infinities do. */
export function metricsAgree(a: number, b: number): boolean {
  if (a === b) return true;
  if (!Number.isFinite(a) || !Number.isFinite(b)) return false;
  const diff = Math.abs(b - a);
  return diff <= Math.abs(1e-12 * b) || diff <= Math.abs(1e-12 * a) || diff <= 1e-10;
}

// ---------------------------------------------------------------------------------------------
// Helpers

function checkSameLength(a: ArrayLike<unknown>, b: ArrayLike<unknown>, what: string): void {
  if (a.length !== b.length) throw new RangeError(`${what}: lengths differ (${a.length} vs ${b.length})`);
}

function checkFinite(a: ArrayLike<Num>, what: string): void {
  for (let i = 0; i < a.length; i++) {
    if (!Number.isFinite(a[i]!)) throw new RangeError(`${what}: non-finite value at index ${i}`);
  }
}

/** Python round(x) for a finite double: round half to even. */
export function roundHalfEven(x: number): number {
  const f = Math.floor(x);
  const d = x - f; // exact for doubles
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

// ---------------------------------------------------------------------------------------------
// Classification

/**
 * Balanced accuracy (families.md 1(e)): for each class present in yTrue, the recall
 * (#rows of that class predicted as that class / #rows of that class); the mean of the recalls,
 * taken as fsum(recalls) / number of classes. Predicted labels absent from yTrue only count as
 * misses. Labels are compared with SameValueZero, so both arrays must use the same JS type for a
 * label (1 and 1n are different labels).
 */
export function balancedAccuracy(yTrue: ArrayLike<Label>, yPred: ArrayLike<Label>): number {
  checkSameLength(yTrue, yPred, 'balancedAccuracy');
  if (yTrue.length === 0) throw new RangeError('balancedAccuracy: empty input');
  const counts = new Map<Label, { total: number; hit: number }>();
  for (let i = 0; i < yTrue.length; i++) {
    const t = yTrue[i]!;
    let c = counts.get(t);
    if (c === undefined) {
      c = { total: 0, hit: 0 };
      counts.set(t, c);
    }
    c.total++;
    if (yPred[i] === t || (Number.isNaN(t) && Number.isNaN(yPred[i]))) c.hit++;
  }
  // The class order does not matter: fsum is exact, each recall is one correctly rounded division.
  const recalls = Array.from(counts.values(), (c) => c.hit / c.total);
  return fsum(recalls) / recalls.length;
}

// ---------------------------------------------------------------------------------------------
// Regression / forecasting / image

/**
 * Mean absolute error (families.md 2(e), 4(e)): fsum(|pred_i - truth_i|) / n, where truth is y_eval
 * (regression) or series[cut:] (forecasting) and pred the prediction of the same length.
 */
export function meanAbsoluteError(truth: ArrayLike<Num>, pred: ArrayLike<Num>): number {
  return meanOfPairTerms(truth, pred, 'meanAbsoluteError', false);
}

/**
 * Pixel RMSE (families.md 5(e)): sqrt(fsum((clean_i - pred_i)^2) / n) over the images flattened in
 * C (row-major) order; both arguments are the flattened H×W arrays.
 */
export function pixelRmse(clean: ArrayLike<Num>, pred: ArrayLike<Num>): number {
  return Math.sqrt(meanOfPairTerms(clean, pred, 'pixelRmse', true));
}

/** meanOfPairTerms' terms, kept between calls: an image's would be 0.5 MB of garbage a record. */
let pairTerms = new Float64Array(0);

/** fsum of (b_i − a_i)² (`squared`) or |b_i − a_i| over two equally long, finite, non-empty arrays, divided by their length. */
function meanOfPairTerms(a: ArrayLike<Num>, b: ArrayLike<Num>, what: string, squared: boolean): number {
  checkSameLength(a, b, what);
  if (a.length === 0) throw new RangeError(`${what}: empty input`);
  checkFinite(a, `${what} reference`);
  checkFinite(b, `${what} pred`);
  if (pairTerms.length < a.length) pairTerms = new Float64Array(a.length);
  const terms = pairTerms.subarray(0, a.length);
  for (let i = 0; i < a.length; i++) {
    const difference = b[i]! - a[i]!;
    terms[i] = squared ? difference * difference : Math.abs(difference);
  }
  return fsum(terms) / a.length;
}

// ---------------------------------------------------------------------------------------------
// Clustering

/**
 * Normalised mutual information with the arithmetic mean (families.md 3(e)):
 *   MI  = Σ over non-empty cells (n_ck/n)·ln(n_ck·n / (a_c·b_k))     (fsum, clipped at 0)
 *   H_y = -Σ_c (a_c/n)·ln(a_c/n),  H_p likewise for the clusters        (fsum)
 *   NMI = 2·MI / (H_y + H_p), or 1.0 when both entropies are 0 (both labelings constant; also for
 *   empty input, as sklearn does).
 * Labels are compared with SameValueZero (use one JS type per labeling).
 */
export function normalizedMutualInfo(labels: ArrayLike<Label>, clusters: ArrayLike<Label>): number {
  checkSameLength(labels, clusters, 'normalizedMutualInfo');
  const n = labels.length;
  const a = new Map<Label, number>();
  const b = new Map<Label, number>();
  const cells = new Map<Label, Map<Label, number>>();
  for (let i = 0; i < n; i++) {
    const c = labels[i]!;
    const k = clusters[i]!;
    a.set(c, (a.get(c) ?? 0) + 1);
    b.set(k, (b.get(k) ?? 0) + 1);
    let row = cells.get(c);
    if (row === undefined) {
      row = new Map();
      cells.set(c, row);
    }
    row.set(k, (row.get(k) ?? 0) + 1);
  }
  const entropy = (m: Map<Label, number>): number => {
    const terms: number[] = [];
    for (const cnt of m.values()) {
      const p = cnt / n;
      terms.push(-p * Math.log(p));
    }
    return fsum(terms);
  };
  const hy = entropy(a);
  const hp = entropy(b);
  if (hy === 0 && hp === 0) return 1.0;
  const terms: number[] = [];
  for (const [c, row] of cells) {
    const ac = a.get(c)!;
    for (const [k, nck] of row) {
      const bk = b.get(k)!;
      // Integer products are exact below 2^53 (n < ~9.5e7 observations).
      terms.push((nck / n) * Math.log((nck * n) / (ac * bk)));
    }
  }
  const mi = Math.max(0, fsum(terms));
  return (2 * mi) / (hy + hp);
}

// ---------------------------------------------------------------------------------------------
// Retrieval

/** A ranking or qrels keyed by query id: a plain object or a Map (a Map keeps insertion order). */
export type ByQuery<V> = Readonly<Record<string, V>> | ReadonlyMap<string, V>;

function entriesOf<V>(m: ByQuery<V>): [string, V][] {
  return m instanceof Map ? Array.from(m as ReadonlyMap<string, V>) : Object.entries(m as Record<string, V>);
}

/**
 * Mean NDCG@10 (families.md 6(e)).
 *   ranking: query id -> exactly 10 distinct doc ids in rank order (anything else throws, as the
 *            evaluator rejects it);
 *   qrels:   query id -> (doc id -> gain >= 0); a missing query or doc has gain 0.
 * Per query: DCG = fsum over ranks r = 0..9 of g(doc_r)/log2(r+2); IDCG = the same sum over the
 * query's qrels gains sorted descending (at most 10). Score = DCG/IDCG, and a query whose IDCG is 0
 * (no positive gain in the qrels) scores 0 — as sklearn's ndcg_score does, and as the replay's
 * dense-matrix computation therefore does. The result is the mean over the ranking's queries
 * (fsum / count). IDCG uses every qrels entry of the query, so qrels must only name documents of
 * the corpus (sklearn's dense matrix would silently drop the others).
 */
export function ndcgAt10(ranking: ByQuery<readonly string[]>, qrels: ByQuery<ByQuery<number>>): number {
  const K = 10;
  const qrelMap = new Map(entriesOf(qrels));
  const rows = entriesOf(ranking);
  if (rows.length === 0) throw new RangeError('ndcgAt10: no queries');
  const discount = (r: number): number => 1 / Math.log2(r + 2);
  const scores: number[] = [];
  for (const [qid, docs] of rows) {
    if (docs.length !== K || new Set(docs).size !== K) {
      throw new RangeError(`ndcgAt10: query ${qid} must rank exactly ${K} distinct documents`);
    }
    const gainsByDoc = new Map<string, number>();
    const q = qrelMap.get(qid);
    if (q !== undefined) {
      for (const [doc, g] of entriesOf(q)) {
        if (!Number.isFinite(g) || g < 0) throw new RangeError(`ndcgAt10: bad gain ${g} for ${qid}/${doc}`);
        gainsByDoc.set(doc, g);
      }
    }
    const dcg = fsum(docs.map((d, r) => (gainsByDoc.get(d) ?? 0) * discount(r)));
    const ideal = Array.from(gainsByDoc.values())
      .sort((x, y) => y - x)
      .slice(0, K);
    const idcg = fsum(ideal.map((g, r) => g * discount(r)));
    scores.push(idcg === 0 ? 0 : dcg / idcg);
  }
  return fsum(scores) / scores.length;
}

// ---------------------------------------------------------------------------------------------
// Beat detection

export interface EventCounts {
  true_positive: number;
  predicted_events: number;
  reference_events: number;
  precision: number;
  recall: number;
  f1: number;
}

export interface EventF1Result {
  /** Per tolerance in ms, keyed "50", "100", "150" as in the record. */
  tolerances: Record<'50' | '100' | '150', EventCounts>;
  /** F1 at 100 ms, the native value / utility. */
  native: number;
}

/**
 * Size of a maximum matching in the bipartite graph preds × refs with an edge when
 * |p - r| <= tol (Hopcroft–Karp). All positions and tol must be integers (sample indices).
 * Duplicated sample indices are distinct vertices.
 */
export function maxToleranceMatching(preds: ArrayLike<number>, refs: ArrayLike<number>, tol: number): number {
  const P = preds.length;
  const R = refs.length;
  for (const a of [preds, refs]) {
    for (let i = 0; i < a.length; i++) {
      if (!Number.isSafeInteger(a[i]!)) throw new RangeError('maxToleranceMatching: positions must be integers');
    }
  }
  if (!Number.isSafeInteger(tol)) throw new RangeError('maxToleranceMatching: tol must be an integer');
  if (P === 0 || R === 0) return 0;
  // Sort the reference indices by position; each prediction is adjacent to a contiguous run.
  const order = Array.from({ length: R }, (_, j) => j).sort((x, y) => refs[x]! - refs[y]!);
  const sorted = order.map((j) => refs[j]!);
  const lowerBound = (v: number): number => {
    let lo = 0;
    let hi = R;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (sorted[mid]! < v) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  // adjacency as [start, end) ranges into `sorted` (right vertices are sorted positions)
  const adjStart = new Int32Array(P);
  const adjEnd = new Int32Array(P);
  for (let i = 0; i < P; i++) {
    const p = preds[i]!;
    adjStart[i] = lowerBound(p - tol); // first ref >= p - tol
    adjEnd[i] = lowerBound(p + tol + 1); // first ref > p + tol (integer sample indices)
  }
  const NIL = -1;
  const matchL = new Int32Array(P).fill(NIL);
  const matchR = new Int32Array(R).fill(NIL);
  const dist = new Int32Array(P);
  const INF = 0x7fffffff;
  const queue = new Int32Array(P);

  const bfs = (): boolean => {
    let head = 0;
    let tail = 0;
    for (let u = 0; u < P; u++) {
      if (matchL[u] === NIL && adjStart[u]! < adjEnd[u]!) {
        dist[u] = 0;
        queue[tail++] = u;
      } else {
        dist[u] = INF;
      }
    }
    let found = false;
    while (head < tail) {
      const u = queue[head++]!;
      for (let v = adjStart[u]!; v < adjEnd[u]!; v++) {
        const w = matchR[v]!;
        if (w === NIL) found = true;
        else if (dist[w] === INF) {
          dist[w] = dist[u]! + 1;
          queue[tail++] = w;
        }
      }
    }
    return found;
  };

  // Iterative DFS along layered edges (avoids deep recursion on long signals). it[u] is u's
  // current-arc pointer for the phase: an edge that failed once is not tried again.
  const it = new Int32Array(P);
  const dfs = (root: number): boolean => {
    const stack: number[] = [root];
    while (stack.length > 0) {
      const u = stack[stack.length - 1]!;
      let advanced = false;
      while (it[u]! < adjEnd[u]!) {
        const v = it[u]!;
        it[u] = v + 1;
        const w = matchR[v]!;
        if (w === NIL) {
          // Augment along the stack: each stacked vertex takes the edge it was exploring.
          for (let s = stack.length - 1; s >= 0; s--) {
            const x = stack[s]!;
            const vx = it[x]! - 1;
            matchR[vx] = x;
            matchL[x] = vx;
          }
          return true;
        }
        if (dist[w] === dist[u]! + 1) {
          stack.push(w);
          advanced = true;
          break;
        }
      }
      if (!advanced) {
        dist[u] = INF; // dead end for this phase
        stack.pop();
      }
    }
    return false;
  };

  let matching = 0;
  while (bfs()) {
    it.set(adjStart);
    for (let u = 0; u < P; u++) {
      if (matchL[u] === NIL && dist[u] === 0 && dfs(u)) matching++;
    }
  }
  return matching;
}

/**
 * Event F1 (families.md 7(e), records.md 7).
 *   pred: predicted sample indices; ref: reference sample indices; n: number of samples of the
 *   signal; fs: sample rate in Hz.
 * References are restricted to fs <= e < n - fs (predictions are used as given). For each tolerance
 * T in {50, 100, 150} ms, tol = round_half_even(T·fs/1000) samples and TP = size of a maximum
 * one-to-one matching with |p - r| <= tol. precision = TP/#pred (0 if no predictions),
 * recall = TP/#ref (0 if no references), f1 = 2TP/(#pred + #ref) (1.0 if both are empty).
 * native = f1 at 100 ms.
 */
export function eventF1(pred: ArrayLike<number | bigint>, ref: ArrayLike<number | bigint>, n: number, fs: number): EventF1Result {
  const toNum = (a: ArrayLike<number | bigint>, what: string): number[] =>
    Array.from({ length: a.length }, (_, i) => {
      const x = Number(a[i]!);
      if (!Number.isSafeInteger(x)) throw new RangeError(`eventF1: ${what}[${i}] is not an integer sample index`);
      return x;
    });
  const preds = toNum(pred, 'pred');
  const refs = toNum(ref, 'ref').filter((e) => fs <= e && e < n - fs);
  const tolerances = {} as Record<'50' | '100' | '150', EventCounts>;
  for (const T of [50, 100, 150] as const) {
    const tol = roundHalfEven((T * fs) / 1000);
    const tp = maxToleranceMatching(preds, refs, tol);
    const np = preds.length;
    const nr = refs.length;
    tolerances[String(T) as '50' | '100' | '150'] = {
      true_positive: tp,
      predicted_events: np,
      reference_events: nr,
      precision: np > 0 ? tp / np : 0,
      recall: nr > 0 ? tp / nr : 0,
      f1: np + nr > 0 ? (2 * tp) / (np + nr) : 1.0,
    };
  }
  return { tolerances, native: tolerances['100'].f1 };
}

// ---------------------------------------------------------------------------------------------
// Graph link prediction

/**
 * ROC AUC as pairwise concordance (families.md 8(e)): the mean over all (positive, negative) pairs
 * of [s_pos > s_neg] + 0.5·[s_pos = s_neg]. labels are 0/1 (or booleans), scores finite.
 * O(n log n): sort by score, walk tie groups, count 2·(concordant) + (tied) pairs as an integer and
 * divide once by 2·P·N, so the result is the correctly rounded exact ratio. Throws if a class is
 * missing (the mean over no pairs is undefined; sklearn raises too).
 */
export function rocAucConcordance(labels: ArrayLike<number | boolean>, scores: ArrayLike<number>): number {
  checkSameLength(labels, scores, 'rocAucConcordance');
  checkFinite(scores, 'rocAucConcordance scores');
  const n = labels.length;
  const isPos = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    const l = labels[i];
    if (l === 1 || l === true) isPos[i] = 1;
    else if (l !== 0 && l !== false) throw new RangeError(`rocAucConcordance: label ${String(l)} at ${i} is not 0/1`);
  }
  const order = Array.from({ length: n }, (_, i) => i).sort((x, y) => scores[x]! - scores[y]!);
  let negBelow = 0; // negatives with a strictly smaller score than the current tie group
  let twice = 0; // 2·concordant + tied pairs
  let P = 0;
  let N = 0;
  for (let g = 0; g < n; ) {
    const s = scores[order[g]!]!;
    let end = g;
    let pos = 0;
    let neg = 0;
    while (end < n && scores[order[end]!]! === s) {
      if (isPos[order[end]!]) pos++;
      else neg++;
      end++;
    }
    twice += 2 * pos * negBelow + pos * neg;
    negBelow += neg;
    P += pos;
    N += neg;
    g = end;
  }
  if (P === 0 || N === 0) throw new RangeError('rocAucConcordance: need at least one positive and one negative');
  const denom = 2 * P * N;
  if (!Number.isSafeInteger(twice) || !Number.isSafeInteger(denom)) {
    throw new RangeError('rocAucConcordance: too many pairs for exact integer counting');
  }
  return twice / denom;
}
