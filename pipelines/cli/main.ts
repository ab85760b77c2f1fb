// The wwref command line. Every stage lives in its own module; this file only parses arguments,
// calls the stage and prints its summary. A UserError is printed as a message, never a stack.
import { availableParallelism } from 'node:os';
import yargs, { type Argv } from 'yargs';
import { hideBin } from 'yargs/helpers';
import { acquirePlan } from '../sources/acquire.ts';
import { auditFailed, auditNeeds, auditWithReprepare, replayNeeds } from '../jobs/audit.ts';
import { checkReferenceFolder, loadCatalog, ReferenceStore } from '../references/store.ts';
import { familyLines, FAMILY_NAMES } from '../catalog/families.ts';
import { UserError } from '../core/errors.ts';
import { exportCsv } from '../references/export.ts';
import { prepareMissing, prepareSources } from '../sources/prepare.ts';
import { formatSeconds } from '../core/progress.ts';
import { rebuild } from '../jobs/rebuild.ts';
import { replay, replayTargets, writeReplayReport } from '../jobs/replay.ts';
import { exportPack, readPack } from '../jobs/wwb.ts';
import { dirname, join, resolve } from 'node:path';
import { existsSync } from 'node:fs';
import { cacheDir, referencesDir, ROOT, useRuntime } from '../core/paths.ts';
import { checkOutputPath } from '../core/containment.ts';
import { readConfig } from '../core/config.ts';
import { writeJsonAtomic } from '../core/fsutil.ts';
import { EXECUTOR_KINDS, type ExecutorChoice, type ExecutorKind } from '../execution/executors.ts';
import { activeProfile } from '../execution/numerics.ts';
import { checkRuntimeTarget } from '../execution/identity.ts';

const out = (line = '') => process.stdout.write(`${line}\n`);
/** The values of a repeatable option; an empty one (`--condition=`) is a mistake, not "everything". */
function list(value: unknown, flag = 'this option'): string[] {
  const values = value === undefined ? [] : (Array.isArray(value) ? value : [value]).map(String);
  if (values.some((v) => v.trim() === '')) throw new UserError(`--${flag} needs a value (leave the option out to select everything)`);
  return values;
}

/** An output path given by the user (core/containment.ts checkOutputPath), named by its flag. */
function outputPath(path: string, flag: string, kind: 'file' | 'folder' = 'file', inSources = false): string {
  return checkOutputPath(path, `--${flag}`, { kind, inSources });
}

/** Hard ceiling on worker processes, whatever --workers-max says. */
const WORKERS_CEILING = 256;

function withMirror<T>(y: Argv<T>) {
  return y.option('mirror', { type: 'string', array: true, describe: 'mirror directory of raw files (repeatable; tried before WWREF_MIRROR and wwref.config.json)' });
}
/** --references: the reference folder a command reads (and rebuild writes); WWREF_REFERENCES_DIR is the default. */
function withReferences<T>(y: Argv<T>) {
  return y.option('references', { type: 'string', describe: 'reference folder (default WWREF_REFERENCES_DIR or outputs/references)' });
}
/** --condition (several) and --references, for the commands that read reference tables. */
function withTables<T>(y: Argv<T>) {
  return withReferences(y.option('condition', { type: 'string', array: true, describe: 'condition(s); default every table in the manifest' }));
}
function withWorkers<T>(y: Argv<T>, byDefault = availableParallelism()) {
  return y
    .option('workers', { type: 'number', default: byDefault, describe: 'Python worker processes, one computation thread each (at most the number of cores, unless --workers-max)' })
    .option('workers-max', { type: 'number', describe: `allow up to this many workers (at most ${WORKERS_CEILING})` });
}

/** --runtime: the named Python runtime of wwref.config.json that executes records (default `pinned`). */
function withRuntime<T>(y: Argv<T>) {
  return y.option('runtime', { type: 'string', describe: "Python runtime of wwref.config.json that executes the records (default 'pinned'; another is created in .venv-NAME on first use)" });
}

