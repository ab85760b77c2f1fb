// wwref.config.json at the repository root: the project's settings that are not per command.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { UserError } from './errors.ts';

export const CONFIG_FILE = 'wwref.config.json';

const Config = z.strictObject({
  /** Mirror directories of raw files, relative to the repository root. */
  mirrors: z.array(z.string()).default([]),
  /** The numerical profile every Python process runs under (pipelines/execution/numerics.ts). */
  numerical_profile: z.string().min(1).optional(),
});
export type Config = z.infer<typeof Config>;

export function readConfig(root: string): Config {
  const path = join(root, CONFIG_FILE);
  if (!existsSync(path)) return Config.parse({});
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new UserError(`${path} is not JSON: ${(error as Error).message}`);
  }
  const parsed = Config.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new UserError(`${path}: ${issue.path.join('.') || '(top level)'}: ${issue.message}`);
  }
  return parsed.data;
}
