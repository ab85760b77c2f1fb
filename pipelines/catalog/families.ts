// The registry of the eight workflow families. What the workers share with the orchestrator (names
// and their order, mask widths, prediction-hash rule, option letters) is contracts/families.json; this
// module adds what only the orchestrator uses: what each option does (docs/families.md has the full
// definitions) and a cost hint for scheduling. The Python module of the same name (workflows/families/)
// implements each one; every worker reports its own registry and is refused when it disagrees with
// this one (registryProblems).
import * as z from 'zod';
import { readContract } from '../core/contracts.ts';
import { UserError } from '../core/errors.ts';

export const OPTION_LETTERS = ['A', 'B', 'C', 'D', 'E', 'F'] as const;
export type OptionLetter = (typeof OPTION_LETTERS)[number];

interface FamilyNotes {
  /** What each option does when on. */
  options: Partial<Record<OptionLetter, string>>;
  /** Rough relative seconds per record, to start the largest records first when no earlier table exists. */
  relativeCost: number;
}

const NOTES = {
  classification: {
    relativeCost: 0.3,
    options: {
      A: 'signed-log feature transform sign(x)*log1p(|x|)',
      B: 'StandardScaler fitted on the training rows',
      C: "LogisticRegression class_weight='balanced'",
      D: 'LogisticRegression C=0.05 instead of 1.0',
      E: 'SelectPercentile(f_classif, 50) after the scaler',
      F: "PCA(0.95, svd_solver='full') after the selection",
    },
  },
  regression: {
    relativeCost: 0.02,
    options: {
      A: 'log1p/expm1 target transform (TransformedTargetRegressor)',
      B: 'StandardScaler (RobustScaler when F=1 in d6)',
      C: 'degree-2 PolynomialFeatures without bias',
      D: 'Ridge alpha 10 instead of 1',
      E: 'interaction-only degree-2 terms (inactive when C=0)',
      F: 'RobustScaler instead of StandardScaler (inactive when B=0)',
    },
  },
  clustering: {
    relativeCost: 0.3,
    options: {
      A: 'signed-log feature transform',
      B: 'StandardScaler',
      C: "PCA(0.95, svd_solver='full')",
      D: 'KMeans n_init 10 instead of 1',
      E: 'PCA whitening (inactive when C=0)',
      F: "KMeans init 'random' instead of 'k-means++'",
    },
  },
  forecasting: {
    relativeCost: 0.01,
    options: {
      A: 'linear time-trend feature t/cut',
      B: 'lags 1..12 instead of lag 1',
      C: 'log1p transform with expm1 inverse',
      D: 'Ridge alpha 10 instead of 1',
      E: 'RobustScaler instead of StandardScaler',
      F: 'model first differences, invert with the last realised level',
    },
  },
  image_restoration: {
    relativeCost: 0.05,
    options: {
      A: 'median filter 3x3 (5x5 when F=1 in d6)',
      B: 'Gaussian filter sigma 0.8 (1.6 when E=1 in d6)',
      C: 'Wiener filter 5x5',
      D: 'unsharp masking, amount 0.5, sigma 1',
      E: 'Gaussian sigma 1.6 instead of 0.8 (inactive when B=0)',
      F: 'median window 5 instead of 3 (inactive when A=0)',
    },
  },
  retrieval: {
    relativeCost: 5,
    options: {
      A: 'unigrams and bigrams',
      B: "sklearn 'english' stop words removed",
      C: 'sublinear tf 1+log(tf) (inactive when E=1 in d6)',
      D: 'smoothed IDF weighting',
      E: 'binary term counts',
      F: 'no vector normalisation instead of L2',
    },
  },
  beat_detection: {
    relativeCost: 0.1,
    options: {
      A: 'zero-phase Butterworth high-pass 0.5 Hz',
      B: 'zero-phase Butterworth low-pass 35 Hz',
      C: 'squared first difference envelope instead of |w|',
      D: 'moving average of the envelope (120 ms)',
      E: 'robust median/MAD peak threshold instead of mean+std',
      F: 'refractory distance 300 ms instead of 200 ms',
    },
  },
  graph_link_prediction: {
    relativeCost: 0.05,
    options: {
      A: 'common-neighbour count feature',
      B: 'Jaccard coefficient feature',
      C: 'Adamic–Adar index feature',
      D: 'resource-allocation index feature',
      E: 'preferential-attachment feature',
      F: 'StandardScaler fitted on the calibration pairs',
    },
  },
} satisfies Record<string, FamilyNotes>;