/** --executor and --scheduler, for the commands that execute records. */
function withExecutor<T>(y: Argv<T>) {
  return withRuntime(y)
    .option('executor', { choices: EXECUTOR_KINDS, default: 'local' as const, describe: 'local: worker processes here; dask: the workers of a Dask scheduler (--scheduler); dask-local: a Dask cluster of --workers processes started here for the job' })
    .option('scheduler', { type: 'string', describe: 'Dask scheduler address for --executor dask, e.g. tcp://10.0.0.5:8786' });
}

function executorChoice(argv: { executor: ExecutorKind; scheduler?: string }): ExecutorChoice {
  if (argv.scheduler !== undefined && argv.executor !== 'dask') throw new UserError('--scheduler is for --executor dask');
  if (argv.executor === 'dask' && !argv.scheduler) throw new UserError('--executor dask needs --scheduler ADDRESS (e.g. tcp://10.0.0.5:8786)');
  return { kind: argv.executor, scheduler: argv.scheduler };
}

async function main(args: string[]): Promise<number> {
  let exitCode = 0;
  readConfig(ROOT); // a malformed wwref.config.json is reported by every command, not only by those that read it

  await yargs(args)
    .scriptName('wwref')
    .usage('$0 <command> [options]\n\nNative-execution reference pipeline for the WhatWorkedBench catalog.')
    .middleware((argv) => {
      // `--condition=` or a bare `--condition` reaches yargs as "no value", which would select everything.
      const raw = args;
      raw.forEach((arg, i) => {
        const bare = /^--(condition|source|family|mirror)$/.exec(arg);
        if (/^--(condition|source|family|mirror)=$/.test(arg) || (bare && (raw[i + 1] === undefined || raw[i + 1]!.startsWith('-')))) {
          throw new UserError(`${arg.replace(/=$/, '')} needs a value (leave the option out to select everything)`);
        }
      });
      if (argv.workers !== undefined) {
        const n = argv.workers as number;
        const max = (argv.workersMax as number | undefined) ?? availableParallelism();
        if (!Number.isInteger(max) || max < 1 || max > WORKERS_CEILING) throw new UserError(`--workers-max takes a whole number from 1 to ${WORKERS_CEILING}`);
        if (!Number.isInteger(n) || n < 1) throw new UserError('--workers takes a whole number of at least 1');
        if (n > max) throw new UserError(`--workers ${n} is more than ${max} (the cores of this machine); pass --workers-max ${n} to allow it`);
      }
      // --runtime reaches every process wwref starts (workers, scripts/setup-python) as WWREF_RUNTIME.
      if (argv.runtime !== undefined) {
        if (typeof argv.runtime !== 'string' || argv.runtime.trim() === '') throw new UserError('--runtime needs a name (see runtimes in wwref.config.json)');
        useRuntime(argv.runtime.trim()); // an undeclared name is refused here, before any work
      } else if (process.env.WWREF_RUNTIME) {
        useRuntime(process.env.WWREF_RUNTIME.trim());
      }
      // One meaning of --references for every command that reads the catalog or the references: the
      // folder whose manifest also names added sources (add-source's --references is its target).
      // (a pack replayed with --format wwb is no reference folder: the catalog stays the default one)
      const pack = argv._[0] === 'replay' && argv.format === 'wwb';
      if (typeof argv.references === 'string' && argv._[0] !== 'add-source' && !pack) {
        if (argv.references.trim() === '') throw new UserError('--references needs a folder');
        process.env.WWREF_REFERENCES_DIR = resolve(argv.references);
      }
      // a reference folder is never inside prepared/, the raw cache or manifests/ (nor around them)
      checkReferenceFolder(argv._[0] === 'add-source' && typeof argv.references === 'string' ? argv.references : referencesDir());
      if (pack && typeof argv.references === 'string') checkReferenceFolder(argv.references);
      // the references of one runtime are never replaced by another's
      if (argv._[0] === 'rebuild' || argv._[0] === 'add-source') {
        const target = typeof argv.references === 'string' ? resolve(argv.references) : referencesDir();
        checkRuntimeTarget(target, new ReferenceStore(target).manifest()?.versions);
      }
    })
    .command(
      'list',
      'list the catalog: sources, families and conditions',
      (y) => withReferences(y),
      () => {
        const catalog = loadCatalog();
        for (const c of catalog.conditions.values()) {
          const pub = c.plan.plan.published;
          out(`${c.id.padEnd(22)} ${c.family.padEnd(22)} ${String(c.dimensions)} options  source ${c.source.padEnd(18)} ${pub.prepared_match}`);
        }
        out(`${catalog.conditions.size} conditions on ${catalog.plans.size} sources`);
      },
    )
    .command(
      'acquire',
      'fetch and sha256-check raw source files into the cache',
      (y) => withMirror(y.option('source', { type: 'string', array: true, describe: 'source(s); default all' })),
      async (argv) => {
        const catalog = loadCatalog();
        let failed = 0;
        for (const loaded of catalog.selectSources(list(argv.source, 'source'))) {
          try {
            const files = await acquirePlan(loaded.plan, { mirrors: list(argv.mirror, 'mirror') });
            out(`${loaded.plan.source}: ${files.map((f) => `${f.name} (${f.origin})`).join(', ')}`);
          } catch (error) {
            if (!(error instanceof UserError)) throw error;
            failed++;
            out(`${loaded.plan.source}: FAILED\n${error.message}`);
          }
        }
        if (failed) exitCode = 1;
      },
    )
    .command(
      'prepare',
      'acquire raw files and write prepared/<source>/ and manifests/<source>.json',
      (y) => withWorkers(withMirror(y.option('source', { type: 'string', array: true, describe: 'source(s); default all' }))),
      async (argv) => {
        const catalog = loadCatalog();
        const outcomes = await prepareSources(catalog.selectSources(list(argv.source, 'source')), {
          mirrors: list(argv.mirror, 'mirror'),
          workers: argv.workers,
          log: (line) => out(line),
        });
        const failed = outcomes.filter((o) => !o.ok);
        out(`${outcomes.length - failed.length}/${outcomes.length} sources prepared`);
        if (failed.length) exitCode = 1;
      },
    )
    .command(
      'rebuild',
      'execute every configuration and write outputs/references/<condition>.arrow and manifest.json',
      (y) =>
        withExecutor(withWorkers(withMirror(withReferences(y))))
          .option('condition', { type: 'string', array: true, describe: 'condition(s); default the whole catalog' })
          .option('fresh', { type: 'boolean', default: false, describe: 'ignore journals of interrupted runs' })
          .option('reuse-shared-stage', { type: 'boolean', default: false, describe: 'reuse expensive per-input stages across masks (retrieval term counts); bit-identical to the cold path' })
          .option('allow-version-drift', { type: 'boolean', default: false, describe: 'run even if installed versions differ from the pins' })
          .option('force', { type: 'boolean', default: false, describe: 'rebuild conditions whose plan changed since their references were written (the old plan hashes are recorded as superseded)' })
          .option('report', { type: 'string', describe: "JSON run report: every condition's outcome and this run's timings (default outputs/cache/runs/rebuild.json)" }),
      async (argv) => {
        const reportPath = argv.report === undefined ? join(cacheDir(), 'runs', 'rebuild.json') : outputPath(argv.report, 'report');
        const catalog = loadCatalog();
        const summary = await rebuild(catalog, {
          force: argv.force,
          conditions: list(argv.condition, 'condition'),
          workers: argv.workers,
          mirrors: list(argv.mirror, 'mirror'),
          fresh: argv.fresh,
          allowVersionDrift: argv.allowVersionDrift,
          reuseSharedStage: argv.reuseSharedStage,
          executor: executorChoice(argv),
          report: reportPath,
        });
        for (const c of summary.conditions) {
          const status = c.error ? `NOT BUILT: ${c.error}` : `${c.records - c.failed}/${c.records} ok`;
          out(`${c.condition.padEnd(22)} ${status}${c.violations.length ? `  ${c.violations.length} equivalence violation(s)` : ''}`);
          for (const v of c.violations) out(`    ${v}`);
          for (const f of c.failures.slice(0, 5)) out(`    FAILED ${f.mask}: ${f.error}`);
          if (c.failures.length) out(`    table and manifest entry left as they were; finished records kept in the journal (the same command resumes)`);
        }
        writeJsonAtomic(reportPath, summary);
        const kept = summary.conditions.filter((c) => c.kept).length;
        if (kept) out(`${kept} condition(s) reproduced, kept: their tables and manifest entries are unchanged (this run's timings are in ${reportPath})`);
        out(
          `${summary.records} records in ${summary.conditions.filter((c) => !c.error).length} tables (${summary.failed} failed, ${summary.resumed} resumed from the journal); ` +
            `wall ${formatSeconds(summary.wallSeconds)}, native ${summary.nativeSeconds.toFixed(1)} s, ${summary.workers} worker(s)`,
        );
        if (summary.failed || summary.conditions.some((c) => c.error || c.violations.length)) exitCode = 1;
      },
    )
    .command(
      'replay',
      'cold-replay reference tables (one thread per worker, fresh workers per condition); verify hashes, utilities, metrics, warnings, timings',
      (y) =>
        withExecutor(withWorkers(withTables(y), 1))
          .option('report', { type: 'string', default: join(ROOT, 'outputs', 'reports', 'replay.json'), describe: 'JSON report path' })
          .option('format', { choices: ['wwref', 'wwb'] as const, default: 'wwref' as const, describe: "reference layout: ours, or a published WhatWorkedBench pack (--references PACK)" })
          .option('allow-version-drift', { type: 'boolean', default: false, describe: 'compare with tolerances when installed versions differ from the manifest' })
          .option('allow-platform-drift', { type: 'boolean', default: false, describe: 'compare with tolerances when the references were built under another numerical profile or platform' }),
      async (argv) => {
        const reportPath = outputPath(argv.report, 'report');
        const options = {
          conditions: list(argv.condition, 'condition'),
          referencesDir: argv.references,
          allowVersionDrift: argv.allowVersionDrift,
          allowPlatformDrift: argv.allowPlatformDrift,
          workers: argv.workers,
          executor: executorChoice(argv),
          report: reportPath,
        };
        let report;
        if (argv.format === 'wwb') {
          if (!argv.references) throw new UserError('--format wwb needs --references PACK (the folder holding references/ and inputs/)');
          const pack = readPack(argv.references, options.conditions);
          // Conditions of our catalog carry their declared equivalences into the pack's replay.
          const catalog = loadCatalog();
          const targets = pack.targets.map((t) => {
            const known = catalog.conditions.get(t.condition);
            return known ? { ...t, equivalences: known.condition.equivalences, pairedWith: known.condition.paired_with } : t;
          });
          report = await replayTargets(targets, pack.expected, options);
        } else {
          // prepared inputs that are missing are made first and checked against the manifest
          await prepareMissing(replayNeeds(argv.references ?? referencesDir(), options.conditions), { log: (line) => out(line) });
          report = await replay(options);
        }
        writeReplayReport(reportPath, report);
        for (const c of report.conditions) {
          const ratio = c.median_timing_ratio === null ? '-' : `${c.median_timing_ratio.toFixed(2)}x`;
          out(`${c.condition.padEnd(22)} ${c.passed}/${c.total} passed  timing ${ratio}${c.slowed ? '  SLOWED' : ''}`);
        }
        for (const r of report.records.filter((x) => !x.passed)) {
          out(`FAILED ${r.condition} ${r.mask}: ${r.failures.map((f) => `${f.check} (expected ${JSON.stringify(f.expected)}, got ${JSON.stringify(f.actual)})`).join('; ')}`);
        }
        for (const v of report.equivalence_violations) out(`EQUIVALENCE VIOLATED ${v}`);
        if (report.version_drift.length) out(`version drift (tolerances used): ${report.version_drift.join('; ')}`);
        if (report.platform_drift.length) out(`platform drift (tolerances used): ${report.platform_drift.join('; ')}`);
        for (const note of report.platform_notes) out(`note: ${note}`);
        out(
          `${report.conditions.filter((c) => c.passed === c.total).length}/${report.conditions.length} conditions passed, ` +
            `${report.passed}/${report.total} records; wall ${report.wall_seconds.toFixed(1)} s; ` +
            `native ${report.replayed_native_seconds.toFixed(1)} s replayed vs ${report.recorded_native_seconds.toFixed(1)} s recorded; ` +
            `median timing ratio ${report.median_timing_ratio?.toFixed(2) ?? '-'}; ${report.timing_outliers.length} timing outlier(s); ${report.workers} worker(s); report ${argv.report}`,
        );
        if (!report.all_passed) exitCode = 1;
      },
    )
    .command(
      'audit',
      'check source manifests against themselves, their plans, the raw cache, the prepared files (each source re-prepared from its raw files and compared byte for byte) and the published facts',
      (y) =>
        withWorkers(withMirror(withReferences(y)))
          .option('source', { type: 'string', array: true, describe: 'source(s); default all' })
          .option('verbose', { type: 'boolean', default: false }),
      async (argv) => {
        const catalog = loadCatalog();
        const sources = list(argv.source, 'source');
        const options = { mirrors: list(argv.mirror, 'mirror'), workers: argv.workers, log: (line: string) => out(line) };
        // prepared inputs that are missing are made first and checked against their source manifests
        await prepareMissing(auditNeeds(catalog, sources), options);
        // then every source is re-prepared from its raw files and plan and compared (`reprepared`)
        const audits = await auditWithReprepare(catalog, sources, options);
        out(`${'source'.padEnd(20)} ${['manifest', 'plan', 'raw', 'prepared', 'reprepared', 'published', 'equivalences'].map((h) => h.padEnd(10)).join(' ')}`);
        for (const a of audits) {
          out(`${a.source.padEnd(20)} ${Object.values(a.checks).map((v) => v.padEnd(10)).join(' ')}`);
          for (const p of a.problems) out(`    ! ${p}`);
          if (argv.verbose) for (const n of a.notes) out(`    - ${n}`);
        }
        const failed = audits.filter(auditFailed);
        out(`${audits.length - failed.length}/${audits.length} sources pass the audit`);
        if (failed.length) exitCode = 1;
      },
    )
    // The analysis commands load their modules on use, so the other commands start faster.
    .command(
      'effects',
      'write conditional effects, pair interactions, per-condition figures and equivalence classes (Arrow + CSV) and summary.json',
      (y) =>
        withTables(y)
          .option('out', { type: 'string', demandOption: true, describe: 'output directory' }),
      async (argv) => {
        const { analyzeReferences, summaryLines, writeEffects } = await import('../analysis/effects.ts');
        const target = outputPath(argv.out, 'out', 'folder');
        const { files, summary } = writeEffects(analyzeReferences(list(argv.condition, 'condition'), argv.references), target);
        for (const line of summaryLines(summary)) out(line);
        out(`${files.length} files written to ${argv.out}`);
      },
    )
    .command(
      'grade',
      'score a prediction table (CSV or JSON, mask -> utility) against the reference surface: JSON on stdout, readable summary on stderr',
      (y) =>
        y
          .option('condition', { type: 'string', demandOption: true })
          .option('table', { type: 'string', demandOption: true, describe: 'prediction table: CSV (mask,utility) or JSON ({"0000": 0.4, …})' })
          .option('observed', { type: 'string', describe: 'masks measured by the submitter (JSON array or one per line): scored with the reference values' })
          .option('tolerances', { type: 'string', describe: 'extra strict-reconstruction tolerances, comma-separated (0.1 is always scored)' })
          .option('references', { type: 'string', describe: 'reference folder (default outputs/references)' }),
      async (argv) => {
        const { gradeFile, gradeSummaryLines, parseTolerances } = await import('../analysis/grade.ts');
        const result = gradeFile({ condition: argv.condition, table: argv.table, observed: argv.observed, tolerances: parseTolerances(argv.tolerances), referencesDir: argv.references });
        out(JSON.stringify(result, null, 2));
        for (const line of gradeSummaryLines(result)) process.stderr.write(`${line}\n`);
      },
    )
    .command(
      'report',
      'write a self-contained HTML report and/or figure files: response surfaces and conditional-effect heat maps per condition',
      (y) =>
        withTables(y)
          .option('out', { type: 'string', describe: 'HTML file' })
          .option('figures', { type: 'string', describe: 'folder for each condition\'s surface and heat map as SVG and PNG (drawn by matplotlib)' })
          .option('diff-with', { type: 'string', describe: 'other references (a folder or a WhatWorkedBench pack): the page gets a "diff" section comparing these references with them (as wwref diff)' }),
      async (argv) => {
        const { writeReportFiles } = await import('../analysis/report.ts');
        const { summary, figures } = writeReportFiles({
          out: argv.out === undefined ? undefined : outputPath(argv.out, 'out'),
          figures: argv.figures === undefined ? undefined : outputPath(argv.figures, 'figures', 'folder'),
          conditions: list(argv.condition, 'condition'),
          dir: argv.references,
          diffWith: argv.diffWith,
        });
        if (argv.out !== undefined) out(`report of ${summary.conditions} condition(s) written to ${argv.out}`);
        if (argv.figures !== undefined) out(`${figures.length} figure file(s) of ${summary.conditions} condition(s) written to ${argv.figures}`);
      },
    )
    .command(
      'diff <a> <b>',
      'compare two sets of references (folders, or a folder and a WhatWorkedBench pack): changed hashes, utilities, statuses, best masks, sign reversals, conditional effects, equivalence classes',
      (y) =>
        y
          .positional('a', { type: 'string', demandOption: true, describe: 'reference folder (or pack) A, e.g. outputs/references' })
          .positional('b', { type: 'string', demandOption: true, describe: 'reference folder (or pack) B, e.g. outputs/current' })
          .option('condition', { type: 'string', array: true, describe: 'condition(s); default every condition of both' })
          .option('json', { type: 'string', describe: 'also write the whole diff as JSON to this file' })
          .option('html', { type: 'string', describe: 'also write an HTML page: the diff table and the surfaces of A and B side by side for the conditions that changed most' })
          .option('all', { type: 'boolean', default: false, describe: 'list unchanged conditions too' }),
      async (argv) => {
        const { diffLines, diffReferencesWithSides, writeDiffJson } = await import('../analysis/diff.ts');
        const json = argv.json === undefined ? undefined : outputPath(argv.json, 'json');
        const html = argv.html === undefined ? undefined : outputPath(argv.html, 'html');
        const { report, a, b } = diffReferencesWithSides(argv.a!, argv.b!, list(argv.condition, 'condition'));
        for (const line of diffLines(report, { all: argv.all })) out(line);
        if (json) {
          writeDiffJson(json, report);
          out(`diff written to ${argv.json}`);
        }
        if (html) {
          const { renderDiffPage, surfacesOf } = await import('../analysis/diff-html.ts');
          const { writeFileAtomic } = await import('../core/fsutil.ts');
          writeFileAtomic(html, renderDiffPage(report, surfacesOf(report, a.conditions, b.conditions)));
          out(`diff page written to ${argv.html}`);
        }
      },
    )
    .command(
      'add-source <plan>',
      'add a new source from its construction plan: validate, freeze (sha256), acquire, prepare, execute every mask, verify, append its references',
      (y) =>
        withExecutor(withWorkers(withMirror(y)))
          .positional('plan', { type: 'string', demandOption: true, describe: 'construction plan (JSON, see sources/plan.schema.json)' })
          .option('references', { type: 'string', describe: 'target reference folder (default outputs/references)' })
          .option('force', { type: 'boolean', default: false, describe: 'rebuild a source already added; a changed plan is recorded as superseding the old hash' })
          .option('dry-run', { type: 'boolean', default: false, describe: 'only validate the plan, check the target and print its sha256' })
          .option('allow-version-drift', { type: 'boolean', default: false, describe: 'run even if installed versions differ from the pins' }),
      async (argv) => {
        const { addSource, addSourceLines, checkAddSource } = await import('../jobs/add-source.ts');
        const options = {
          referencesDir: argv.references,
          force: argv.force,
          workers: argv.workers,
          mirrors: list(argv.mirror, 'mirror'),
          allowVersionDrift: argv.allowVersionDrift,
          executor: executorChoice(argv),
        };
        if (argv.dryRun) {
          for (const line of checkAddSource(argv.plan!, options)) out(line);
          return;
        }
        const result = await addSource(argv.plan!, { ...options, log: (line) => out(line) });
        for (const line of addSourceLines(result)) out(line);
        if (!result.written) exitCode = 1;
      },
    )
    .command(
      'new-source',
      'write a construction-plan skeleton from a family and raw files: identities, detected columns, conditions, inactive rules; licence and citation to fill',
      (y) =>
        withMirror(y)
          .option('family', { choices: FAMILY_NAMES, demandOption: true, describe: 'workflow family (wwref families)' })
          .option('file', { type: 'string', array: true, describe: 'raw file by path (repeatable; the first file given is the main one)' })
          .option('package', { type: 'string', array: true, describe: 'raw file inside a pinned Python package, DISTRIBUTION:PATH, e.g. scikit-learn:sklearn/datasets/data/iris.csv (repeatable; before --file)' })
          .option('source', { type: 'string', describe: 'source id (default: from the first file name)' })
          .option('title', { type: 'string', describe: 'readable title' })
          .option('out', { type: 'string', describe: 'plan file to write (default ./<source>.plan.json)' })
          .option('force', { type: 'boolean', default: false, describe: 'overwrite an existing plan file' }),
      async (argv) => {
        const { defaultPlanFile, newSourcePlan } = await import('../sources/scaffold.ts');
        const { plan, notes, todo } = newSourcePlan({
          family: argv.family,
          files: list(argv.file, 'file'),
          packages: list(argv.package, 'package'),
          source: argv.source,
          title: argv.title,
          mirrors: list(argv.mirror, 'mirror'),
        });
        const target = outputPath(argv.out ?? defaultPlanFile(plan), 'out', 'file', true);
        if (dirname(target) === resolve(ROOT, 'sources')) throw new UserError(`--out ${argv.out}: sources/ holds the published catalog; write the plan elsewhere (e.g. sources/examples/ or your own folder)`);
        if (existsSync(target) && !argv.force) throw new UserError(`--out ${target} exists; pass --force to overwrite it`);
        const { writeFileAtomic } = await import('../core/fsutil.ts');
        writeFileAtomic(target, `${JSON.stringify(plan, null, 2)}\n`);
        for (const note of notes) out(`- ${note}`);
        out(`plan skeleton written to ${target}: ${todo}, then run`);
        out(`  npx wwref add-source ${target} --dry-run`);
      },
    )
    .command(
      'plan-schema',
      'write the JSON Schema of construction plans (for editors; committed as sources/plan.schema.json)',
      (y) => y.option('out', { type: 'string', describe: 'output file (default: standard output)' }),
      async (argv) => {
        const { planJsonSchema } = await import('../catalog/plan.ts');
        const text = `${JSON.stringify(planJsonSchema(), null, 2)}\n`;
        if (!argv.out) return void process.stdout.write(text);
        const { writeFileAtomic } = await import('../core/fsutil.ts');
        writeFileAtomic(outputPath(argv.out, 'out', 'file', true), text);
        out(`plan schema written to ${argv.out}`);
      },
    )
    .command(
      'export',
      'write all records of the reference tables as one file',
      (y) =>
        withTables(y)
          .option('format', { choices: ['csv', 'wwb'] as const, default: 'csv' as const, describe: 'csv: one file; wwb: a WhatWorkedBench pack folder' })
          .option('out', { type: 'string', demandOption: true, describe: 'output file (csv) or folder (wwb)' }),
      (argv) => {
        const target = outputPath(argv.out, 'out', argv.format === 'wwb' ? 'folder' : 'file');
        const conditions = list(argv.condition, 'condition');
        const count = argv.format === 'wwb' ? exportPack(target, conditions) : exportCsv(target, conditions);
        out(`${count} records written to ${argv.out}`);
      },
    )
    .command(
      'families',
      'print the workflow families: mask widths, prediction-hash rule and what each option does (docs/families.md)',
      (y) => y.option('family', { type: 'string', array: true, describe: 'family name(s); default all' }),
      (argv) => {
        for (const line of familyLines(list(argv.family, 'family'))) out(line);
      },
    )
    .command(
      'worker',
      'start Dask worker processes for a scheduler: the pinned runtime, the numerical profile, one computation thread each',
      (y) =>
        withRuntime(y)
          .option('scheduler', { type: 'string', describe: 'Dask scheduler address, e.g. tcp://10.0.0.5:8786' })
          .option('nworkers', { type: 'number', default: 1, describe: 'worker processes on this machine' })
          .option('host', { type: 'string', describe: 'interface to listen on (default 127.0.0.1 for a local scheduler, else chosen by Dask)' })
          .option('print-env', { type: 'boolean', default: false, describe: 'print the environment Dask workers of this project need (for job scripts) and exit' }),
      async (argv) => {
        if (argv.printEnv) {
          const { workerEnvironment } = await import('../execution/dask/cluster.ts');
          for (const [name, value] of Object.entries(workerEnvironment())) out(`export ${name}='${value}'`);
          return;
        }
        if (!argv.scheduler) throw new UserError('wwref worker needs --scheduler ADDRESS (e.g. tcp://10.0.0.5:8786)');
        if (!Number.isInteger(argv.nworkers) || argv.nworkers < 1 || argv.nworkers > WORKERS_CEILING) throw new UserError(`--nworkers takes a whole number from 1 to ${WORKERS_CEILING}`);
        if (!/^(tcp|tls|ucx|inproc):\/\/\S+$/.test(argv.scheduler)) throw new UserError(`--scheduler ${argv.scheduler} is not a Dask address (e.g. tcp://10.0.0.5:8786)`);
        const { startWorkers } = await import('../execution/dask/cluster.ts');
        out(`starting ${argv.nworkers} Dask worker process(es) for ${argv.scheduler} (numerical profile ${activeProfile().name}, one thread each); Ctrl-C stops them`);
        const workers = startWorkers({ scheduler: argv.scheduler, nworkers: argv.nworkers, host: argv.host, inherit: true });
        process.once('SIGINT', () => workers.kill('SIGTERM'));
        const result = await workers;
        if (result.exitCode) exitCode = 1;
      },
    )
    .command(
      'doctor',
      "print this machine's runtime identity and numerical profile, and whether it reproduces the references bit for bit",
      (y) => withRuntime(withReferences(y)),
      async (argv) => {
        const { doctor } = await import('../jobs/doctor.ts');
        const result = await doctor(argv.references);
        for (const line of result.lines) out(line);
        if (!result.reproduces) exitCode = 1;
      },
    )
    .demandCommand(1, 'name a command (see --help)')
    .strict()
    .help()
    .fail((message, error) => {
      // yargs spreads some messages over lines ("Invalid values:\n  Argument: ..."): one line here
      throw error ?? new UserError(message.replace(/\s*\n\s*/g, ' '));
    })
    .parseAsync();
  return exitCode;
}

const ESCAPES: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/**
 * A user error as one line (and the `  - ` items listing several problems, each on its own line):
 * control characters inside it, as in a file name given on the command line, are shown escaped.
 */
function oneLine(message: string): string {
  return message
    .split(/\n(?= {2}- )/)
    .map((part) => part.replace(/[\u0000-\u001f\u007f]/g, (c) => ESCAPES[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`))
    .join('\n');
}

/**
 * Runs the command line on `args` (without `node` and the script) and returns the exit status: a
 * UserError is printed as one line (status 2); anything else is an internal error with its stack (1).
 */
export async function runCli(args: string[]): Promise<number> {
  try {
    return await main(args);
  } catch (error) {
    if (error instanceof UserError) {
      process.stderr.write(`wwref: ${oneLine(error.message)}\n`);
      return 2;
    }
    process.stderr.write(`wwref: internal error: ${(error as Error).stack ?? String(error)}\n`);
    return 1;
  }
}

/** `node bin/wwref.mjs ...`: runs the command line and exits with its status. */
export async function cliProcess(): Promise<never> {
  process.exit(await runCli(hideBin(process.argv)));
}
