// Progress on the terminal: done/total, rate, ETA and the conditions still running. On a TTY the line
// is redrawn in place; otherwise a line is printed every 5 % (CI logs stay short).

/** Finished records before any ETA is given: 1 % of the run, at least 10 (or all of a smaller run). */
export function etaThreshold(total: number): number {
  return Math.min(total, Math.max(10, Math.ceil(total * 0.01)));
}

/**
 * Seconds left of a run whose records cost different amounts: each condition's records are weighted
 * by their expected seconds per record (from earlier references, or the family's estimate), and the
 * expected work still to do is divided by the rate at which expected work has been done so far. A
 * count of records would not do: the costly records run first, so an early records-per-second rate
 * says a 2.5-minute rebuild takes 22 minutes. No estimate until etaThreshold(total) records finished.
 */
export class EtaEstimator {
  private readonly cost = new Map<string, number | undefined>();
  private readonly left = new Map<string, number>();
  private finished = 0;
  private workDone = 0;

  constructor(
    private readonly total: number,
    /** Seconds (any clock) when the work started. */
    private readonly start: number,
  ) {}

  /** `records` records of `condition` will run, each expected to take `secondsPerRecord` (unknown: the mean of the known ones). */
  expect(condition: string, records: number, secondsPerRecord?: number): void {
    this.left.set(condition, (this.left.get(condition) ?? 0) + records);
    this.cost.set(
      condition,
      secondsPerRecord !== undefined && Number.isFinite(secondsPerRecord) && secondsPerRecord > 0 ? secondsPerRecord : undefined,
    );
  }

  /** One record of `condition` finished. */
  finish(condition: string): void {
    this.finished++;
    this.workDone += this.costOf(condition);
    this.left.set(condition, Math.max(0, (this.left.get(condition) ?? 1) - 1));
  }

  /** Seconds left at time `now` (same clock as start), or undefined while too few records have finished. */
  secondsLeft(now: number): number | undefined {
    if (this.finished < etaThreshold(this.total) || this.workDone <= 0) return undefined;
    const rate = this.workDone / Math.max(now - this.start, 1e-9);
    let workLeft = 0;
    for (const [condition, records] of this.left) workLeft += records * this.costOf(condition);
    return workLeft / rate;
  }

  private costOf(condition: string): number {
    const known = [...this.cost.values()].filter((c): c is number => c !== undefined);
    return this.cost.get(condition) ?? (known.length ? known.reduce((a, b) => a + b, 0) / known.length : 1);
  }
}

export class Progress {
  private done = 0;
  private failed = 0;
  private readonly started = Date.now();
  private lastPrinted = -1;
  private readonly remaining = new Map<string, number>();
  private readonly tty = Boolean(process.stderr.isTTY);
  private readonly eta: EtaEstimator;

  constructor(
    private readonly label: string,
    private readonly total: number,
    private readonly quiet = false,
  ) {
    this.eta = new EtaEstimator(total, this.started / 1000);
  }

  /** `records` records of `condition` will run, each expected to take about `secondsPerRecord`. */
  expect(condition: string, records: number, secondsPerRecord?: number): void {
    if (records > 0) this.remaining.set(condition, records);
    this.eta.expect(condition, records, secondsPerRecord);
  }

  tick(condition: string, ok: boolean): void {
    this.done++;
    if (!ok) this.failed++;
    this.eta.finish(condition);
    const left = (this.remaining.get(condition) ?? 1) - 1;
    if (left <= 0) this.remaining.delete(condition);
    else this.remaining.set(condition, left);
    this.print();
  }

  line(): string {
    const seconds = (Date.now() - this.started) / 1000;
    const rate = this.done / Math.max(seconds, 1e-9);
    const eta = this.eta.secondsLeft(Date.now() / 1000);
    const running = [...this.remaining.keys()].slice(0, 3).join(', ');
    return (
      `[${this.label}] ${this.done}/${this.total} records` +
      (this.failed ? ` (${this.failed} failed)` : '') +
      `, ${rate.toFixed(2)}/s, ETA ${eta === undefined ? `after ${etaThreshold(this.total)} records` : formatSeconds(eta)}` +
      (running ? ` | ${running}${this.remaining.size > 3 ? ', …' : ''}` : '')
    );
  }

  private print(): void {
    if (this.quiet) return;
    if (this.tty) {
      process.stderr.write(`\r\x1b[2K${this.line()}`);
      if (this.done === this.total) process.stderr.write('\n');
      return;
    }
    const step = Math.floor((this.done / Math.max(this.total, 1)) * 20);
    if (step !== this.lastPrinted || this.done === this.total) {
      this.lastPrinted = step;
      process.stderr.write(`${this.line()}\n`);
    }
  }
}

export function formatSeconds(seconds: number): string {
  if (!Number.isFinite(seconds)) return '?';
  if (seconds < 60) return `${seconds.toFixed(0)}s`;
  const m = Math.floor(seconds / 60);
  if (m < 60) return `${m}m${String(Math.round(seconds % 60)).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}
