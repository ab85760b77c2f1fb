// The catalog: every construction plan in sources/ and the task conditions they declare.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { UserError } from './errors.ts';
import type { FamilyName } from './families.ts';
import { digest } from './hashing.ts';
import { parsePlan, type Condition, type Plan } from './plan.ts';
import { ROOT, SOURCES_DIR } from './paths.ts';

export interface LoadedPlan {
  plan: Plan;
  /** Path relative to the repository root. */
  file: string;
  /** sha256 of the plan's canonical JSON (sorted keys, compact): the frozen identity of the plan. */
  sha256: string;
}

export interface CatalogCondition {
  id: string;
  source: string;
  family: FamilyName;
  dimensions: 4 | 6;
  condition: Condition;
  plan: LoadedPlan;
}

export function loadPlanFile(file: string): LoadedPlan {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    throw new UserError(`construction plan not found: ${file}`);
  }
  const rel = relative(ROOT, file);
  const plan = parsePlan(rel.startsWith('..') ? file : rel, text);
  return { plan, file: rel, sha256: digest(JSON.parse(text)) };
}

export class Catalog {
  readonly plans = new Map<string, LoadedPlan>();
  readonly conditions = new Map<string, CatalogCondition>();

  constructor(plans: LoadedPlan[]) {
    for (const loaded of plans) {
      const { plan } = loaded;
      if (this.plans.has(plan.source)) {
        throw new UserError(`two plans declare source '${plan.source}': ${this.plans.get(plan.source)!.file} and ${loaded.file}`);
      }
      this.plans.set(plan.source, loaded);
      for (const condition of plan.conditions) {
        if (this.conditions.has(condition.id)) throw new UserError(`condition '${condition.id}' is declared twice (${loaded.file})`);
        this.conditions.set(condition.id, {
          id: condition.id,
          source: plan.source,
          family: plan.family,
          dimensions: condition.dimensions,
          condition,
          plan: loaded,
        });
      }
    }
  }

  /** Every sources/*.plan.json (the published catalog; worked examples live in sources/examples/). */
  static load(dir = SOURCES_DIR): Catalog {
    const files = readdirSync(dir)
      .filter((f) => f.endsWith('.plan.json'))
      .sort();
    return new Catalog(files.map((f) => loadPlanFile(join(dir, f))));
  }

  source(name: string): LoadedPlan {
    const plan = this.plans.get(name);
    if (!plan) throw new UserError(`unknown source '${name}' (known: ${[...this.plans.keys()].join(', ')})`);
    return plan;
  }

  condition(id: string): CatalogCondition {
    const condition = this.conditions.get(id);
    if (!condition) throw new UserError(`unknown condition '${id}' (see 'wwref list' for the catalog)`);
    return condition;
  }

  /** Selected conditions (all when none named), in catalog order. */
  selectConditions(ids: readonly string[] = []): CatalogCondition[] {
    return ids.length ? ids.map((id) => this.condition(id)) : [...this.conditions.values()];
  }

  selectSources(names: readonly string[] = []): LoadedPlan[] {
    return names.length ? names.map((n) => this.source(n)) : [...this.plans.values()];
  }
}
