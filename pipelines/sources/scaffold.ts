// `wwref new-source`: a construction-plan skeleton from a family and one or more raw files (a path, or
// a file inside a pinned package given as DISTRIBUTION:PATH). Measured, not guessed: each raw file's
// sha256, size and owning package (name, version, path in site-packages); for tables the header row,
// column names, numeric columns and the target's distinct values (workflows/prepare/inspect.py, the
// recipe's own reader). Pre-filled: the recipe and its parameters, the family's conditions (4 and/or
// 6 options, paired), the family's inactive-option rules as declared equivalences, and a $comment with
// what each option does; licence, citation and homepage when the package that ships the file states
// them (its metadata, the data set's description: workflows/prepare/provenance.py), each note saying
// where it was read. A target column that is not unambiguous is not guessed: the candidates are listed
// and the target left as a TODO that the dry run refuses. The skeleton is meant to be edited, then
// checked with `wwref add-source PLAN --dry-run`.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, relative, resolve } from 'node:path';
import { FAMILIES, OPTION_LETTERS, type FamilyName, type OptionLetter } from '../catalog/families.ts';
import { DEFAULT_RECORD_TIMEOUT_SECONDS, ID_RULE, isValidId } from '../catalog/plan.ts';
import { UserError } from '../core/errors.ts';
import { isInside } from '../core/containment.ts';
import type { Settings } from '../core/settings.ts';
import { mirrorsOf, sitePackages } from './acquire.ts';
import { inspectRaw } from './check.ts';
import { type RawSample, sampleRawFile } from './sample.ts';

/** Seed of splits and noise in every catalog plan (docs/recipes.md, Seeds). */
export const DEFAULT_SEED = 20260907;

export interface InactiveRule {
  option: OptionLetter;
  inactive_when: Partial<Record<OptionLetter, 0 | 1>>;
  reason: string;
}

/**
 * The inactive-option rules of each family (docs/families.md, "Inactive rules"): option X has no effect
 * when the listed options have the listed values. The published and example plans declare exactly
 * these on their six-option conditions (test/sources/new-source.test.ts checks it).
 */
export const INACTIVE_RULES: Record<FamilyName, InactiveRule[]> = {
  classification: [],
  regression: [
    { option: 'E', inactive_when: { C: 0 }, reason: 'interaction-only terms only matter when polynomial features (C) are on' },
    { option: 'F', inactive_when: { B: 0 }, reason: 'RobustScaler swap only matters when scaling (B) is on' },
  ],
  clustering: [{ option: 'E', inactive_when: { C: 0 }, reason: 'PCA whitening only matters when PCA (C) is on' }],
  forecasting: [],
  image_restoration: [
    { option: 'F', inactive_when: { A: 0 }, reason: 'median window 5 only matters when the median filter (A) is on' },
    { option: 'E', inactive_when: { B: 0 }, reason: 'Gaussian sigma 1.6 only matters when the Gaussian filter (B) is on' },
  ],
  retrieval: [{ option: 'C', inactive_when: { E: 1 }, reason: 'with binary counts every tf is 0 or 1 and 1 + log 1 = 1' }],
  beat_detection: [],
  graph_link_prediction: [
    {
      option: 'F',
      inactive_when: { A: 0, B: 0, C: 0, D: 0, E: 0 },
      reason: 'with no feature on, the model sees one all-zero column and predicts a constant 0.5 either way',
    },
  ],
};

/** Recipe kind of each family (docs/recipes.md). */
const RECIPE_OF: Record<FamilyName, string> = {
  classification: 'tabular',
  regression: 'tabular',
  clustering: 'tabular',
  forecasting: 'statsmodels_series',
  image_restoration: 'skimage_image',
  retrieval: 'beir_retrieval',
  beat_detection: 'mitdb_ecg',
  graph_link_prediction: 'newman_graph',
};

export interface NewSourceOptions {
  settings: Settings;
  family: FamilyName;
  /** Raw files by path. */
  files?: readonly string[];
  /** Raw files inside pinned packages: "DISTRIBUTION:PATH" (path inside site-packages). */
  packages?: readonly string[];
  /** Source id (default: from the first file's name). */
  source?: string;
  title?: string;
  mirrors?: readonly string[];
}

