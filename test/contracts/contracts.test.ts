// The rules of contracts/ as each language loads and applies them: the real pinned Python prints what
// its workers use (registry, recipe rules and verdicts, name limits and verdicts, digests, code
// coverage), and every value must equal what the TypeScript side uses and, for the shared vectors,
// what the vector file records.
import { execa } from 'execa';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { FAMILIES, FAMILY_NAMES, OPTION_LETTERS } from '../../pipelines/catalog/families.ts';
import { RECIPE_PARAMS, RECIPE_RULES } from '../../pipelines/catalog/recipes.ts';
import { NAME_LIMITS, relativePathProblem, SAFE_FILE_NAME } from '../../pipelines/core/containment.ts';
import { CONTRACTS_DIR } from '../../pipelines/core/contracts.ts';
import { canonicalJson, digest, pyFloat } from '../../pipelines/core/hashing.ts';
import { ROOT } from '../../pipelines/core/paths.ts';
import { currentSettings } from '../support/workspace.ts';
import { REPLAY_PACKAGES, workflowFiles, workflowsSha256 } from '../../pipelines/execution/identity.ts';

const vectors = (name: string) => JSON.parse(readFileSync(join(CONTRACTS_DIR, 'vectors', `${name}.json`), 'utf8'));
const DIGESTS: { vectors: { value: unknown; canonical?: string; sha256: string }[]; refused: unknown[] } = vectors('digest');
const NAMES: { cases: { name: unknown; file_name: boolean; relative_path: boolean }[] } = vectors('naming');
const RECIPE_CASES: { cases: { recipe: string; params: unknown; problem: string | null }[] } = vectors('recipes');

// What the Python side loads and how it applies it, printed as JSON.
const PY_SCRIPT = `
import json, sys
from workflows import identity, records
from workflows.contracts import load
from workflows.families import FAMILIES
from workflows.hashing import digest
from workflows.masks import LETTERS, WIDTHS
from workflows.prepare import RECIPES, validate
from workflows.prepare._params import NAMING, path_name_problem

def decode(v):
    if isinstance(v, dict):
        if set(v) == {"$float"}: return float(v["$float"])
        if set(v) == {"$int"}: return int(v["$int"])
        if set(v) == {"$bytes"}: return bytes.fromhex(v["$bytes"])
        return {k: decode(x) for k, x in v.items()}
    return [decode(x) for x in v] if isinstance(v, list) else v

def name(n):
    return n if isinstance(n, str) else n["prefix"] + n["repeat"] * n["times"] + n["suffix"]

def problem(recipe, params):
    try:
        validate(recipe, params)
        return None
    except ValueError as error:
        where = str(error).split(": ", 2)[1]
        return ".".join(part for part in where.split(".") if not part.isdigit())

def refused(v):
    try:
        digest(decode(v))
        return False
    except (ValueError, UnicodeEncodeError):
        return True

vectors = lambda n: json.load(open(f"contracts/vectors/{n}.json", encoding="utf-8"))
hello = records.hello()
out = {
    "families": hello["families"],
    "modules": {n: m.__name__ for n, m in FAMILIES.items()},
    "letters": LETTERS,
    "widths": WIDTHS,
    "recipes": load("recipes"),
    "implemented_recipes": list(RECIPES),
    "recipe_problems": [problem(c["recipe"], c["params"]) for c in vectors("recipes")["cases"]],
    "naming": NAMING,
    "names": [[path_name_problem(name(c["name"]), False) is None, path_name_problem(name(c["name"]), True) is None] for c in vectors("naming")["cases"]],
    "digests": [digest(decode(v["value"])) for v in vectors("digest")["vectors"]],
    "refused": [refused(v) for v in vectors("digest")["refused"]],
    "bit_deciding": identity.bit_deciding_packages(),
    "versions": list(hello["versions"]),
    "code_files": identity.code_files(),
    "code_sha256": hello["code_sha256"],
}
sys.stdout.write(json.dumps(out, ensure_ascii=True))
`;

interface PyOut {
  families: Record<string, { dimensions: number[]; hash_rule: string }>;
  modules: Record<string, string>;
  letters: string;
  widths: number[];
  recipes: unknown;
  implemented_recipes: string[];
  recipe_problems: (string | null)[];
  naming: unknown;
  names: [boolean, boolean][];
  digests: string[];
  refused: boolean[];
  bit_deciding: string[];
  versions: string[];
  code_files: Record<string, string>;
  code_sha256: string;
}

/** A vector value as TypeScript hashes it: {$float} a Python float, {$int} a bigint, {$bytes} raw bytes. */
function decode(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(decode);
  if (v === null || typeof v !== 'object') return v;
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o);
  if (keys.length === 1 && keys[0] === '$float') {
    const text = o.$float as string;
    return pyFloat(text === 'inf' ? Infinity : text === '-inf' ? -Infinity : Number(text));
  }
  if (keys.length === 1 && keys[0] === '$int') return BigInt(o.$int as string);
  if (keys.length === 1 && keys[0] === '$bytes') return Uint8Array.from(Buffer.from(o.$bytes as string, 'hex'));
  return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, decode(x)]));
}

