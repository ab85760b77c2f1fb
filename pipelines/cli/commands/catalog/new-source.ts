import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { FAMILY_NAMES } from '../../../catalog/families.ts';
import { UserError } from '../../../core/errors.ts';
import { writeFileAtomic } from '../../../core/fsutil.ts';
import { ROOT } from '../../../core/paths.ts';
import { defineCommand } from '../../command.ts';
import { list, withMirror } from '../../options.ts';
import { outputPath } from '../../output-path.ts';

export default defineCommand({
  command: 'new-source',
  describe:
    'write a construction-plan skeleton from a family and raw files: identities, detected columns, conditions, inactive rules; ' +
    'licence and citation from the package where it states them',
  builder: (y) =>
    withMirror(y)
      .option('family', { choices: FAMILY_NAMES, demandOption: true, describe: 'workflow family (wwref families)' })
      .option('file', { type: 'string', array: true, describe: 'raw file by path (repeatable; the first file given is the main one)' })
      .option('package', {
        type: 'string',
        array: true,
        describe:
          'raw file inside a pinned Python package, DISTRIBUTION:PATH, e.g. scikit-learn:sklearn/datasets/data/iris.csv (repeatable; before --file)',
      })
      .option('source', { type: 'string', describe: 'source id (default: from the first file name)' })
      .option('title', { type: 'string', describe: 'readable title' })
      .option('out', { type: 'string', describe: 'plan file to write (default ./<source>.plan.json)' })
      .option('force', { type: 'boolean', default: false, describe: 'overwrite an existing plan file' }),
  run: async (argv, { settings, out }) => {
    const { defaultPlanFile, newSourcePlan } = await import('../../../sources/scaffold.ts');
    const { plan, notes, todo } = await newSourcePlan({
      settings,
      family: argv.family,
      files: list(argv.file, 'file'),
      packages: list(argv.package, 'package'),
      source: argv.source,
      title: argv.title,
    });
    const target = outputPath(settings, argv.out ?? defaultPlanFile(plan), 'out', 'file', { inSources: true });
    if (dirname(target) === resolve(ROOT, 'sources'))
      throw new UserError(
        `--out ${argv.out}: sources/ holds the published catalog; write the plan elsewhere (e.g. sources/examples/ or your own folder)`,
      );
    if (existsSync(target) && !argv.force) throw new UserError(`--out ${target} exists; pass --force to overwrite it`);
    writeFileAtomic(target, `${JSON.stringify(plan, null, 2)}\n`);
    for (const note of notes) out(`- ${note}`);
    out(`plan skeleton written to ${target}: ${todo}, then run`);
    out(`  npx wwref add-source ${target} --dry-run`);
  },
});
