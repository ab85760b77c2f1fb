import { writeFileAtomic } from '../../../core/fsutil.ts';
import { defineCommand } from '../../command.ts';
import { outputPath } from '../../output-path.ts';

export default defineCommand({
  command: 'plan-schema',
  describe: 'write the JSON Schema of construction plans (for editors; committed as sources/plan.schema.json)',
  builder: (y) => y.option('out', { type: 'string', describe: 'output file (default: standard output)' }),
  run: async (argv, { settings, out }) => {
    const { planJsonSchema } = await import('../../../catalog/plan.ts');
    const text = `${JSON.stringify(planJsonSchema(), null, 2)}\n`;
    if (!argv.out) return void process.stdout.write(text);
    writeFileAtomic(outputPath(settings, argv.out, 'out', 'file', true), text);
    out(`plan schema written to ${argv.out}`);
  },
});
