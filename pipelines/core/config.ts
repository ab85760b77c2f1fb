// wwref.config.json at the repository root: the project's settings that are not per command.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as z from 'zod';
import { UserError } from './errors.ts';

export const CONFIG_FILE = 'wwref.config.json';
/** What a runtime name may be (also checked by scripts/setup-python). */
export const RUNTIME_NAME = /^[a-z][a-z0-9_-]{0,31}$/;

const Config = z.strictObject({
  /** Mirror directories of raw files, relative to the repository root. */
  mirrors: z.array(z.string()).default([]),
  /** The numerical profile every Python process runs under (pipelines/execution/numerics.ts). */
  numerical_profile: z.string().min(1).optional(),
  /**
   * Python runtimes by name (scripts/setup-python --runtime NAME creates one; `--runtime NAME` or
   * WWREF_RUNTIME selects it): each names its requirements file of exact pins. `pinned` is the
   * default and is workflows/requirements.txt in .venv when it is not declared; any other runtime
   * lives in .venv-<name> and is created on its first use only.
   */
  runtimes: z
    .record(
      z.string().regex(RUNTIME_NAME, 'a runtime name is a-z, digits, _ and -, starting with a letter (at most 32 characters)'),
      z.strictObject({
        requirements: z.string().min(1),
        description: z.string().optional(),
        /**
         * Variables the runtime needs in every process it runs (set by `--runtime NAME` unless already
         * set to the same value): e.g. WWREF_NUMERICAL_PROFILE and the NumPy/OpenBLAS settings a newer
         * NumPy needs because it names its SIMD targets differently (README "Upgrading the pinned stack").
         */
        environment: z.record(z.string().regex(/^[A-Z][A-Z0-9_]*$/), z.string()).default({}),
        /** Why the runtime differs from the pinned one, in words, for people (shown by `wwref diff`). */
        notes: z.array(z.string()).default([]),
      }),
    )
    .default({}),
});
export type Config = z.infer<typeof Config>;

/**
 * The first key written twice in one object of `text` (JSON that parses), or undefined: JSON.parse
 * would silently keep the last value (a second numerical_profile, say).
 */
function repeatedKey(text: string): string | undefined {
  const open: (Set<string> | undefined)[] = []; // a set of keys per open object, undefined per open array
  let keyNext = false;
  for (let at = 0; at < text.length; at++) {
    const ch = text[at];
    if (ch === '"') {
      let end = at + 1;
      while (text[end] !== '"') end += text[end] === '\\' ? 2 : 1;
      if (keyNext) {
        const key = JSON.parse(text.slice(at, end + 1)) as string;
        const seen = open.at(-1)!;
        if (seen.has(key)) return key;
        seen.add(key);
        keyNext = false;
      }
      at = end;
    } else if (ch === '{') {
      open.push(new Set());
      keyNext = true;
    } else if (ch === '[') open.push(undefined);
    else if (ch === '}' || ch === ']') open.pop();
    else if (ch === ',') keyNext = open.at(-1) !== undefined;
  }
  return undefined;
}

export function readConfig(root: string): Config {
  const path = join(root, CONFIG_FILE);
  if (!existsSync(path)) return Config.parse({});
  let json: unknown;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
    json = JSON.parse(text);
  } catch (error) {
    throw new UserError(`${path} is not JSON: ${(error as Error).message}`);
  }
  const repeated = repeatedKey(text);
  if (repeated !== undefined) throw new UserError(`${path}: the key ${JSON.stringify(repeated)} is written twice in one object; keep one`);
  const parsed = Config.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new UserError(`${path}: ${issue.path.join('.') || '(top level)'}: ${issue.message}`);
  }
  return parsed.data;
}
