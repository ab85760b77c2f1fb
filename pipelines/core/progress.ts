// Progress on the terminal: done/total, time elapsed, rate, ETA, the conditions left and the last one
// a record finished for. On a TTY the line
// is redrawn as records finish and every second; in a log (not a TTY) a line is printed every 5 % of
// the records and at least every 10 s while work goes on, so a long record never looks like a hang.

/** Finished records before any ETA is given: 1 % of the run, at least 10 (or all of a smaller run). */
export function etaThreshold(total: number): number {
  return Math.min(total, Math.max(10, Math.ceil(total * 0.01)));
}

/** A log line at least this often while work goes on. */
export const LOG_EVERY_SECONDS = 10;

interface ConditionWork {
  left: number;
  /** Expected seconds per record (the references'), if known. */
  expected?: number;
  /** Finished records that reported their computation seconds, and the sum of those seconds. */
  measured: number;
  nativeSeconds: number;
}

/** The recent records the machine's speed and the orchestration per record are measured on. */
export const ETA_WINDOW = 200;
/** A condition's own measured mean counts as this many records against its expected cost: a few records on a busy machine say little. */
const PRIOR_RECORDS = 8;
/** The window is cut into this many runs of consecutive records to fit the orchestration on. */
const ORCHESTRATION_PARTS = 8;

/**
 * Seconds left of a run whose records cost different amounts, on `workers` workers. Each unfinished
 * record costs its computation plus the orchestration around it (sending, hashing, verifying,
 * journaling), and the workers share the sum:
 *   left = Σ over unfinished records (computation + overhead) / workers.
 * A record's computation is its seconds in the references times how much slower this machine is now
 * (the computation of the last ETA_WINDOW finished records against their references' seconds),
 * drawn towards its condition's measured mean as that condition's records finish. The overhead of a
 * record is measured on the same records: the worker time they took (workers × the time they took to
 * finish) less their computation, as a cost per record plus a cost per second of expected computation
 * (a larger data set costs more to send, hash and verify), fitted on consecutive parts of the window;
 * a single mean per record made the small records at the end of a rebuild cost what the larger ones
 * before them had. Both follow the machine: the retrieval records that run first say little about the
 * 1,100 records of a few milliseconds that follow (whose orchestration costs as much as their
 * computation), and a shared machine's load changes. A run whose records report no
 * computation seconds falls back to the rate at which expected work was done. No estimate until
 * etaThreshold(total) records finished; between two finished records the estimate counts down.
 */
export class EtaEstimator {
  private readonly conditions = new Map<string, ConditionWork>();
  private finished = 0;
  private last: number;
  /** The last ETA_WINDOW finished records that reported their computation: when, computation, expected seconds. */
  private readonly recent: { at: number; native: number; expected: number }[] = [];
  /** When the record before the window finished (the window's start). */
  private windowStart: number;
  /** Expected seconds of every finished record (the fallback's rate). */
  private expectedDone = 0;

  constructor(
    private readonly total: number,
    /** Seconds (any clock) when the work started. */
    private readonly start: number,
    private readonly workers = 1,
  ) {
    this.last = start;
    this.windowStart = start;
  }

  /** `records` records of `condition` will run, each expected to take `secondsPerRecord` (unknown: the mean of the known ones). */
  expect(condition: string, records: number, secondsPerRecord?: number): void {
    const known = secondsPerRecord !== undefined && Number.isFinite(secondsPerRecord) && secondsPerRecord > 0;
    const work = this.conditions.get(condition) ?? { left: 0, measured: 0, nativeSeconds: 0 };
    work.left += records;
    work.expected = known ? secondsPerRecord : undefined;
    this.conditions.set(condition, work);
  }

  /** One record of `condition` finished at `at` (same clock as start), having computed for `nativeSeconds` (unknown for a failed one). */
  finish(condition: string, at?: number, nativeSeconds?: number | null): void {
    const work = this.conditions.get(condition) ?? { left: 1, measured: 0, nativeSeconds: 0 };
    this.conditions.set(condition, work);
    work.left = Math.max(0, work.left - 1);
    this.finished++;
    this.expectedDone += this.expectedOf(work);
    if (at !== undefined) this.last = Math.max(this.last, at);
    if (typeof nativeSeconds === 'number' && Number.isFinite(nativeSeconds) && nativeSeconds >= 0) {
      work.measured++;
      work.nativeSeconds += nativeSeconds;
      this.recent.push({ at: this.last, native: nativeSeconds, expected: this.expectedOf(work) });
      if (this.recent.length > ETA_WINDOW) this.windowStart = this.recent.shift()!.at;
    }
  }

