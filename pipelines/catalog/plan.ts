// Construction plans (sources/<source>.plan.json): one per source, validated with zod. A plan names
// the raw files (with sha256), the preparation recipe and its parameters, and the task conditions.
import * as z from 'zod';
import { FAMILIES, FAMILY_NAMES, OPTION_LETTERS } from './families.ts';
import { UserError } from '../core/errors.ts';
import { SAFE_FILE_NAME, SAFE_RELATIVE_PATH, SAFE_RELATIVE_PATH_RULE } from '../core/containment.ts';
import { RAW_FILE_PARAMS, RECIPE_PARAMS } from './recipes.ts';

/** Per-record timeout of a plan that does not set one. */
export const DEFAULT_RECORD_TIMEOUT_SECONDS = 180;

export const Sha256 = z.string().regex(/^[0-9a-f]{64}$/, 'expected a lowercase hex sha256 (64 characters)');

/**
 * The one name rule of source ids and condition ids (they become folder and file names: prepared/<source>/,
 * manifests/<source>.json, <condition>.arrow): lower-case letters, digits and _, starting with a letter,
 * at most 64 characters. `mitdb_100__d6` (double underscore) is valid.
 */
export const ID_PATTERN = /^[a-z][a-z0-9_]*$/;
export const ID_MAX_LENGTH = 64;
export const ID_RULE = `lower-case letters, digits and _, starting with a letter, at most ${ID_MAX_LENGTH} characters`;
export const Identifier = z
  .string()
  .max(ID_MAX_LENGTH, `expected at most ${ID_MAX_LENGTH} characters (${ID_RULE})`)
  .regex(ID_PATTERN, `expected ${ID_RULE}`);
/** Whether `id` satisfies the name rule of source and condition ids. */
export function isValidId(id: string): boolean {
  return Identifier.safeParse(id).success;
}

/** Largest raw file a plan may declare (and acquisition will download or copy): 2 GiB. */
export const MAX_RAW_FILE_BYTES = 2 * 1024 ** 3;
/** A path under a folder (mirror directory, site-packages): never absolute, never climbing out with `..`. */
const RelativePath = z.string().regex(SAFE_RELATIVE_PATH, `expected ${SAFE_RELATIVE_PATH_RULE}`);
const Letter = z.enum(OPTION_LETTERS);

export const RawFile = z.strictObject({
  /** Name inside the source's raw folder (may hold '/'), e.g. "qrels/test.tsv". */
  name: RelativePath,
  sha256: Sha256,
  bytes: z
    .number()
    .int()
    .positive()
    .max(MAX_RAW_FILE_BYTES, `expected at most ${MAX_RAW_FILE_BYTES} bytes (2 GiB), the largest raw file wwref acquires`),
  /** Path of the file under a mirror directory, e.g. "spambase/spambase.data". */
  mirror_path: RelativePath,
  /** The same file shipped inside a pinned Python package (path relative to its site-packages). */
  package: z.strictObject({ distribution: z.string(), version: z.string(), path: RelativePath }).optional(),
  /** Where a networked machine can download it. */
  upstream_url: z.url().optional(),
  /** A member of an archive (zip/tar) at upstream_url, when the upstream is an archive. */
  upstream_member: z.string().optional(),
});
export type RawFile = z.infer<typeof RawFile>;

export const Equivalence = z.strictObject({
  option: Letter,
  /** The option has no effect when every listed option has the given value. */
  inactive_when: z.partialRecord(Letter, z.union([z.literal(0), z.literal(1)])),
  reason: z.string().optional(),
});
export type Equivalence = z.infer<typeof Equivalence>;

