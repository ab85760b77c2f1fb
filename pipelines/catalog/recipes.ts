// Parameters of each preparation recipe kind (sources/<source>.plan.json, preparation.params), as strict
// zod objects. The Python side (workflows/prepare/) validates the same rules and is what runs them;
// these schemas let a plan fail early, with a field path, before any worker starts.
import { z } from 'zod';

/** Name of one of the plan's raw files (raw_files[].name). */
const RawName = z.string().min(1);
const Name = z.string().min(1);
const Names = z.array(Name).min(1).refine((list) => new Set(list).size === list.length, 'expected distinct entries');
const Seed = z.number().int().nonnegative();
const Fraction = z.number().gt(0).lt(1);

/** UCI tables: classification, regression (grouped split) or clustering (every row). */
const Tabular = z
  .strictObject({
    task: z.enum(['classification', 'regression', 'clustering']),
    file: RawName,
    format: z.enum(['csv', 'whitespace', 'excel', 'arff']),
    /** The first row names the columns (text and spreadsheet formats; ARFF names its own). */
    header: z.boolean().default(false),
    /** Spreadsheet sheet: name or 0-based position (format excel only). */
    sheet: z.union([Name, z.number().int().nonnegative()]).optional(),
    /** Text tables (csv, whitespace) stored gzip-compressed, e.g. scikit-learn's *.csv.gz. */
    compression: z.enum(['none', 'gzip']).optional(),
    /** Further raw files of the same format whose columns are appended to the right of `file`'s (same rows). */
    append_files: z.array(RawName).min(1).optional(),
    /** Names of all columns in file order; replaces the header names. */
    columns: Names.optional(),
    /** Feature columns, in the order they are stored. */
    features: Names,
    target: Name,
    /** Sorted label list: a label is stored as its int64 position (classification, clustering). */
    labels: Names.optional(),
    /** Round values read at a higher precision to the decimals of the text export the catalog read. */
    decimals: z
      .strictObject({
        rounding: z.enum(['half_even', 'half_up']),
        /** Decimals per column. */
        places: z.record(Name, z.number().int().nonnegative()).optional(),
        /** Or: every feature to the decimals a spreadsheet "General" cell this many characters wide shows. */
        width: z.number().int().min(2).optional(),
      })
      .refine((d) => (d.places === undefined) !== (d.width === undefined), 'give either places or width')
      .optional(),
    /** Drop rows identical in every feature and the target, keeping the first in file order. */
    drop_duplicates: z.boolean(),
    /** GroupShuffleSplit over identical feature vectors (classification and regression only). */
    split: z.strictObject({ test_size: Fraction, seed: Seed }).optional(),
  })
  .superRefine((p, ctx) => {
    const issue = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message });
    if (p.features.includes(p.target)) issue('target', 'the target column must not be a feature');
    if ((p.task === 'regression') !== (p.labels === undefined))
      issue('labels', 'required for classification and clustering, absent for regression');
    if ((p.task === 'clustering') !== (p.split === undefined))
      issue('split', 'required for classification and regression, absent for clustering');
    if (p.format !== 'excel' && p.sheet !== undefined) issue('sheet', 'only a spreadsheet (format excel) has sheets');
    if (p.format === 'arff' && p.header) issue('header', 'an ARFF file names its own columns');
    const text = p.format === 'csv' || p.format === 'whitespace';
    if (p.compression && p.compression !== 'none' && !text) issue('compression', 'only text formats (csv, whitespace) can be read compressed');
    if (p.append_files && !text) issue('append_files', 'only text formats (csv, whitespace) can be appended');
    if (p.append_files?.includes(p.file)) issue('append_files', 'the main file cannot be appended to itself');
    for (const column of Object.keys(p.decimals?.places ?? {})) {
      if (!p.features.includes(column) && !(column === p.target && p.labels === undefined))
        ctx.addIssue({ code: 'custom', path: ['decimals', 'places', column], message: 'only feature columns or a regression target can be rounded' });
    }
  });

/** statsmodels dataset CSVs: one column, or several unrolled row by row (elnino's months). */
const StatsmodelsSeries = z.strictObject({
  file: RawName,
  columns: Names,
  fill: z.enum(['none', 'forward']),
  cut_fraction: Fraction,
});

/** scikit-image photographs: grey, LANCZOS to the longer side, Gaussian noise, clipped to [0, 1]. */
const SkimageImage = z.strictObject({
  file: RawName,
  longer_side: z.number().int().positive(),
  noise_std: z.number().positive(),
  seed: Seed,
});

/** MIT-BIH records (raw files <record>.hea/.dat/.atr), read with wfdb. */
const MitdbEcg = z.strictObject({
  record: Name,
  /** Preferred channel names; the record's first channel when none is present. */
  channels: Names,
  samples: z.number().int().positive(),
  qrs_codes: z.array(z.number().int()).min(1),
});

/** Newman GML networks: 60/20/20 edge split with balanced non-edge negatives. */
const NewmanGraph = z.strictObject({
  file: RawName,
  split_seed: Seed,
  holdout_fraction: z.number().gt(0).lt(0.5),
  duplicate_edges: z.enum(['error', 'merge']),
});

/** BEIR corpora: documents title + separator + text; a hash-ranked query cohort from one qrels file. */
const BeirRetrieval = z.strictObject({
  corpus: RawName,
  queries: RawName,
  qrels: RawName,
  title_separator: z.string().min(1),
  cohort: z.strictObject({
    size: z.number().int().positive(),
    hash: z.enum(['md5', 'sha1', 'sha224', 'sha256', 'sha384', 'sha512', 'blake2b', 'blake2s', 'sha3_224', 'sha3_256', 'sha3_384', 'sha3_512']),
    /** Hashed text: a template holding {query_id} and/or {text}. */
    key: z.string().refine((key) => key.includes('{query_id}') || key.includes('{text}'), 'expected {query_id} and/or {text}'),
  }),
  exclude_self: z.boolean(),
});

/** ArguAna original-author corpus: parameters only; its construction is not published (the recipe fails). */
const ArguanaRetrieval = z.strictObject({
  archive: RawName,
  split: z.enum(['training', 'validation', 'test']),
  queries: z.number().int().positive(),
  exclude_self: z.boolean(),
});

export const RECIPE_PARAMS: Record<string, z.ZodType> = {
  tabular: Tabular,
  statsmodels_series: StatsmodelsSeries,
  skimage_image: SkimageImage,
  mitdb_ecg: MitdbEcg,
  newman_graph: NewmanGraph,
  beir_retrieval: BeirRetrieval,
  arguana_retrieval: ArguanaRetrieval,
};

/** Parameters of each recipe that name one (string) or several (array) of the plan's raw files. */
export const RAW_FILE_PARAMS: Record<string, readonly string[]> = {
  tabular: ['file', 'append_files'],
  statsmodels_series: ['file'],
  skimage_image: ['file'],
  newman_graph: ['file'],
  beir_retrieval: ['corpus', 'queries', 'qrels'],
  arguana_retrieval: ['archive'],
};