  /** Seconds left at time `now` (same clock as start), or undefined while too few records have finished. */
  secondsLeft(now: number): number | undefined {
    if (this.finished < etaThreshold(this.total)) return undefined;
    const left = [...this.conditions.values()].filter((w) => w.left > 0);
    if (!left.length) return 0;
    if (!this.recent.length) {
      if (this.expectedDone <= 0) return undefined;
      const rate = this.expectedDone / Math.max(now - this.start, 1e-9);
      return left.reduce((sum, w) => sum + w.left * this.expectedOf(w), 0) / rate;
    }
    const last = Math.min(this.last, now);
    const native = this.recent.reduce((sum, r) => sum + r.native, 0);
    const expected = this.recent.reduce((sum, r) => sum + r.expected, 0);
    const scale = native > 0 && expected > 0 ? native / expected : 1;
    const overhead = this.orchestration(last, native);
    let work = 0;
    let orchestration = 0;
    for (const w of left) {
      const expected = this.expectedOf(w);
      const computation = (w.nativeSeconds + PRIOR_RECORDS * expected * scale) / (w.measured + PRIOR_RECORDS);
      const around = overhead.perRecord + overhead.perExpectedSecond * expected;
      work += w.left * (computation + around);
      orchestration += w.left * around;
    }
    // counted down since the last record finished, never below the orchestration of what is left
    return Math.max(work / this.workers - (now - last), orchestration / this.workers);
  }

  /**
   * The workers' time around a record's computation as perRecord + perExpectedSecond × its expected
   * seconds: least squares over ORCHESTRATION_PARTS runs of the window (each run's worker time less
   * its computation, against its records and their expected seconds), neither part negative. The mean
   * per record alone when the window is too short to cut or its records do not tell the two apart.
   * `native`: the window's computation seconds.
   */
  private orchestration(last: number, native: number): { perRecord: number; perExpectedSecond: number } {
    const n = this.recent.length;
    const mean = { perRecord: Math.max(0, (this.workers * (last - this.windowStart) - native) / n), perExpectedSecond: 0 };
    const size = Math.floor(n / ORCHESTRATION_PARTS);
    if (size < 5) return mean;
    // normal equations of y = a·records + b·expected over the parts
    let [rr, re, ee, ry, ey] = [0, 0, 0, 0, 0];
    let start = this.windowStart;
    for (let k = 0; k < ORCHESTRATION_PARTS; k++) {
      const part = this.recent.slice(k * size, k === ORCHESTRATION_PARTS - 1 ? n : (k + 1) * size);
      const end = part.at(-1)!.at;
      const y = this.workers * (end - start) - part.reduce((sum, r) => sum + r.native, 0);
      const records = part.length;
      const expected = part.reduce((sum, r) => sum + r.expected, 0);
      [rr, re, ee, ry, ey] = [
        rr + records * records,
        re + records * expected,
        ee + expected * expected,
        ry + records * y,
        ey + expected * y,
      ];
      start = end;
    }
    const det = rr * ee - re * re;
    if (!(det > 1e-12 * rr * ee)) return mean;
    const a = (ry * ee - ey * re) / det;
    const b = (rr * ey - re * ry) / det;
    if (b < 0) return mean;
    if (a < 0) return { perRecord: 0, perExpectedSecond: Math.max(0, ey / ee) };
    return { perRecord: a, perExpectedSecond: b };
  }

  /** A condition's expected seconds per record: its own, else the mean of the known ones, else 1. */
  private expectedOf(work: ConditionWork): number {
    if (work.expected !== undefined) return work.expected;
    const known = [...this.conditions.values()].flatMap((w) => (w.expected === undefined ? [] : [w.expected]));
    return known.length ? known.reduce((a, b) => a + b, 0) / known.length : 1;
  }
}

/** When each record finished, for the run's report: seconds since the work started, its condition, its computation seconds. */
export interface ProgressTimeline {
  workers: number;
  /** Expected seconds per record of each condition (null: unknown) and its records, as the ETA was told. */
  expected: Record<string, { records: number; seconds_per_record: number | null }>;
  /** [seconds since start, condition, computation seconds or null], in the order the records finished. */
  finished: [number, string, number | null][];
}

export class Progress {
  private done = 0;
  private failed = 0;
  private readonly started = Date.now();
  private lastStep = -1;
  private lastLine = Date.now();
  private readonly remaining = new Map<string, number>();
  private lastCondition?: string;
  private readonly tty = Boolean(process.stderr.isTTY);
  private readonly eta: EtaEstimator;
  private readonly record: ProgressTimeline;
  private timer?: NodeJS.Timeout;