export const Condition = z.strictObject({
  id: Identifier,
  dimensions: z.union([z.literal(4), z.literal(6)]),
  /**
   * The option set, optional and only declarative: the first `dimensions` option letters of the
   * family (A–D or A–F); mask position i switches option letter i (docs/families.md).
   */
  options: z.array(Letter).optional(),
  /** Four-option condition whose records the E=F=0 subcube of this six-option condition repeats. */
  paired_with: Identifier.optional(),
  equivalences: z.array(Equivalence).default([]),
});
export type Condition = z.infer<typeof Condition>;

export const Plan = z
  .strictObject({
    $schema: z.string().optional().describe('path or URL of this JSON Schema (sources/plan.schema.json), for editors'),
    $comment: z
      .union([z.string(), z.array(z.string())])
      .optional()
      .describe(
        'notes for the people editing the plan (wwref new-source writes the family options and what it detected here); read by no stage',
      ),
    plan_version: z.literal(1).describe('format version of the construction plan'),
    source: Identifier.describe('source identity: unique name, also the folder prepared/<source>/ and manifests/<source>.json'),
    title: z.string().min(1),
    family: z.enum(FAMILY_NAMES).describe('workflow family (docs/families.md); fixes the options A–F and the metric'),
    licence: z.string().min(1, 'a licence is required').describe('licence of the raw data (as its distributor documents it)'),
    citation: z.string().min(1, 'a citation is required').describe('how to cite the data: creators, title, where it was obtained'),
    homepage: z.string().optional(),
    raw_files: z.array(RawFile).min(1).describe('upstream files, each pinned by sha256 and size'),
    /** The identity the published catalog recorded for its raw input, when we read another file. */
    published_raw: z.array(z.strictObject({ url: z.string(), sha256: Sha256.optional(), note: z.string() })).optional(),
    preparation: z
      .strictObject({ recipe: z.string(), params: z.record(z.string(), z.unknown()) })
      .describe('preparation recipe kind (docs/recipes.md) and its parameters, seeds included'),
    conditions: z.array(Condition).min(1).describe('task conditions: each runs every mask of its 4 or 6 options'),
    execution: z
      .strictObject({ threads: z.literal(1), timeout_seconds: z.number().positive() })
      .default({ threads: 1, timeout_seconds: DEFAULT_RECORD_TIMEOUT_SECONDS })
      .describe('one computation thread; per-record timeout in seconds'),
    /** How our prepared input relates to the published one. */
    published: z
      .strictObject({
        comparable: z.boolean(),
        prepared_match: z.enum(['byte_identical', 'not_identical', 'not_published']),
        note: z.string(),
        /**
         * Published records whose prediction bytes this platform does not reproduce although the
         * utility is bit-identical (e.g. numpy's log1p/expm1 take other code paths on CPUs without
         * AVX-512). Conformance checks still require the exact utility of these records.
         */
        known_deviations: z
          .array(
            z.strictObject({
              condition: Identifier,
              masks: z.array(z.string().regex(/^[01]{4}([01]{2})?$/)).min(1),
              reason: z.string().min(1),
            }),
          )
          .optional(),
      })
      .default({ comparable: false, prepared_match: 'not_published', note: 'not part of the published catalog' }),
  })
  .superRefine((plan, ctx) => {
    const family = FAMILIES[plan.family];
    const params = Object.hasOwn(RECIPE_PARAMS, plan.preparation.recipe) ? RECIPE_PARAMS[plan.preparation.recipe] : undefined;
    if (!params) {
      ctx.addIssue({
        code: 'custom',
        path: ['preparation', 'recipe'],
        message: `unknown recipe '${plan.preparation.recipe}' (known: ${Object.keys(RECIPE_PARAMS).join(', ')})`,
      });
    } else {
      // a record name becomes file names (<record>.hea, .dat, .atr) next to each other: one plain name
      const record = plan.preparation.params.record;
      if (plan.preparation.recipe === 'mitdb_ecg' && typeof record === 'string' && !SAFE_FILE_NAME.test(record)) {
        ctx.addIssue({
          code: 'custom',
          path: ['preparation', 'params', 'record'],
          message: `'${record}' is not a plain file name (no '/', backslash, '.' or '..')`,
        });
      }
      const parsed = params.safeParse(plan.preparation.params);
      for (const issue of parsed.error?.issues ?? []) {
        ctx.addIssue({ ...issue, path: ['preparation', 'params', ...issue.path] } as never);
      }
      // parameters naming raw files must name one of raw_files[].name
      const names = new Set(plan.raw_files.map((f) => f.name));
      for (const key of RAW_FILE_PARAMS[plan.preparation.recipe] ?? []) {
        const value = plan.preparation.params[key];
        const listed =
          typeof value === 'string' ? [[value, [key]] as const] : Array.isArray(value) ? value.map((v, i) => [v, [key, i]] as const) : [];
        for (const [name, path] of listed) {
          if (typeof name === 'string' && !names.has(name)) {
            ctx.addIssue({
              code: 'custom',
              path: ['preparation', 'params', ...path],
              message: `'${name}' is not one of the plan's raw files (${[...names].join(', ')})`,
            });
          }
        }
      }
    }
    const rawNames = new Set<string>();
    plan.raw_files.forEach((file, i) => {
      if (rawNames.has(file.name))
        ctx.addIssue({ code: 'custom', path: ['raw_files', i, 'name'], message: `raw file '${file.name}' is listed twice` });
      rawNames.add(file.name);
    });
    const declared = new Map<string, number>();
    plan.conditions.forEach((condition, i) => {
      if (declared.has(condition.id))
        ctx.addIssue({ code: 'custom', path: ['conditions', i, 'id'], message: `condition '${condition.id}' is declared twice` });
      else declared.set(condition.id, condition.dimensions);
    });
    plan.conditions.forEach((condition, i) => {
      if (!family.dimensions.includes(condition.dimensions)) {
        ctx.addIssue({
          code: 'custom',
          path: ['conditions', i, 'dimensions'],
          message: `family ${plan.family} has ${family.dimensions.join(' or ')} options, not ${condition.dimensions}`,
        });
      }
      const letters = OPTION_LETTERS.slice(0, condition.dimensions) as readonly string[];
      if (condition.options) {
        condition.options.forEach((letter, j) => {
          if (!(letter in family.options)) {
            ctx.addIssue({
              code: 'custom',
              path: ['conditions', i, 'options', j],
              message: `family ${plan.family} has no option ${letter}`,
            });
          }
        });
        if (condition.options.join('') !== letters.join('')) {
          ctx.addIssue({
            code: 'custom',
            path: ['conditions', i, 'options'],
            message:
              `a ${condition.dimensions}-option ${plan.family} condition uses options ${letters.join(', ')} ` +
              `(mask width ${condition.dimensions}), not ${condition.options.join(', ') || 'none'}`,
          });
        }
      }
      condition.equivalences.forEach((eq, j) => {
        for (const letter of [eq.option, ...Object.keys(eq.inactive_when)]) {
          if (!letters.includes(letter)) {
            ctx.addIssue({
              code: 'custom',
              path: ['conditions', i, 'equivalences', j],
              message: `unknown option ${letter}: a ${condition.dimensions}-option condition has ${letters.join('')}`,
            });
          }
        }
      });
      if (condition.paired_with && condition.dimensions !== 6) {
        ctx.addIssue({ code: 'custom', path: ['conditions', i, 'paired_with'], message: 'only a 6-option condition can be paired' });
      } else if (condition.paired_with && declared.get(condition.paired_with) !== 4) {
        ctx.addIssue({
          code: 'custom',
          path: ['conditions', i, 'paired_with'],
          message: `'${condition.paired_with}' is not a 4-option condition of this plan`,
        });
      }
    });
  });