interface TableFacts {
  kind: 'table';
  format: 'csv' | 'whitespace' | 'excel' | 'arff';
  compression: 'none' | 'gzip';
  header: boolean;
  columns: string[];
  numeric: boolean[];
  /** Numeric with integral values only (a label column can be). */
  integral: boolean[];
  distinct: Record<string, string[] | null>;
  empty: Record<string, number>;
  rows: number;
}
interface ImageFacts {
  kind: 'image';
  size: [number, number];
  mode: string;
}
/** A fact the package states, and where it was read. */
interface Stated {
  text: string;
  from: string;
}
interface DescribedFile {
  path: string;
  name: string;
  sha256: string;
  bytes: number;
  package: { distribution: string; version: string; path: string } | null;
  content: TableFacts | ImageFacts | { kind: 'other'; note: string };
  /** For a file of a pinned package: what the package states about the data. */
  about: { licence: Stated | null; citation: Stated | null; homepage: Stated | null } | null;
}

/** A source id from a file name: "iris.csv" -> "iris", "Data Set-2.csv.gz" -> "data_set_2". */
export function sourceIdFrom(name: string): string {
  const stem = name.replace(/(\.(gz|bz2|zip|xz))?$/i, '').replace(/\.[A-Za-z0-9]{1,5}$/, '');
  const id = stem
    .toLowerCase()
    .replace(/[^a-z0-9_]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .slice(0, 60);
  return /^[a-z]/.test(id) ? id : `source_${id}`.replace(/_+$/, '');
}

const TIME_COLUMN = /^(year|date|time|datetime|month|quarter|day|week|period|index|t|unnamed.*)$/i;
/** Header names that say "this is the target". */
const TARGET_NAME = /^(target|class|label|y|outcome|response)$/i;
/** The column a plan names while the user has not chosen one (the dry run refuses it: no such column). */
const todoColumn = (what: string): string => `TODO: choose the ${what} column (candidates in $comment)`;
/** Candidate columns listed with their values (label families); further ones by name, up to CANDIDATES_NAMED. */
const CANDIDATES_WITH_VALUES = 6;
const CANDIDATES_NAMED = 30;

interface Column {
  name: string;
  numeric: boolean;
  integral: boolean;
  distinct: string[] | null;
}

/**
 * The target column when the table leaves no doubt, with the reason, else the candidates (most likely
 * first: file order reversed). A regression target is any numeric column; a label column has 2 to 50
 * distinct values that are text or integers. No doubt: one candidate, the one column of a further
 * file (a separate target file), or the one candidate named like a target.
 */
function chooseTarget(
  family: FamilyName,
  columns: Column[],
  lastTable: string[] | undefined,
): { target?: Column; reason?: string; candidates: Column[] } {
  const label = family !== 'regression';
  const candidates = columns
    .filter((c) => (label ? c.distinct !== null && c.distinct.length >= 2 && (!c.numeric || c.integral) : c.numeric))
    .reverse();
  const kind = label ? 'with 2 to 50 text or integer values' : 'numeric';
  if (candidates.length === 1) return { target: candidates[0], reason: `the only column ${kind}`, candidates };
  const separate = lastTable?.length === 1 ? candidates.find((c) => c === columns[columns.length - 1]) : undefined;
  if (separate) return { target: separate, reason: 'the one column of the last file (a separate target file)', candidates };
  const named = candidates.filter((c) => TARGET_NAME.test(c.name));
  if (named.length === 1)
    return { target: named[0], reason: `the only candidate named like a target (${candidates.length} columns are ${kind})`, candidates };
  return { candidates };
}

/** "'a' (3 values: 0, 1, 2); 'b' (…); 'c', 'd' … (40 in all)": values only where they become the labels. */
function listCandidates(candidates: Column[], withValues: boolean): string {
  const shown = withValues ? CANDIDATES_WITH_VALUES : 0;
  const valued = candidates.slice(0, shown).map((c) => `'${c.name}' (${c.distinct!.length} values: ${c.distinct!.join(', ')})`);
  const named = candidates
    .slice(shown, CANDIDATES_NAMED)
    .map((c) => `'${c.name}'`)
    .join(', ');
  const more = candidates.length > CANDIDATES_NAMED ? ` … (${candidates.length} in all)` : '';
  return [...valued, ...(named ? [named] : [])].join('; ') + more;
}

function tableParams(family: FamilyName, files: DescribedFile[], notes: string[], todo: string[]): Record<string, unknown> {
  const main = files[0]!;
  const facts = main.content as TableFacts;
  const extra = files.slice(1).filter((f) => f.content.kind === 'table') as (DescribedFile & { content: TableFacts })[];
  const all = [facts, ...extra.map((f) => f.content)];
  // every column of every table, in the order the recipe appends them
  const columns = all.flatMap((t) =>
    t.columns.map((name, k) => ({ name, numeric: t.numeric[k]!, integral: t.integral[k]!, distinct: t.distinct[name] ?? null })),
  );
  // header names that are numbers (scikit-learn's CSVs start with "150,4,setosa,…": counts and class
  // names) or repeat across files are replaced, keeping the header row out of the data
  const named =
    facts.header && new Set(columns.map((c) => c.name)).size === columns.length && !columns.some((c) => /^[-+]?\d/.test(c.name));
  if (facts.header && !named)
    notes.push(
      `the header row of ${main.name} (${facts.columns.slice(0, 6).join(', ')}) does not give usable column names: ` +
        `columns renamed column_1 … column_${columns.length}`,
    );
  // without a header (or with names repeated across files) every column gets a name here
  const candidates = columns.map((c, k) => ({ ...c, name: named ? c.name : `column_${k + 1}` }));
  const names = candidates.map((c) => c.name);
  const chosen = chooseTarget(family, candidates, extra.length ? all[all.length - 1]!.columns : undefined);
  if (!chosen.candidates.length)
    throw new UserError(
      `new-source: no column of ${main.name} can be the target of a ${family} source ` +
        `(${family === 'regression' ? 'no numeric column' : 'no column with 2 to 50 text or integer values'})`,
    );
  const target = chosen.target;
  const features = candidates.filter((c) => c.numeric && c !== target).map((c) => c.name);
  if (!features.length)
    throw new UserError(
      `new-source: ${main.name} has no numeric column${target ? ` besides the target '${target.name}'` : ' to be a feature'}`,
    );
  const detected =
    `detected: ${facts.format}${facts.compression === 'gzip' ? ' (gzip)' : ''} table, ` +
    `${facts.header ? 'header row' : 'no header row'}, ${names.length} columns`;
  const rest =
    `features: the ${features.length} ${target ? 'other ' : ''}numeric column(s)` +
    `${candidates.some((c) => !c.numeric && c !== target) ? ' (text columns left out)' : ''}`;
  if (target) {
    notes.push(`${detected}; target '${target.name}': ${chosen.reason}; ${rest}`);
  } else {
    notes.push(`${detected}; ${rest}`);
    notes.push(
      `TODO target: the target column is not unambiguous (${chosen.candidates.length} candidates, most likely first): ` +
        `${listCandidates(chosen.candidates, family !== 'regression')}. ` +
        `Set preparation.params.target to one of them and remove it from features${family === 'regression' ? '' : '; set labels to its values'}`,
    );
    todo.push('choose the target column (TODO target)');
  }
  return {
    task: family,
    file: main.name,
    format: facts.format,
    ...(facts.compression === 'gzip' ? { compression: 'gzip' } : {}),
    ...(facts.format === 'arff' ? {} : { header: facts.header }),
    ...(extra.length ? { append_files: extra.map((f) => f.name) } : {}),
    ...(named ? {} : { columns: names }),
    features,
    target: target?.name ?? todoColumn('target'),
    ...(family === 'regression' || !target ? {} : { labels: target.distinct }),
    drop_duplicates: true,
    ...(family === 'clustering' ? {} : { split: { test_size: 0.3, seed: DEFAULT_SEED } }),
  };
}

function seriesParams(files: DescribedFile[], notes: string[], todo: string[]): Record<string, unknown> {
  const main = files[0]!;
  const facts = main.content as TableFacts;
  if (!facts.header) throw new UserError(`new-source: ${main.name} has no header row; the statsmodels_series recipe reads a CSV with one`);
  const values = facts.columns.filter((c, k) => facts.numeric[k] && !TIME_COLUMN.test(c));
  if (!values.length) throw new UserError(`new-source: ${main.name} has no numeric value column (columns: ${facts.columns.join(', ')})`);
  const column = values.length === 1 ? values[0]! : undefined;
  notes.push(
    `detected: CSV with columns ${facts.columns.join(', ')}` +
      `${column ? `; series column '${column}': the only numeric column that is not a time index` : ''}`,
  );
  if (!column) {
    notes.push(
      `TODO series: the series column is not unambiguous (${values.length} numeric columns): ` +
        `${values.map((v) => `'${v}'${facts.empty[v] ? ` (${facts.empty[v]} empty cells: set fill to forward)` : ''}`).join(', ')}. ` +
        `Set preparation.params.columns to [one of them]`,
    );
    todo.push('choose the series column (TODO series)');
  }
  return {
    file: main.name,
    columns: [column ?? todoColumn('series')],
    fill: column && (facts.empty[column] ?? 0) > 0 ? 'forward' : 'none',
    cut_fraction: 0.75,
  };
}

function recipeParams(family: FamilyName, files: DescribedFile[], notes: string[], todo: string[]): Record<string, unknown> {
  const main = files[0]!;
  const want = (kind: string) => {
    if (main.content.kind !== kind) {
      const why = main.content.kind === 'other' ? ` (${main.content.note.trim()})` : '';
      throw new UserError(
        `new-source: ${main.name} is not read as ${kind === 'table' ? 'a table' : 'an image'}, which a ${family} source needs${why}`,
      );
    }
  };
  switch (RECIPE_OF[family]) {
    case 'tabular':
      want('table');
      return tableParams(family, files, notes, todo);
    case 'statsmodels_series':
      want('table');
      return seriesParams(files, notes, todo);
    case 'skimage_image': {
      want('image');
      const [width, height] = (main.content as ImageFacts).size;
      const longer = Math.min(256, Math.max(width, height));
      notes.push(`detected: ${width} x ${height} image (${(main.content as ImageFacts).mode}); longer side ${longer} px after resizing`);
      return { file: main.name, longer_side: longer, noise_std: 0.1, seed: DEFAULT_SEED };
    }
    case 'newman_graph':
      return { file: main.name, split_seed: DEFAULT_SEED, holdout_fraction: 0.2, duplicate_edges: 'merge' };
    case 'mitdb_ecg': {
      const record = main.name.replace(/\.(hea|dat|atr)$/, '');
      notes.push(
        'mitdb_ecg: give the three files <record>.hea, <record>.dat and <record>.atr; ' +
          'channels, samples and qrs_codes are the MIT-BIH values of the catalog',
      );
      return {
        record,
        channels: ['MLII'],
        samples: 108000,
        qrs_codes: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 25, 30, 31, 34, 35, 38, 41],
      };
    }
    default: {
      const pick = (re: RegExp, fallback: string) => files.find((f) => re.test(f.name))?.name ?? fallback;
      notes.push('beir_retrieval: name the corpus, queries and qrels files and choose the query cohort');
      return {
        corpus: pick(/corpus.*\.jsonl$/, 'corpus.jsonl'),
        queries: pick(/quer.*\.jsonl$/, 'queries.jsonl'),
        qrels: pick(/\.tsv$/, 'qrels.tsv'),
        title_separator: ' ',
        cohort: { size: 64, hash: 'sha256', key: '{query_id}' },
        exclude_self: false,
      };
    }
  }
}

