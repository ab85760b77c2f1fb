import { UserError } from '../../../core/errors.ts';
import { writeFileAtomic } from '../../../core/fsutil.ts';
import { defineCommand } from '../../command.ts';
import { list } from '../../options.ts';
import { outputPath } from '../../output-path.ts';

export default defineCommand({
  command: 'diff <a> <b>',
  describe:
    'compare two sets of references (folders, or a folder and a WhatWorkedBench pack): changed hashes, utilities, statuses, ' +
    'best masks, sign reversals, conditional effects, equivalence classes',
  builder: (y) =>
    y
      .positional('a', { type: 'string', demandOption: true, describe: 'reference folder (or pack) A, e.g. outputs/references' })
      .positional('b', { type: 'string', demandOption: true, describe: 'reference folder (or pack) B, e.g. outputs/current' })
      .option('condition', { type: 'string', array: true, describe: 'condition(s); default every condition of both' })
      .option('json', { type: 'string', describe: 'also write the whole diff as JSON to this file' })
      .option('html', {
        type: 'string',
        describe: 'also write an HTML page: the diff table and the surfaces of A and B side by side for the conditions that changed most',
      })
      .option('all', { type: 'boolean', default: false, describe: 'list unchanged conditions too' }),
  run: async (argv, { settings, out }) => {
    const { diffLines, diffReferencesWithSides, writeDiffJson } = await import('../../../analysis/diff.ts');
    // never into what it compares (a pack is a folder of its own kind the reference rule does not know)
    const reads = [argv.a!, argv.b!];
    const json = argv.json === undefined ? undefined : outputPath(settings, argv.json, 'json', 'file', { reads });
    const html = argv.html === undefined ? undefined : outputPath(settings, argv.html, 'html', 'file', { reads });
    if (json && html && json === html) throw new UserError('--json and --html name the same file; name two');
    const { report, a, b } = diffReferencesWithSides(settings.paths, argv.a!, argv.b!, list(argv.condition, 'condition'));
    for (const line of diffLines(report, { all: argv.all })) out(line);
    if (json) {
      writeDiffJson(json, report);
      out(`diff written to ${argv.json}`);
    }
    if (html) {
      const { renderDiffPage, surfacesOf } = await import('../../../analysis/diff-html.ts');
      writeFileAtomic(html, renderDiffPage(report, surfacesOf(report, a.conditions, b.conditions)));
      out(`diff page written to ${argv.html}`);
    }
  },
});