export type Plan = z.infer<typeof Plan>;

/** Field-level, file-named message for a failed plan validation: one line, or one line per issue. */
export function describePlanIssues(file: string, error: z.ZodError): string {
  const lines = error.issues.map((issue) => `${issue.path.length ? issue.path.join('.') : '(plan)'}: ${issue.message}`);
  if (lines.length === 1) return `invalid construction plan ${file}: ${lines[0]}`;
  return `invalid construction plan ${file}:\n${lines.map((line) => `  - ${line}`).join('\n')}`;
}

interface Visit {
  value: unknown;
  key?: string;
  parent?: Visit;
}

/** Path (e.g. "title", "conditions.0.id") of a string or key holding a lone surrogate; walked without recursion (any depth). */
function loneSurrogateAt(json: unknown): string | undefined {
  const pathOf = (visit: Visit | undefined, last?: string): string => {
    const names = last === undefined ? [] : [last];
    for (let v = visit; v?.key !== undefined; v = v.parent) names.unshift(v.key);
    return names.join('.') || '(plan)';
  };
  const pending: Visit[] = [{ value: json }];
  while (pending.length) {
    const visit = pending.pop()!;
    if (typeof visit.value === 'string' && /\p{Cs}/u.test(visit.value)) return pathOf(visit);
    if (typeof visit.value !== 'object' || visit.value === null) continue;
    for (const [key, value] of Object.entries(visit.value)) {
      if (/\p{Cs}/u.test(key)) return pathOf(visit, key);
      pending.push({ value, key, parent: visit });
    }
  }
  return undefined;
}