function nameOf(n: unknown): string {
  if (typeof n === 'string') return n;
  const r = n as { repeat: string; times: number; prefix: string; suffix: string };
  return r.prefix + r.repeat.repeat(r.times) + r.suffix;
}

/** The parameter the first refusal names, list positions left out, or null. */
function recipeProblem(recipe: string, params: unknown): string | null {
  const parsed = RECIPE_PARAMS[recipe]!.safeParse(params);
  return parsed.success ? null : ['params', ...parsed.error.issues[0]!.path.filter((p) => typeof p !== 'number')].join('.');
}

let py: PyOut;
beforeAll(async () => {
  const { stdout } = await execa(currentSettings().python.executable, ['-c', PY_SCRIPT], { cwd: ROOT });
  py = JSON.parse(stdout) as PyOut;
});

describe('family registry (contracts/families.json)', () => {
  it('the workers report the orchestrator’s families, in its order, with the same widths and hash rules, each its own module', () => {
    expect(Object.keys(py.families)).toEqual([...FAMILY_NAMES]);
    expect(py.families).toEqual(
      Object.fromEntries(FAMILY_NAMES.map((n) => [n, { dimensions: [...FAMILIES[n].dimensions], hash_rule: FAMILIES[n].hashRule }])),
    );
    expect(py.modules).toEqual(Object.fromEntries(FAMILY_NAMES.map((n) => [n, `workflows.families.${n}`])));
    expect(FAMILIES.beat_detection.dimensions).toEqual([6]);
    expect(FAMILIES.retrieval.hashRule).toBe('json');
  });

  it('mask letters and widths are the same on both sides', () => {
    expect(py.letters).toBe(OPTION_LETTERS.join(''));
    expect(py.widths).toEqual([...new Set(FAMILY_NAMES.flatMap((n) => FAMILIES[n].dimensions))].sort());
  });
});

describe('recipe parameters (contracts/recipes.json)', () => {
  it('both sides load the same rules, and Python implements exactly the recipes the orchestrator validates', () => {
    expect(py.recipes).toEqual(RECIPE_RULES);
    expect(py.implemented_recipes).toEqual(Object.keys(RECIPE_PARAMS));
  });

  it('every shared case is accepted or refused, at the same parameter, by both sides', () => {
    const expected = RECIPE_CASES.cases.map((c) => c.problem);
    expect(RECIPE_CASES.cases.map((c) => recipeProblem(c.recipe, c.params))).toEqual(expected);
    expect(py.recipe_problems).toEqual(expected);
    expect(expected.filter((p) => p === null).length).toBeGreaterThan(10);
    expect(expected.filter((p) => p !== null).length).toBeGreaterThan(50);
  });
});

describe('name rules (contracts/naming.json)', () => {
  it('one limit for plain file names (200) and one for the names of a relative path (255), on both sides', () => {
    expect(py.naming).toEqual(NAME_LIMITS);
    expect(NAME_LIMITS).toEqual({ file_name_max_characters: 200, path_name_max_characters: 255 });
  });

  it('every shared name gets the same verdicts from SAFE_FILE_NAME / relativePathProblem and path_name_problem', () => {
    const expected = NAMES.cases.map((c) => [c.file_name, c.relative_path]);
    const ts = NAMES.cases.map((c) => [SAFE_FILE_NAME.test(nameOf(c.name)), relativePathProblem(nameOf(c.name)) === undefined]);
    expect(ts).toEqual(expected);
    expect(py.names).toEqual(expected);
  });
});

describe('canonical digest (contracts/vectors/digest.json)', () => {
  it('both implementations write the canonical JSON and digest of every vector', () => {
    for (const v of DIGESTS.vectors) {
      if (v.canonical !== undefined) expect(canonicalJson(decode(v.value)), JSON.stringify(v.value)).toBe(v.canonical);
      expect(digest(decode(v.value)), JSON.stringify(v.value)).toBe(v.sha256);
    }
    expect(py.digests).toEqual(DIGESTS.vectors.map((v) => v.sha256));
  });

  it('both refuse the values that have no canonical form', () => {
    for (const v of DIGESTS.refused) expect(() => digest(decode(v)), JSON.stringify(v)).toThrow();
    expect(py.refused).toEqual(DIGESTS.refused.map(() => true));
  });
});

describe('runtime identity (contracts/identity.json)', () => {
  it('the same bit-deciding packages, reported by the workers', () => {
    expect(py.bit_deciding).toEqual([...REPLAY_PACKAGES]);
    expect(py.versions).toEqual([...REPLAY_PACKAGES]);
    expect(REPLAY_PACKAGES).toContain('numpy');
  });

  it('the workflow-code digest covers the same files, the workflow code and the contracts the workers read, not the vectors', () => {
    const files = workflowFiles();
    expect(py.code_files).toEqual(files);
    expect(py.code_sha256).toBe(workflowsSha256());
    const contracts = Object.keys(files)
      .filter((f) => f.startsWith('contracts/'))
      .sort();
    expect(contracts).toEqual([
      'contracts/families.json',
      'contracts/identity.json',
      'contracts/libm.json',
      'contracts/naming.json',
      'contracts/recipes.json',
    ]);
    expect(Object.keys(files)).toContain('workflows/families/retrieval.py');
    expect(Object.keys(files).some((f) => f.includes('__pycache__'))).toBe(false);
  });
});
