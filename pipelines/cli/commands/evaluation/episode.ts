import { UserError } from '../../../core/errors.ts';
import { defineCommand } from '../../command.ts';
import { outputPath } from '../../output-path.ts';

const ACTIONS = ['start', 'observe', 'status', 'submit', 'score'] as const;
/** The options each action takes beyond --episode; the others are refused. */
const OPTIONS: Record<(typeof ACTIONS)[number], string[]> = {
  start: ['condition', 'budget', 'references'],
  observe: ['masks'],
  status: [],
  submit: ['prediction'],
  score: [],
};

export default defineCommand({
  command: 'episode <action>',
  describe: "a budgeted episode with the benchmark's rules: start, observe (buy masks), status, submit (closes), score; JSON on stdout",
  builder: (y) =>
    y
      .positional('action', { choices: ACTIONS, describe: 'start | observe | status | submit | score' })
      .option('episode', { type: 'string', demandOption: true, describe: 'the episode folder (episode.json, events.jsonl)' })
      .option('condition', { type: 'string', describe: 'start: the condition' })
      .option('budget', { type: 'string', describe: 'start: credits for distinct masks beyond the two free anchors' })
      .option('references', { type: 'string', describe: 'start: reference folder (default outputs/references); fixed for the episode' })
      .option('masks', {
        type: 'string',
        array: true,
        describe: 'observe: masks to measure (0/1 strings, option A first; spaces or commas between them)',
      })
      .option('prediction', { type: 'string', describe: 'submit: the prediction table (CSV or JSON, as for grade)' }),
  run: async (argv, { settings, out }) => {
    const action = argv.action as (typeof ACTIONS)[number];
    const given = ['condition', 'budget', 'references', 'masks', 'prediction'].filter((o) => argv[o] !== undefined);
    const foreign = given.filter((o) => !OPTIONS[action].includes(o));
    if (foreign.length) throw new UserError(`episode ${action} does not take ${foreign.map((o) => `--${o}`).join(', ')}`);
    const dir = outputPath(settings, argv.episode, 'episode', 'folder');
    const episode = await import('../../../evaluation/episode.ts');
    let result: unknown;
    if (action === 'start') {
      if (argv.condition === undefined || argv.budget === undefined)
        throw new UserError('episode start needs --condition C and --budget B');
      // a decimal whole number as written: yargs' number type would read 0x3 or 1e1
      const written = String(argv.budget).trim();
      if (!/^\d+$/.test(written)) throw new UserError(`--budget must be a whole number written in decimal digits, not '${written}'`);
      result = await episode.startEpisode(settings, { dir, condition: argv.condition, budget: Number(written) });
    } else if (action === 'observe') {
      const masks = (argv.masks ?? []).flatMap((m) => String(m).split(/[\s,]+/)).filter(Boolean);
      if (!masks.length) throw new UserError('episode observe needs --masks M…');
      result = await episode.observe(settings, dir, masks);
    } else if (action === 'status') result = await episode.episodeStatus(settings, dir);
    else if (action === 'submit') {
      if (argv.prediction === undefined) throw new UserError('episode submit needs --prediction FILE');
      const { readPredictionTable } = await import('../../../analysis/grade.ts');
      const file = argv.prediction;
      result = await episode.submitPrediction(settings, dir, (dimensions) => readPredictionTable(file, dimensions));
    } else result = await episode.scoreEpisode(settings, dir);
    out(JSON.stringify(result, null, 2));
  },
});