export function parsePlan(file: string, text: string): Plan {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new UserError(`invalid construction plan ${file}: not JSON (${(error as Error).message})`);
  }
  // "\ud800" is valid JSON but no text: neither UTF-8 nor the plan hash (Python's) can encode it
  const surrogate = loneSurrogateAt(json);
  if (surrogate)
    throw new UserError(
      `invalid construction plan ${file}: ${surrogate}: a \\u escape encodes half a character ` +
        `(a lone surrogate, U+D800–U+DFFF); write the character itself`,
    );
  const parsed = Plan.safeParse(json);
  if (!parsed.success) throw new UserError(describePlanIssues(file, parsed.error));
  return parsed.data;
}

/** The plan schema's title: how `plan-schema` recognises a file it wrote. */
export const PLAN_SCHEMA_TITLE = 'wwref construction plan';

/**
 * JSON Schema (draft 2020-12) of a construction plan, for editors (sources/plan.schema.json): the zod
 * schema above, with `preparation.params` spelled out per recipe kind. Cross-field rules (options
 * of the family, raw file names, pairing) are checked by parsePlan only.
 */
export function planJsonSchema(): Record<string, unknown> {
  const options = { io: 'input', unrepresentable: 'any' } as const;
  // biome-ignore lint/suspicious/noExplicitAny: zod's JSON Schema, edited in place below
  const schema = z.toJSONSchema(Plan, options) as Record<string, any>;
  const recipes = Object.keys(RECIPE_PARAMS);
  const preparation = schema.properties.preparation;
  preparation.properties.recipe = { type: 'string', enum: recipes, description: 'recipe kind' };
  preparation.allOf = recipes.map((recipe) => {
    const { $schema: _, ...params } = z.toJSONSchema(RECIPE_PARAMS[recipe]!, options) as Record<string, unknown>;
    // biome-ignore lint/suspicious/noThenProperty: JSON Schema's if/then keywords
    return { if: { properties: { recipe: { const: recipe } } }, then: { properties: { params } } };
  });
  return {
    ...schema,
    title: PLAN_SCHEMA_TITLE,
    description: 'A source and its task conditions (pipelines/catalog/plan.ts); validate with `wwref add-source PLAN --dry-run`.',
  };
}

/** Masks of a condition whose published prediction bytes this platform is declared not to reproduce. */
export function deviatingMasks(plan: Plan, condition: string): Set<string> {
  return new Set((plan.published.known_deviations ?? []).filter((d) => d.condition === condition).flatMap((d) => d.masks));
}
