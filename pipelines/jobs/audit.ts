// Audit of source manifests: each manifest is checked against itself (content hash), its plan, the
// raw cache, the prepared files and, where they exist, the published facts. Prepared inputs that are
// missing are made first (auditNeeds + sources/prepare.ts prepareMissing, from the CLI) and kept only
// when they have the hashes the manifest records; replayNeeds does the same for replay.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { rawCachePath } from '../sources/acquire.ts';
import { readReferenceTable } from '../references/tables.ts';
import type { Catalog, LoadedPlan } from '../catalog/catalog.ts';
import { checkDeclared, checkPaired } from '../references/equivalences.ts';
import { digest, sha256Hex } from '../core/hashing.ts';
import { referencesDir } from '../core/paths.ts';
import { manifestPath, PREPARED_FILES, readManifest, SourceManifest, type PreparedNeed } from '../sources/prepare.ts';
import { sourcePreparedDir } from '../core/paths.ts';
import { hasPublished, publishedPreparedSha256, publishedSource } from '../catalog/published.ts';
import type { ReferenceRecord } from '../execution/records.ts';
import { readReferenceManifest, requireReferenceManifest, selectEntries } from '../references/manifest.ts';

export type CheckState = 'ok' | 'FAIL' | 'missing' | 'n/a';

export interface SourceAudit {
  source: string;
  checks: Record<'manifest' | 'plan' | 'raw' | 'prepared' | 'published' | 'equivalences', CheckState>;
  problems: string[];
  notes: string[];
}

/** Facts compared with the published source block when both have them. */
const COUNT_FIELDS = [
  'raw_rows',
  'rows',
  'removed_duplicate_feature_label_rows',
  'train_rows',
  'evaluation_rows',
  'feature_group_overlap',
  'series_length',
  'training_stop_exclusive',
  'evaluation_points',
  'causally_forward_filled_points',
  'input_sha256',
  'reference_sha256',
  'corpus_rows',
  'corpus_documents',
  'evaluation_queries',
  'query_ids_sha256',
];