export type FamilyName = keyof typeof NOTES;
const NAMES = Object.keys(NOTES) as [FamilyName, ...FamilyName[]];

const Registry = z.strictObject({
  option_letters: z
    .array(z.string())
    .refine(
      (letters) => letters.join() === OPTION_LETTERS.join(),
      `expected ${OPTION_LETTERS.join(', ')} (the orchestrator's option letters)`,
    ),
  families: z
    .array(
      z.strictObject({
        name: z.enum(NAMES),
        dimensions: z.array(z.union([z.literal(4), z.literal(6)])).min(1),
        hash_rule: z.enum(['raw_bytes', 'json', 'json_list']),
      }),
    )
    .refine(
      (list) => list.length === NAMES.length && new Set(list.map((f) => f.name)).size === NAMES.length,
      `expected each of ${NAMES.join(', ')} once`,
    ),
});
const registry = readContract('families.json', Registry);

/** The families in registry order. */
export const FAMILY_NAMES = registry.families.map((f) => f.name) as [FamilyName, ...FamilyName[]];

export interface FamilyDefinition extends FamilyNotes {
  /** Mask widths the family supports. */
  dimensions: readonly (4 | 6)[];
  /** Prediction hash rule (docs/records.md): raw ndarray bytes, JSON of a dict, JSON of tolist(). */
  hashRule: 'raw_bytes' | 'json' | 'json_list';
}

export const FAMILIES = Object.fromEntries(
  registry.families.map((f): [FamilyName, FamilyDefinition] => [
    f.name,
    { ...NOTES[f.name], dimensions: f.dimensions, hashRule: f.hash_rule },
  ]),
) as Record<FamilyName, FamilyDefinition>;

/** How a worker's reported registry (name -> mask widths, hash rule) differs from this one. */
export function registryProblems(reported: Record<string, { dimensions: number[]; hash_rule: string }>): string[] {
  const problems: string[] = [];
  for (const name of FAMILY_NAMES) {
    const theirs = reported[name];
    const ours = FAMILIES[name];
    if (!theirs) problems.push(`family ${name} is missing in the worker`);
    else if (theirs.hash_rule !== ours.hashRule || JSON.stringify(theirs.dimensions) !== JSON.stringify(ours.dimensions)) {
      problems.push(
        `family ${name}: worker ${JSON.stringify(theirs)}, orchestrator ${JSON.stringify({ dimensions: ours.dimensions, hash_rule: ours.hashRule })}`,
      );
    }
  }
  for (const name of Object.keys(reported))
    if (!(FAMILY_NAMES as readonly string[]).includes(name)) problems.push(`family ${name} is unknown to the orchestrator`);
  return problems;
}

/** The registry as text, one block per family (`wwref families`); unknown names are refused. */
export function familyLines(names: readonly string[] = []): string[] {
  for (const name of names) {
    if (!(FAMILY_NAMES as readonly string[]).includes(name))
      throw new UserError(`unknown family '${name}' (known: ${FAMILY_NAMES.join(', ')})`);
  }
  const selected = names.length ? (names as FamilyName[]) : [...FAMILY_NAMES];
  return selected
    .flatMap((name) => {
      const f = FAMILIES[name];
      return [
        `${name}: ${f.dimensions.join(' or ')} options, prediction hash ${f.hashRule}; code workflows/families/${name}.py`,
        ...Object.entries(f.options).map(([letter, what]) => `  ${letter}  ${what}`),
      ];
    })
    .concat('option meanings, inactive rules, metrics and utilities: docs/families.md');
}
