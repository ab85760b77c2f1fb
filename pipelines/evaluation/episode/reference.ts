// The reference an episode was started on: its identity and surface read from the reference folder
// and checked against the identity fixed at the start (`referenceOf`, at the start and at every
// action), and the observed utilities of a state checked against the reference's
// (`checkObservedValues`: a state edited by hand is refused).
import { join } from 'node:path';
import { UserError } from '../../core/errors.ts';
import type { Settings } from '../../core/settings.ts';
import { maskIndex } from '../../catalog/masks.ts';
import { ReferenceStore } from '../../references/store.ts';
import { groupByCondition, surfaceFromRecords, type Surface } from '../../analysis/effects.ts';
import { EVENTS_FILE } from '../receipt.ts';
import type { EpisodeState, Identity } from './state.ts';

/** Refuses a state whose observed utilities are not the reference's (a state edited by hand). */
export function checkObservedValues(state: EpisodeState, surface: Surface, dir: string): void {
  const path = join(dir, EVENTS_FILE);
  if (surface.dimensions !== state.dimensions)
    throw new UserError(`the episode in ${path} has ${state.dimensions} options, the reference ${surface.dimensions}`);
  const wrong = state.observations.filter((o) => o.utility !== surface.utilities[maskIndex(o.mask, state.dimensions)]);
  if (wrong.length)
    throw new UserError(
      `the events log ${path} records an episode the rules could not produce: the observed utility of ${wrong
        .slice(0, 5)
        .map((o) => o.mask)
        .join(', ')}${wrong.length > 5 ? ', …' : ''} is not the reference's`,
    );
}

/** The reference surface of the episode's condition, refused when its identity is not the one fixed at the start. */
export function referenceOf(
  settings: Settings,
  references: string,
  condition: string,
  fixed?: Identity,
): { identity: Identity; surface: Surface } {
  const store = new ReferenceStore(references, settings.paths);
  const manifest = store.requireManifest();
  const entry = store.select(manifest, [condition])[0]![1];
  const identity: Identity = {
    source: entry.source,
    family: entry.family,
    dimensions: entry.dimensions,
    table_sha256: entry.table_sha256,
    plan_sha256: entry.plan_sha256,
  };
  if (fixed) {
    const changed = (Object.keys(fixed) as (keyof Identity)[]).filter((key) => fixed[key] !== identity[key]);
    if (changed.length) {
      throw new UserError(
        `the reference of condition '${condition}' in ${store.dir} changed since the episode started ` +
          `(${changed.map((k) => `${k} ${fixed[k]} -> ${identity[k]}`).join(', ')}); the episode cannot go on`,
      );
    }
  }
  const [records] = groupByCondition(store.table(condition, manifest).records);
  return { identity, surface: surfaceFromRecords(records ?? []) };
}
