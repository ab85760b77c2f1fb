import { join } from 'node:path';
import { writeJsonAtomic } from '../../../core/fsutil.ts';
import { formatSeconds } from '../../../core/progress.ts';
import type { RebuildSummary } from '../../../jobs/rebuild.ts';
import { defineCommand } from '../../command.ts';
import { executorChoice, list, withExecutor, withMirror, withReferences, withWorkers } from '../../options.ts';
import { outputPath } from '../../output-path.ts';

function summaryLines(summary: RebuildSummary, reportPath: string): string[] {
  const lines: string[] = [];
  for (const c of summary.conditions) {
    const status = c.error ? `NOT BUILT: ${c.error}` : `${c.records - c.failed}/${c.records} ok`;
    lines.push(`${c.condition.padEnd(22)} ${status}${c.violations.length ? `  ${c.violations.length} equivalence violation(s)` : ''}`);
    for (const v of c.violations) lines.push(`    ${v}`);
    for (const f of c.failures.slice(0, 5)) lines.push(`    FAILED ${f.mask}: ${f.error}`);
    if (c.failures.length)
      lines.push('    table and manifest entry left as they were; finished records kept in the journal (the same command resumes)');
  }
  const kept = summary.conditions.filter((c) => c.kept).length;
  if (kept)
    lines.push(
      `${kept} condition(s) reproduced, kept: their tables and manifest entries are unchanged (this run's timings are in ${reportPath})`,
    );
  lines.push(
    `${summary.records} records in ${summary.conditions.filter((c) => !c.error).length} tables ` +
      `(${summary.failed} failed, ${summary.resumed} resumed from the journal); ` +
      `wall ${formatSeconds(summary.wallSeconds)}, native ${summary.nativeSeconds.toFixed(1)} s, ${summary.workers} worker(s)`,
  );
  return lines;
}

export default defineCommand({
  command: 'rebuild',
  describe: 'execute every configuration and write outputs/references/<condition>.arrow and manifest.json',
  builder: (y) =>
    withExecutor(withWorkers(withMirror(withReferences(y))))
      .option('condition', { type: 'string', array: true, describe: 'condition(s); default the whole catalog' })
      .option('fresh', { type: 'boolean', default: false, describe: 'ignore journals of interrupted runs' })
      .option('reuse-shared-stage', {
        type: 'boolean',
        default: false,
        describe: 'reuse expensive per-input stages across masks (retrieval term counts); bit-identical to the cold path',
      })
      .option('allow-version-drift', { type: 'boolean', default: false, describe: 'run even if installed versions differ from the pins' })
      .option('force', {
        type: 'boolean',
        default: false,
        describe:
          'rebuild conditions whose plan changed since their references were written (the old plan hashes are recorded as superseded)',
      })
      .option('report', {
        type: 'string',
        describe: "JSON run report: every condition's outcome and this run's timings (default outputs/cache/runs/rebuild.json)",
      }),
  run: async (argv, { settings, out }) => {
    const reportPath =
      argv.report === undefined ? join(settings.paths.cache, 'runs', 'rebuild.json') : outputPath(settings, argv.report, 'report');
    const { rebuild } = await import('../../../jobs/rebuild.ts');
    const { loadCatalog } = await import('../../../references/store.ts');
    const summary = await rebuild(loadCatalog(settings), {
      settings,
      force: argv.force,
      conditions: list(argv.condition, 'condition'),
      workers: argv.workers,
      fresh: argv.fresh,
      allowVersionDrift: argv.allowVersionDrift,
      reuseSharedStage: argv.reuseSharedStage,
      executor: executorChoice(argv),
      report: reportPath,
    });
    writeJsonAtomic(reportPath, summary);
    for (const line of summaryLines(summary, reportPath)) out(line);
    return summary.failed || summary.conditions.some((c) => c.error || c.violations.length) ? 1 : 0;
  },
});
