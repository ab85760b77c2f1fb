// Parameters of each preparation recipe kind (sources/<source>.plan.json, preparation.params), as strict
// zod objects built from contracts/recipes.json, the one statement of each parameter's type, bounds and
// default; the Python side (workflows/prepare/_params.py) checks the same file and runs the recipes.
// The rules that tie parameters together are code on both sides (tabularRules here, check() in
// workflows/prepare/tabular.py), held in step by the shared cases of contracts/vectors/recipes.json.
// These schemas let a plan fail early, with a field path, before any worker starts.
import * as z from 'zod';
import { readContract } from '../core/contracts.ts';

const TYPES = [
  'text',
  'raw_file',
  'raw_files',
  'file_name',
  'names',
  'choice',
  'boolean',
  'integer',
  'number',
  'integers',
  'sheet',
  'integer_map',
  'object',
] as const;

interface Rule {
  type: (typeof TYPES)[number];
  optional?: boolean;
  default?: unknown;
  choices?: [string, ...string[]];
  minimum?: number;
  above?: number;
  below?: number;
  contains_any?: string[];
  params?: Record<string, Rule>;
}

const RuleSchema: z.ZodType<Rule> = z.lazy(() =>
  z
    .strictObject({
      type: z.enum(TYPES),
      optional: z.boolean().optional(),
      default: z.unknown().optional(),
      choices: z.tuple([z.string()], z.string()).optional(),
      minimum: z.number().optional(),
      above: z.number().optional(),
      below: z.number().optional(),
      contains_any: z.array(z.string().min(1)).min(1).optional(),
      params: z.record(z.string(), RuleSchema).optional(),
    })
    .refine(
      (rule) => (rule.type === 'choice') === (rule.choices !== undefined) && (rule.type === 'object') === (rule.params !== undefined),
      'choices go with type choice, params with type object',
    ),
);
/** Each recipe's parameter rules, as contracts/recipes.json states them. */
export const RECIPE_RULES = readContract('recipes.json', z.record(z.string(), z.record(z.string(), RuleSchema)));

const Name = z.string().min(1);
const Names = z
  .array(Name)
  .min(1)
  .refine((list) => new Set(list).size === list.length, 'expected distinct entries');

function bounded(schema: z.ZodNumber, rule: Rule): z.ZodNumber {
  let bound = schema;
  if (rule.minimum !== undefined) bound = bound.min(rule.minimum);
  if (rule.above !== undefined) bound = bound.gt(rule.above);
  if (rule.below !== undefined) bound = bound.lt(rule.below);
  return bound;
}

function valueSchema(rule: Rule): z.ZodType {
  switch (rule.type) {
    case 'text':
      return rule.contains_any
        ? Name.refine(
            (text) => rule.contains_any!.some((part) => text.includes(part)),
            `expected a template holding ${rule.contains_any.join(' and/or ')}`,
          )
        : Name;
    case 'raw_file':
    case 'file_name': // its plain-name rule: SAFE_FILE_NAME, checked by plan.ts
      return Name;
    case 'raw_files':
    case 'names':
      return Names;
    case 'choice':
      return z.enum(rule.choices!);
    case 'boolean':
      return z.boolean();
    case 'integer':
      return bounded(z.number().int(), rule);
    case 'number':
      return bounded(z.number(), rule);
    case 'integers':
      return z.array(z.number().int()).min(1);
    case 'sheet':
      return z.union([Name, z.number().int().nonnegative()]);
    case 'integer_map':
      return z.record(Name, bounded(z.number().int(), rule));
    case 'object':
      return objectSchema(rule.params!);
  }
}

function objectSchema(rules: Record<string, Rule>): z.ZodObject {
  return z.strictObject(
    Object.fromEntries(
      Object.entries(rules).map(([key, rule]) => {
        const value = valueSchema(rule);
        // a default is the Python side's: documented in the JSON Schema, not filled in, so rules see what the plan says
        return [
          key,
          rule.default !== undefined ? value.optional().meta({ default: rule.default }) : rule.optional ? value.optional() : value,
        ];
      }),
    ),
  );
}

interface Tabular {
  task: string;
  format: string;
  file: string;
  header?: boolean;
  sheet?: unknown;
  compression?: string;
  append_files?: string[];
  features: string[];
  target: string;
  labels?: string[];
  decimals?: { places?: Record<string, number>; width?: number };
  split?: unknown;
}

/** The tabular parameters that depend on each other (workflows/prepare/tabular.py, check). */
function tabularRules(p: Tabular, ctx: z.RefinementCtx): void {
  const issue = (path: (string | number)[], message: string) => ctx.addIssue({ code: 'custom', path, message });
  if (p.features.includes(p.target)) issue(['target'], 'the target column must not be a feature');
  if ((p.task === 'regression') !== (p.labels === undefined))
    issue(['labels'], 'required for classification and clustering, absent for regression');
  if ((p.task === 'clustering') !== (p.split === undefined))
    issue(['split'], 'required for classification and regression, absent for clustering');
  if (p.format !== 'excel' && p.sheet !== undefined) issue(['sheet'], 'only a spreadsheet (format excel) has sheets');
  if (p.format === 'arff' && p.header) issue(['header'], 'an ARFF file names its own columns');
  const text = p.format === 'csv' || p.format === 'whitespace';
  if (p.compression !== undefined && p.compression !== 'none' && !text)
    issue(['compression'], 'only text formats (csv, whitespace) can be read compressed');
  if (p.append_files && !text) issue(['append_files'], 'only text formats (csv, whitespace) can be appended');
  if (p.append_files?.includes(p.file)) issue(['append_files'], 'the main file cannot be appended to itself');
  if (p.decimals && (p.decimals.places === undefined) === (p.decimals.width === undefined))
    issue(['decimals'], 'give either places or width');
  for (const column of Object.keys(p.decimals?.places ?? {})) {
    if (!p.features.includes(column) && !(column === p.target && p.labels === undefined))
      issue(['decimals', 'places', column], 'only feature columns or a regression target can be rounded');
  }
}

export const RECIPE_PARAMS: Record<string, z.ZodType> = Object.fromEntries(
  Object.entries(RECIPE_RULES).map(([recipe, rules]) => {
    const schema = objectSchema(rules);
    return [recipe, recipe === 'tabular' ? schema.superRefine((p, ctx) => tabularRules(p as unknown as Tabular, ctx)) : schema];
  }),
);

/** Parameters of each recipe that name one (string) or several (array) of the plan's raw files. */
export const RAW_FILE_PARAMS: Record<string, readonly string[]> = Object.fromEntries(
  Object.entries(RECIPE_RULES).map(([recipe, rules]) => [
    recipe,
    Object.keys(rules).filter((key) => rules[key]!.type === 'raw_file' || rules[key]!.type === 'raw_files'),
  ]),
);
