// The rules the orchestrator and the Python workers share live once, as JSON under contracts/
// (contracts/README.md); each reader parses its file with its own zod schema.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type * as z from 'zod';
import { UserError } from './errors.ts';
import { ROOT } from './paths.ts';

export const CONTRACTS_DIR = join(ROOT, 'contracts');

/** contracts/<file>, parsed and checked; a missing, non-JSON or mis-shaped file is one line. */
export function readContract<T extends z.ZodType>(file: string, schema: T): z.output<T> {
  const path = join(CONTRACTS_DIR, file);
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new UserError(`cannot read the contract ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new UserError(`contract ${path}: ${issue.path.join('.') || '(file)'}: ${issue.message}`);
  }
  return parsed.data;
}