export function auditSource(loaded: LoadedPlan): SourceAudit {
  const { plan } = loaded;
  const audit: SourceAudit = {
    source: plan.source,
    checks: { manifest: 'ok', plan: 'ok', raw: 'ok', prepared: 'ok', published: 'n/a', equivalences: 'n/a' },
    problems: [],
    notes: [],
  };
  const path = manifestPath(plan.source);
  if (!existsSync(path)) {
    audit.checks = { manifest: 'missing', plan: 'n/a', raw: 'n/a', prepared: 'n/a', published: 'n/a', equivalences: 'n/a' };
    audit.problems.push(`${path} does not exist; run 'wwref prepare --source ${plan.source}'`);
    return audit;
  }
  let manifest: SourceManifest;
  try {
    const parsed = SourceManifest.safeParse(JSON.parse(readFileSync(path, 'utf8')));
    if (!parsed.success) throw new Error(parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
    manifest = parsed.data;
  } catch (error) {
    audit.checks = { manifest: 'FAIL', plan: 'n/a', raw: 'n/a', prepared: 'n/a', published: 'n/a', equivalences: 'n/a' };
    audit.problems.push(`${path} is malformed: ${(error as Error).message}`);
    return audit;
  }
  const { content_sha256, ...body } = manifest;
  const recomputed = digest(body);
  if (recomputed !== content_sha256) {
    audit.checks.manifest = 'FAIL';
    audit.problems.push(`${path} was edited after it was written: content_sha256 ${content_sha256}, recomputed ${recomputed}`);
  }

  if (manifest.plan.sha256 !== loaded.sha256) {
    audit.checks.plan = 'FAIL';
    audit.problems.push(`${loaded.file} changed after ${path} was written: manifest plan sha256 ${manifest.plan.sha256}, plan now ${loaded.sha256}`);
  }

  const planFiles = new Map(plan.raw_files.map((f) => [f.name, f.sha256]));
  for (const raw of manifest.raw_files) {
    if (planFiles.get(raw.name) !== raw.sha256) {
      audit.checks.raw = 'FAIL';
      audit.problems.push(`raw file ${raw.name}: manifest sha256 ${raw.sha256}, plan ${planFiles.get(raw.name) ?? '(not in plan)'}`);
    }
    const cached = rawCachePath(raw.sha256);
    if (!existsSync(cached)) {
      if (audit.checks.raw === 'ok') audit.checks.raw = 'missing';
      audit.notes.push(`raw file ${raw.name} is not in the cache (${cached}); run 'wwref acquire --source ${plan.source}'`);
      continue;
    }
    const actual = sha256Hex(readFileSync(cached));
    if (actual !== raw.sha256) {
      audit.checks.raw = 'FAIL';
      audit.problems.push(`raw cache file ${cached} (${raw.name}) changed: expected ${raw.sha256}, got ${actual}`);
    }
  }

  const folder = sourcePreparedDir(plan.source);
  for (const name of PREPARED_FILES) {
    const file = join(folder, name);
    const expected = manifest.prepared_files[name];
    if (!existsSync(file)) {
      audit.checks.prepared = 'missing';
      audit.problems.push(`prepared file ${file} is missing; run 'wwref prepare --source ${plan.source}'`);
      continue;
    }
    const actual = sha256Hex(readFileSync(file));
    if (actual !== expected) {
      audit.checks.prepared = 'FAIL';
      audit.problems.push(`prepared file ${file} changed: manifest ${expected}, file ${actual}`);
    }
  }

  if (hasPublished()) {
    audit.checks.published = 'ok';
    const claimed = plan.published.prepared_match;
    for (const name of PREPARED_FILES) {
      const published = publishedPreparedSha256(plan.source, name);
      if (!published) continue;
      const ours = manifest.prepared_files[name];
      const identical = ours === published;
      if (claimed === 'byte_identical' && !identical) {
        audit.checks.published = 'FAIL';
        audit.problems.push(`${name}: the plan claims byte identity with the published file, but ${ours} != published ${published}`);
      } else if (claimed !== 'byte_identical' && identical) {
        audit.notes.push(`${name} is byte-identical to the published file although the plan says '${claimed}'`);
      } else if (!identical) {
        audit.notes.push(`${name} differs from the published file, as the plan declares (${claimed})`);
      }
    }
    const condition = plan.conditions[0]?.id;
    const facts = publishedSource(condition ?? '');
    if (facts) {
      for (const field of COUNT_FIELDS) {
        if (!(field in facts) || !(field in manifest.facts)) continue;
        const ours = JSON.stringify(manifest.facts[field]);
        const theirs = JSON.stringify(facts[field]);
        if (ours === theirs) continue;
        if (plan.published.comparable) {
          audit.checks.published = 'FAIL';
          audit.problems.push(`fact ${field}: ours ${ours}, published ${theirs}`);
        } else {
          audit.notes.push(`fact ${field}: ours ${ours}, published ${theirs} (not comparable, as the plan declares)`);
        }
      }
    }
  }
  auditEquivalences(loaded, audit);
  return audit;
}

/** Declared equivalences and paired subcubes, checked on the source's reference tables (if built). */
function auditEquivalences(loaded: LoadedPlan, audit: SourceAudit): void {
  const dir = referencesDir();
  const manifest = readReferenceManifest(dir);
  const tables = new Map<string, ReferenceRecord[]>();
  const records = (id: string) => {
    const entry = manifest?.conditions[id];
    if (!entry || !existsSync(join(dir, entry.table))) return undefined;
    if (!tables.has(id)) tables.set(id, readReferenceTable(join(dir, entry.table)).records);
    return tables.get(id);
  };
  for (const condition of loaded.plan.conditions) {
    const rows = records(condition.id);
    if (!rows) continue;
    if (audit.checks.equivalences === 'n/a') audit.checks.equivalences = 'ok';
    const violations = checkDeclared(condition.id, condition.equivalences, rows);
    const four = condition.paired_with ? records(condition.paired_with) : undefined;
    if (four) violations.push(...checkPaired(condition.id, condition.paired_with!, rows, four));
    for (const v of violations) {
      audit.checks.equivalences = 'FAIL';
      audit.problems.push(`${join(dir, `${condition.id}.arrow`)}: ${v.declaration} violated by masks ${v.masks.join(' and ')} (${v.detail})`);
    }
  }
}

/**
 * The prepared inputs an audit of `sources` reads: each source manifest's prepared files, for the
 * sources whose plan is still the one the manifest records (a changed plan is the audit's finding,
 * not something to prepare around). For prepareMissing() before auditCatalog().
 */
export function auditNeeds(catalog: Catalog, sources: readonly string[] = []): PreparedNeed[] {
  return catalog.selectSources(sources).flatMap((loaded) => {
    try {
      const manifest = readManifest(loaded.plan.source);
      return manifest.plan.sha256 === loaded.sha256 ? [{ source: loaded.plan.source, planFile: loaded.file, planSha256: manifest.plan.sha256, files: manifest.prepared_files }] : [];
    } catch {
      return []; // no or a malformed manifest: reported by the audit
    }
  });
}

/** The prepared inputs a replay of `conditions` in reference folder `dir` reads (prepareMissing() before replay()). */
export function replayNeeds(dir: string, conditions: readonly string[] = []): PreparedNeed[] {
  return selectEntries(requireReferenceManifest(dir), dir, [...conditions]).map(([, entry]) => ({
    source: entry.source,
    planFile: entry.plan_file,
    planSha256: entry.plan_sha256,
    files: entry.prepared_files,
  }));
}

export function auditCatalog(catalog: Catalog, sources: readonly string[] = []): SourceAudit[] {
  return catalog.selectSources(sources).map(auditSource);
}

export function auditFailed(audit: SourceAudit): boolean {
  return audit.problems.length > 0;
}