  private readonly quiet: boolean;
  private readonly logEvery: number;
  private readonly unit: string;

  constructor(
    private readonly label: string,
    private readonly total: number,
    options: { quiet?: boolean; workers?: number; logEverySeconds?: number; unit?: string } = {},
  ) {
    this.unit = options.unit ?? 'records';
    const workers = options.workers ?? 1;
    this.quiet = options.quiet ?? false;
    this.logEvery = options.logEverySeconds ?? LOG_EVERY_SECONDS;
    this.eta = new EtaEstimator(total, this.started / 1000, workers);
    this.record = { workers, expected: {}, finished: [] };
    if (!this.quiet && total > 0) {
      // a line while a long record runs: redrawn every second on a terminal, every logEvery seconds in a log
      this.timer = setInterval(() => this.print(true), Math.min(1, this.logEvery) * 1000);
      this.timer.unref();
    }
  }

  /** `records` records of `condition` will run, each expected to take about `secondsPerRecord`. */
  expect(condition: string, records: number, secondsPerRecord?: number): void {
    if (records > 0) this.remaining.set(condition, records);
    this.eta.expect(condition, records, secondsPerRecord);
    this.record.expected[condition] = { records, seconds_per_record: secondsPerRecord ?? null };
  }

  /** One record of `condition` finished; `nativeSeconds`: its computation (null or absent for a failed record). */
  tick(condition: string, ok: boolean, nativeSeconds?: number | null): void {
    const now = Date.now();
    this.done++;
    if (!ok) this.failed++;
    this.eta.finish(condition, now / 1000, nativeSeconds);
    this.lastCondition = condition;
    this.record.finished.push([Math.round(now - this.started) / 1000, condition, nativeSeconds ?? null]);
    const left = (this.remaining.get(condition) ?? 1) - 1;
    if (left <= 0) this.remaining.delete(condition);
    else this.remaining.set(condition, left);
    this.print(false);
    if (this.done >= this.total) this.stop();
  }

  /** Stops the periodic line (the run ended, or stopped). */
  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** What finished when, for the run's report. */
  timeline(): ProgressTimeline {
    return this.record;
  }

  line(): string {
    const seconds = (Date.now() - this.started) / 1000;
    const rate = this.done / Math.max(seconds, 1e-9);
    const eta = this.eta.secondsLeft(Date.now() / 1000);
    return (
      `[${this.label}] ${this.done}/${this.total} ${this.unit}` +
      (this.failed ? ` (${this.failed} failed)` : '') +
      `, ${formatSeconds(seconds)} elapsed, ${rate.toFixed(2)}/s, ${eta === undefined ? `no ETA before ${etaThreshold(this.total)} ${this.unit} are done` : `ETA ${formatEta(eta)}`}` +
      (this.remaining.size ? ` | ${this.remaining.size} condition(s) left` : '') +
      (this.lastCondition && this.done < this.total ? `, last finished: ${this.lastCondition}` : '')
    );
  }

  /** `timed`: called by the timer, not by a finished record. */
  private print(timed: boolean): void {
    if (this.quiet) return;
    if (this.tty) {
      process.stderr.write(`\r\x1b[2K${this.line()}`);
      if (this.done === this.total) process.stderr.write('\n');
      return;
    }
    const step = Math.floor((this.done / Math.max(this.total, 1)) * 20);
    const due = Date.now() - this.lastLine >= this.logEvery * 1000;
    if ((!timed && (step !== this.lastStep || this.done === this.total)) || (timed && due)) {
      this.lastStep = step;
      this.lastLine = Date.now();
      process.stderr.write(`${this.line()}\n`);
    }
  }
}

/**
 * An ETA as a line shows it: tenths of a second under 10 s (the last seconds of a run, where a whole
 * second is most of what is left), '<1s' under one second, else as formatSeconds.
 */
export function formatEta(seconds: number): string {
  if (seconds === 0) return '0s';
  if (seconds < 1) return '<1s';
  if (seconds < 10) return `${seconds.toFixed(1)}s`;
  return formatSeconds(seconds);
}

export function formatSeconds(seconds: number): string {
  if (!Number.isFinite(seconds)) return '?';
  if (seconds < 60) return `${seconds.toFixed(0)}s`;
  const m = Math.floor(seconds / 60);
  if (m < 60) return `${m}m${String(Math.round(seconds % 60)).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}