/** Where a raw file is found in a mirror: its path under a mirror folder, or a suggestion. */
function mirrorPath(file: DescribedFile, source: string, mirrors: string[], notes: string[]): string {
  if (file.package) return `packages/${file.package.path.split('/')[0]}/${file.name}`;
  const mirror = mirrors.find((m) => isInside(file.path, m));
  if (mirror) return relative(resolve(mirror), resolve(file.path));
  notes.push(
    `${file.name} is not inside a mirror folder: copy it to <mirror>/${source}/${file.name} ` +
      `(mirrors: ${mirrors.join(', ') || 'none configured'}; or pass --mirror DIR to add-source)`,
  );
  return `${source}/${file.name}`;
}

/**
 * The raw files described by the inspection: pinned-package files as they are, files given by path
 * through a bounded sample each (sample.ts), with their whole sha256 and size.
 */
async function describeRawFiles(options: NewSourceOptions, notes: string[]): Promise<DescribedFile[]> {
  const folder = mkdtempSync(join(tmpdir(), 'wwref-new-source-'));
  try {
    const packages = sitePackages(options.settings);
    const samples: RawSample[] = [];
    for (const [k, file] of (options.files ?? []).entries()) samples.push(await sampleRawFile(file, folder, k, packages));
    const requested = [...(options.packages ?? []).map((p) => ({ package: p })), ...samples.map((s) => ({ path: s.path }))];
    const described = (inspectRaw(options.settings, { mode: 'describe', files: requested }) as { files: DescribedFile[] }).files;
    const byPackage = described.slice(0, requested.length - samples.length);
    const byPath = described.slice(byPackage.length).map((file, k): DescribedFile => {
      const sample = samples[k]!;
      if (sample.note) notes.push(`${file.name}: ${sample.note}`);
      return {
        ...file,
        path: sample.file,
        sha256: sample.sha256,
        bytes: sample.bytes,
        ...(sample.undescribed ? { content: { kind: 'other', note: sample.undescribed } } : {}),
      };
    });
    return [...byPackage, ...byPath];
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}

/**
 * The plan skeleton (a JSON object), notes on what was detected and where licence and citation were
 * read, and what is left to do ("fill licence and citation (…), check title and preparation.params").
 */
export async function newSourcePlan(options: NewSourceOptions): Promise<{ plan: Record<string, unknown>; notes: string[]; todo: string }> {
  const family = options.family;
  if (!(options.packages ?? []).length && !(options.files ?? []).length)
    throw new UserError(
      'new-source needs at least one raw file: --file PATH or --package DISTRIBUTION:PATH (e.g. scikit-learn:sklearn/datasets/data/iris.csv)',
    );
  const notes: string[] = [];
  const files = await describeRawFiles(options, notes);
  const names = files.map((f) => f.name);
  const twice = names.find((n, k) => names.indexOf(n) !== k);
  if (twice) throw new UserError(`new-source: two raw files are named ${twice}; give files with distinct names`);
  const source = options.source ?? sourceIdFrom(files[0]!.name);
  if (!isValidId(source)) throw new UserError(`new-source: '${source}' is not a valid source id (${ID_RULE}); pass --source`);
  const todo: string[] = [];
  const params = recipeParams(family, files, notes, todo);
  const about = files[0]!.about;
  const stated = (field: 'licence' | 'citation' | 'homepage'): string => {
    const fact = about?.[field];
    if (fact) notes.push(`${field} from ${fact.from}: check it`);
    return fact?.text ?? '';
  };
  const [licence, citation, homepage] = [stated('licence'), stated('citation'), stated('homepage')];
  const missing = Object.entries({ licence, citation, homepage })
    .filter(([, text]) => !text)
    .map(([field]) => field);
  if (missing.length)
    todo.unshift(
      `fill ${missing.join(', ').replace(/, (?=\w+$)/, ' and ')} (as the distributor of the data documents ${missing.length > 1 ? 'them' : 'it'})`,
    );
  todo.push(`check ${[licence ? 'licence' : '', citation ? 'citation' : '', 'title', 'preparation.params'].filter(Boolean).join(', ')}`);
  const mirrors = mirrorsOf(options);
  const rawFiles = files.map((f) => ({
    name: f.name,
    sha256: f.sha256,
    bytes: f.bytes,
    mirror_path: mirrorPath(f, source, mirrors, notes),
    ...(f.package ? { package: f.package } : {}),
  }));
  const definition = FAMILIES[family];
  const conditions = definition.dimensions.map((dimensions) => {
    const letters = OPTION_LETTERS.slice(0, dimensions);
    const rules = INACTIVE_RULES[family].filter((r) =>
      [r.option, ...Object.keys(r.inactive_when)].every((l) => (letters as readonly string[]).includes(l)),
    );
    return {
      id: dimensions === 4 ? source : `${source}__d6`,
      dimensions,
      options: [...letters],
      ...(dimensions === 6 && definition.dimensions.includes(4) ? { paired_with: source } : {}),
      equivalences: rules.map((r) => ({ option: r.option, inactive_when: r.inactive_when, reason: r.reason })),
    };
  });
  const shipped = files[0]!.package;
  const plan = {
    $comment: [
      `Written by wwref new-source. To do: ${todo.join('; ')}; then run: wwref add-source THIS_FILE --dry-run`,
      `family ${family} (docs/families.md): ${Object.entries(definition.options)
        .map(([l, what]) => `${l} = ${what}`)
        .join('; ')}`,
      ...notes,
    ],
    plan_version: 1,
    source,
    title: options.title ?? `${files[0]!.name}${shipped ? ` (${shipped.distribution} ${shipped.version})` : ''}`,
    family,
    licence,
    citation,
    homepage,
    raw_files: rawFiles,
    preparation: { recipe: RECIPE_OF[family], params },
    conditions,
    execution: { threads: 1, timeout_seconds: DEFAULT_RECORD_TIMEOUT_SECONDS },
    published: { comparable: false, prepared_match: 'not_published', note: 'not part of the published catalog' },
  };
  return { plan, notes, todo: todo.join('; ') };
}

/** The file name a skeleton is written to when --out is not given. */
export function defaultPlanFile(plan: Record<string, unknown>): string {
  return `${basename(String(plan.source))}.plan.json`;
}
