import { readFileSync } from 'node:fs';
import { isInside } from '../../../core/containment.ts';
import { UserError } from '../../../core/errors.ts';
import { writeFileAtomic } from '../../../core/fsutil.ts';
import { defineCommand } from '../../command.ts';
import { outputPath } from '../../output-path.ts';

export default defineCommand({
  command: 'plan-schema',
  describe: 'write the JSON Schema of construction plans (for editors; committed as sources/plan.schema.json)',
  builder: (y) => y.option('out', { type: 'string', describe: 'output file (default: standard output)' }),
  run: async (argv, { settings, out }) => {
    const { planJsonSchema, PLAN_SCHEMA_TITLE } = await import('../../../catalog/plan.ts');
    const text = `${JSON.stringify(planJsonSchema(), null, 2)}\n`;
    if (!argv.out) return void process.stdout.write(text);
    // the committed sources/plan.schema.json is this command's own output: it may be regenerated in place
    const ownFile = (path: string) => {
      try {
        return (JSON.parse(readFileSync(path, 'utf8')) as { title?: unknown }).title === PLAN_SCHEMA_TITLE;
      } catch {
        return false;
      }
    };
    const target = outputPath(settings, argv.out, 'out', 'file', { inSources: true, ownFile });
    // a *.plan.json under sources/ is read as a construction plan (the catalog's, the worked examples'): a schema there breaks them
    if (isInside(target, settings.paths.sources) && target.endsWith('.plan.json'))
      throw new UserError(`--out ${argv.out}: every sources/*.plan.json is read as a construction plan; name the schema otherwise`);
    writeFileAtomic(target, text);
    out(`plan schema written to ${argv.out}`);
  },
});
