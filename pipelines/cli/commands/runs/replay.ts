import { join } from 'node:path';
import { UserError } from '../../../core/errors.ts';
import { ROOT } from '../../../core/paths.ts';
import type { ReplayReport } from '../../../jobs/replay.ts';
import { defineCommand } from '../../command.ts';
import { executorChoice, list, withExecutor, withTables, withWorkers } from '../../options.ts';
import { outputPath } from '../../output-path.ts';

function reportLines(report: ReplayReport, reportPath: string): string[] {
  const lines: string[] = [];
  for (const c of report.conditions) {
    const ratio = c.median_timing_ratio === null ? '-' : `${c.median_timing_ratio.toFixed(2)}x`;
    lines.push(`${c.condition.padEnd(22)} ${c.passed}/${c.total} passed  timing ${ratio}${c.slowed ? '  SLOWED' : ''}`);
  }
  for (const r of report.records.filter((x) => !x.passed)) {
    lines.push(
      `FAILED ${r.condition} ${r.mask}: ` +
        `${r.failures.map((f) => `${f.check} (expected ${JSON.stringify(f.expected)}, got ${JSON.stringify(f.actual)})`).join('; ')}`,
    );
  }
  for (const v of report.equivalence_violations) lines.push(`EQUIVALENCE VIOLATED ${v}`);
  if (report.version_drift.length) lines.push(`version drift (tolerances used): ${report.version_drift.join('; ')}`);
  if (report.platform_drift.length) lines.push(`platform drift (tolerances used): ${report.platform_drift.join('; ')}`);
  if (report.provenance?.other_generator)
    lines.push(`the manifest was written by ${report.provenance.other_generator}, not by this wwref (its claims are checked as any other)`);
  lines.push(
    `${report.conditions.filter((c) => c.passed === c.total).length}/${report.conditions.length} conditions passed, ` +
      `${report.passed}/${report.total} records; wall ${report.wall_seconds.toFixed(1)} s (start-up ${report.startup_seconds.toFixed(1)} s); ` +
      `native ${report.replayed_native_seconds.toFixed(1)} s replayed vs ${report.recorded_native_seconds.toFixed(1)} s recorded; ` +
      `median timing ratio ${report.median_timing_ratio?.toFixed(2) ?? '-'}; ${report.timing_outliers.length} timing outlier(s); ` +
      `${report.workers} worker(s); report ${reportPath}`,
  );
  return lines;
}

export default defineCommand({
  command: 'replay',
  describe:
    'cold-replay reference tables (one thread per worker, fresh workers per condition); verify hashes, utilities, metrics, warnings, timings',
  builder: (y) =>
    withExecutor(withWorkers(withTables(y), 1))
      .option('report', { type: 'string', default: join(ROOT, 'outputs', 'reports', 'replay.json'), describe: 'JSON report path' })
      .option('format', {
        choices: ['wwref', 'wwb'] as const,
        default: 'wwref' as const,
        describe: 'reference layout: ours, or a published WhatWorkedBench pack (--references PACK)',
      })
      .option('allow-version-drift', {
        type: 'boolean',
        default: false,
        describe: 'compare with tolerances when installed versions differ from the manifest',
      })
      .option('allow-platform-drift', {
        type: 'boolean',
        default: false,
        describe: 'compare with tolerances when the references were built under another numerical profile or platform',
      }),
  // a pack replayed with --format wwb is no reference folder: the catalog stays the default one
  ownReferences: (argv) => argv.format === 'wwb',
  run: async (argv, { settings, out }) => {
    const reportPath = outputPath(settings, argv.report, 'report');
    const options = {
      settings,
      conditions: list(argv.condition, 'condition'),
      allowVersionDrift: argv.allowVersionDrift,
      allowPlatformDrift: argv.allowPlatformDrift,
      workers: argv.workers,
      executor: executorChoice(argv),
      report: reportPath,
    };
    const { replay, replayTargets, writeReplayReport } = await import('../../../jobs/replay.ts');
    let report: ReplayReport;
    if (argv.format === 'wwb') {
      if (!argv.references) throw new UserError('--format wwb needs --references PACK (the folder holding references/ and inputs/)');
      const { readPack } = await import('../../../jobs/wwb.ts');
      const { loadCatalog } = await import('../../../references/store.ts');
      const pack = readPack(argv.references, options.conditions);
      // Conditions of our catalog carry their declared equivalences into the pack's replay.
      const catalog = loadCatalog(settings);
      const targets = pack.targets.map((t) => {
        const known = catalog.conditions.get(t.condition);
        return known ? { ...t, equivalences: known.condition.equivalences, pairedWith: known.condition.paired_with } : t;
      });
      report = await replayTargets(targets, pack.expected, options);
    } else {
      // prepared inputs that are missing are made first and checked against the manifest
      const { replayNeeds } = await import('../../../jobs/audit.ts');
      const { prepareMissing } = await import('../../../sources/prepare.ts');
      await prepareMissing(replayNeeds(settings, settings.paths.references, options.conditions), { settings, log: (line) => out(line) });
      report = await replay(options);
    }
    writeReplayReport(settings, reportPath, report);
    for (const line of reportLines(report, argv.report)) out(line);
    return report.all_passed ? 0 : 1;
  },
});
