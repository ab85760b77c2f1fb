// Options several commands share, and the checks of their values.
import { availableParallelism } from 'node:os';
import type { Argv } from 'yargs';
import { UserError } from '../core/errors.ts';
import { EXECUTOR_KINDS, type ExecutorChoice, type ExecutorKind } from '../execution/executors.ts';

/** Hard ceiling on worker processes, whatever --workers-max says. */
export const WORKERS_CEILING = 256;

/** The values of a repeatable option; an empty one (`--condition=`) is a mistake, not "everything". */
export function list(value: unknown, flag = 'this option'): string[] {
  const values = value === undefined ? [] : (Array.isArray(value) ? value : [value]).map(String);
  if (values.some((v) => v.trim() === '')) throw new UserError(`--${flag} needs a value (leave the option out to select everything)`);
  return values;
}

// Numbers as written in decimal digits: yargs' number type would read 0x3, 1e1, +3 or '' (as 0).

/** The one whole number an option was given (up to 9 digits; a range is the command's to check). */
export function wholeNumber(value: unknown, flag: string): number {
  const written = String(value); // as given: ' 2' is no more a number than '0x2'
  if (!/^\d{1,9}$/.test(written)) throw new UserError(`--${flag} takes one whole number written in decimal digits, not '${written}'`);
  return Number(written);
}

/** The whole numbers of a repeatable option, each value split at spaces and commas. */
export function wholeNumbers(values: readonly string[], flag: string): number[] {
  return values
    .flatMap((v) => v.split(/[\s,]+/))
    .filter(Boolean)
    .map((v) => {
      if (!/^\d{1,9}$/.test(v)) throw new UserError(`--${flag} takes whole numbers written in decimal digits, not '${v}'`);
      return Number(v);
    });
}

export function withMirror<T>(y: Argv<T>) {
  return y.option('mirror', {
    type: 'string',
    array: true,
    describe: 'mirror directory of raw files (repeatable; tried before those of wwref.config.json and WWREF_MIRROR)',
  });
}

/** --references: the reference folder a command reads (and rebuild writes); WWREF_REFERENCES_DIR is the default. */
export function withReferences<T>(y: Argv<T>) {
  return y.option('references', { type: 'string', describe: 'reference folder (default WWREF_REFERENCES_DIR or outputs/references)' });
}

/** --condition (several) and --references, for the commands that read reference tables. */
export function withTables<T>(y: Argv<T>) {
  return withReferences(
    y.option('condition', { type: 'string', array: true, describe: 'condition(s); default every table in the manifest' }),
  );
}

/**
 * --workers and --workers-max, read as the strings written (yargs' number type would take 0x2, 1e0, +2
 * or '' for 2, 1, 2 and 0): checkWorkers turns them into numbers, decimal digits only, before any
 * command runs (a coerce function's refusal would reach the user as yargs' error, with a stack).
 */
export function withWorkers<T>(y: Argv<T>, byDefault = availableParallelism()) {
  return y
    .option('workers', {
      type: 'string',
      default: String(byDefault),
      describe: 'Python worker processes, one computation thread each (at most the number of cores, unless --workers-max)',
    })
    .option('workers-max', {
      type: 'string',
      describe: `allow up to this many workers (at most ${WORKERS_CEILING})`,
    }) as unknown as Argv<T & { workers: number; workersMax: number | undefined; 'workers-max': number | undefined }>;
}

/** --runtime: the named Python runtime of wwref.config.json that executes records (default `pinned`). */
export function withRuntime<T>(y: Argv<T>) {
  return y.option('runtime', {
    type: 'string',
    describe:
      "Python runtime of wwref.config.json that executes the records (default 'pinned'; another is created in .venv-NAME on first use)",
  });
}

/** --executor and --scheduler, for the commands that execute records. */
export function withExecutor<T>(y: Argv<T>) {
  return withRuntime(y)
    .option('executor', {
      choices: EXECUTOR_KINDS,
      default: 'local' as const,
      describe:
        'local: worker processes here; dask: the workers of a Dask scheduler (--scheduler); ' +
        'dask-local: a Dask cluster of --workers processes started here for the job',
    })
    .option('scheduler', { type: 'string', describe: 'Dask scheduler address for --executor dask, e.g. tcp://10.0.0.5:8786' });
}

export function executorChoice(argv: { executor: ExecutorKind; scheduler?: string }): ExecutorChoice {
  if (argv.scheduler !== undefined && argv.executor !== 'dask') throw new UserError('--scheduler is for --executor dask');
  if (argv.executor === 'dask' && !argv.scheduler)
    throw new UserError('--executor dask needs --scheduler ADDRESS (e.g. tcp://10.0.0.5:8786)');
  return { kind: argv.executor, scheduler: argv.scheduler };
}

/** `--condition=` or a bare `--condition` reaches yargs as "no value", which would select everything. */
export function checkBareValues(args: readonly string[]): void {
  args.forEach((arg, i) => {
    const bare = /^--(condition|source|family|mirror)$/.exec(arg);
    if (/^--(condition|source|family|mirror)=$/.test(arg) || (bare && (args[i + 1] === undefined || args[i + 1]!.startsWith('-')))) {
      throw new UserError(`${arg.replace(/=$/, '')} needs a value (leave the option out to select everything)`);
    }
  });
}

/**
 * --workers within 1..--workers-max (default the cores of this machine), each written in decimal
 * digits: `argv`'s strings replaced by their numbers (the commands read numbers).
 */
export function checkWorkers(argv: Record<string, unknown>): void {
  if (argv.workers === undefined) return;
  const n = wholeNumber(argv.workers, 'workers');
  const given = argv.workersMax === undefined ? undefined : wholeNumber(argv.workersMax, 'workers-max');
  const max = given ?? availableParallelism();
  if (max < 1 || max > WORKERS_CEILING) throw new UserError(`--workers-max takes a whole number from 1 to ${WORKERS_CEILING}, not ${max}`);
  if (n < 1) throw new UserError(`--workers takes a whole number of at least 1, not ${n}`);
  if (n > max) throw new UserError(`--workers ${n} is more than ${max} (the cores of this machine); pass --workers-max ${n} to allow it`);
  Object.assign(argv, { workers: n, ...(given !== undefined && { workersMax: given, 'workers-max': given }) });
}
