// Read access to the published catalog facts (../shared/published), used only for conformance checks.
import { existsSync, readFileSync } from 'node:fs';
import { splitCsvLine } from '../core/tabular.ts';
import { join } from 'node:path';

/** Whether `dir` (the settings' paths.published) holds the published facts. */
export function hasPublished(dir: string): boolean {
  return existsSync(join(dir, 'prepared_sha256.json'));
}

function readJson<T>(dir: string, name: string): T | undefined {
  const path = join(dir, name);
  return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as T) : undefined;
}

/** Published sha256 of a source's prepared file, e.g. ("co2", "arrays.npz"). */
export function publishedPreparedSha256(dir: string, source: string, file: string): string | undefined {
  return readJson<{ files_sha256: Record<string, string> }>(dir, 'prepared_sha256.json')?.files_sha256[`inputs/${source}/${file}`];
}

export function publishedReplayVersions(dir: string): Record<string, string> | undefined {
  return readJson<{ replay_versions: Record<string, string> }>(dir, 'prepared_sha256.json')?.replay_versions;
}

/** The published source block of a condition (sources.json). */
export function publishedSource(dir: string, condition: string): Record<string, unknown> | undefined {
  return readJson<{ sources: Record<string, { source: Record<string, unknown> }> }>(dir, 'sources.json')?.sources[condition]?.source;
}

export interface PublishedCondition {
  family: string;
  source_instance: string;
  dimensions: number;
  free_observations: { mask: string; utility: number }[];
}

export function publishedConditions(dir: string): Record<string, PublishedCondition> {
  return readJson<{ conditions: Record<string, PublishedCondition> }>(dir, 'conditions.json')?.conditions ?? {};
}

export interface PublishedRecord {
  mask: string;
  utility: number;
  native_metric: string;
  native_value: number;
  prediction_sha256: string;
}

/** The published records of a condition (published/references/<condition>.csv), when given. */
export function publishedRecords(dir: string, condition: string): PublishedRecord[] | undefined {
  const path = join(dir, 'references', `${condition}.csv`);
  if (!existsSync(path)) return undefined;
  const [header, ...lines] = readFileSync(path, 'utf8').trim().split('\n');
  const columns = splitCsvLine(header!);
  const col = (name: string) => columns.indexOf(name);
  return lines.map((line) => {
    const cells = splitCsvLine(line);
    return {
      mask: cells[col('mask')]!,
      utility: Number(cells[col('utility')]),
      native_metric: cells[col('native_metric')]!,
      native_value: Number(cells[col('native_value')]),
      prediction_sha256: cells[col('prediction_sha256')]!,
    };
  });
}
