// Progress on the terminal: done/total, rate, ETA and the conditions still running. On a TTY the line
// is redrawn in place; otherwise a line is printed every 5 % (CI logs stay short).
export class Progress {
  private done = 0;
  private failed = 0;
  private readonly started = Date.now();
  private lastPrinted = -1;
  private readonly remaining = new Map<string, number>();
  private readonly tty = Boolean(process.stderr.isTTY);

  constructor(
    private readonly label: string,
    private readonly total: number,
    private readonly quiet = false,
  ) {}

  expect(condition: string, records: number): void {
    if (records > 0) this.remaining.set(condition, records);
  }

  tick(condition: string, ok: boolean): void {
    this.done++;
    if (!ok) this.failed++;
    const left = (this.remaining.get(condition) ?? 1) - 1;
    if (left <= 0) this.remaining.delete(condition);
    else this.remaining.set(condition, left);
    this.print();
  }

  line(): string {
    const seconds = (Date.now() - this.started) / 1000;
    const rate = this.done / Math.max(seconds, 1e-9);
    const eta = rate > 0 ? (this.total - this.done) / rate : Infinity;
    const running = [...this.remaining.keys()].slice(0, 3).join(', ');
    return (
      `[${this.label}] ${this.done}/${this.total} records` +
      (this.failed ? ` (${this.failed} failed)` : '') +
      `, ${rate.toFixed(2)}/s, ETA ${formatSeconds(eta)}` +
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
