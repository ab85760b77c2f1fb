import { resolve } from 'node:path';
import { UserError } from '../../../core/errors.ts';
import { defineCommand } from '../../command.ts';
import { wholeNumber } from '../../options.ts';
import { outputPath } from '../../output-path.ts';

const ACTIONS = ['start', 'observe', 'status', 'submit', 'end', 'score', 'verify'] as const;
/** The options each action takes beyond --episode; the others are refused. */
const OPTIONS: Record<(typeof ACTIONS)[number], string[]> = {
  start: ['condition', 'budget', 'references', 'label', 'calls', 'callSeconds', 'sessionSeconds', 'engine'],
  observe: ['masks'],
  status: [],
  submit: ['prediction', 'estimator'],
  end: ['reason'],
  score: ['shared'],
  verify: [],
};
const FLAGS: Record<string, string> = { callSeconds: 'call-seconds', sessionSeconds: 'session-seconds' };
/** The actions that only read the episode folder: it is no output, so the output rule (and its list of git's files) is not asked. */
const READS: ReadonlySet<string> = new Set(['status', 'score', 'verify']);

export default defineCommand({
  command: 'episode <action>',
  describe:
    "a budgeted episode with the benchmark's rules: start, observe (buy masks), status, submit (closes), " +
    'end (closes without a submission), score, verify (replays its calculations); JSON on stdout',
  builder: (y) =>
    y
      .positional('action', { choices: ACTIONS, describe: 'start | observe | status | submit | end | score | verify' })
      .option('episode', { type: 'string', demandOption: true, describe: 'the episode folder (episode.json, events.jsonl)' })
      .option('condition', { type: 'string', describe: 'start: the condition' })
      .option('budget', { type: 'string', describe: 'start: credits for distinct masks beyond the two free anchors' })
      .option('references', { type: 'string', describe: 'start: reference folder (default outputs/references); fixed for the episode' })
      .option('label', { type: 'string', array: true, describe: 'start: KEY=VALUE labels recorded with the episode (repeatable)' })
      .option('calls', { type: 'string', describe: 'start: calculation calls allowed (default 20)' })
      .option('call-seconds', { type: 'string', describe: 'start: wall seconds a calculation may run (default 45; 30 CPU seconds)' })
      .option('session-seconds', {
        type: 'string',
        describe: 'start: seconds after which observe, calculate and submit are refused (default none; the paper: 1800)',
      })
      .option('engine', {
        type: 'string',
        describe:
          'start: the calculation engine: native (default: the pinned runtime, numpy, scipy, scikit-learn) or pyodide (standard library only)',
      })
      .option('masks', {
        type: 'string',
        array: true,
        describe: 'observe: masks to measure (0/1 strings, option A first; spaces or commas between them)',
      })
      .option('prediction', { type: 'string', describe: 'submit: the prediction table (CSV or JSON, as for grade)' })
      .option('estimator', {
        type: 'string',
        describe: 'submit: instead of a table, ridge_main, ridge_pair or gp fitted on the observations',
      })
      .option('reason', { type: 'string', describe: 'end: why the episode ends without a submission' })
      .option('shared', {
        type: 'boolean',
        describe: 'score: add the shared-estimator scores (default; --no-shared leaves them out and starts no Python)',
      }),
  run: async (argv, { settings, out }) => {
    const action = argv.action as (typeof ACTIONS)[number];
    const known = ['condition', 'budget', 'references', 'label', 'calls', 'callSeconds', 'sessionSeconds', 'engine', 'masks', 'prediction'];
    const given = [...known, 'estimator', 'reason', 'shared'].filter((o) => argv[o] !== undefined);
    const foreign = given.filter((o) => !OPTIONS[action].includes(o));
    if (foreign.length) throw new UserError(`episode ${action} does not take ${foreign.map((o) => `--${FLAGS[o] ?? o}`).join(', ')}`);
    if (argv.episode.trim() === '') throw new UserError('--episode needs a path');
    const dir = READS.has(action) ? resolve(argv.episode) : outputPath(settings, argv.episode, 'episode', 'folder');
    const episode = await import('../../../evaluation/episode.ts');
    let result: unknown;
    let code = 0;
    if (action === 'start') {
      if (argv.condition === undefined || argv.budget === undefined)
        throw new UserError('episode start needs --condition C and --budget B');
      const { parseLabels } = await import('../../../evaluation/labels.ts');
      result = await episode.startEpisode(settings, {
        dir,
        condition: argv.condition,
        budget: wholeNumber(argv.budget, 'budget'),
        labels: parseLabels((argv.label ?? []).map(String)),
        ...(argv.calls !== undefined && { calls: wholeNumber(argv.calls, 'calls') }),
        ...(argv.callSeconds !== undefined && { callSeconds: wholeNumber(argv.callSeconds, 'call-seconds') }),
        ...(argv.sessionSeconds !== undefined && { sessionSeconds: wholeNumber(argv.sessionSeconds, 'session-seconds') }),
        ...(argv.engine !== undefined && { engine: String(argv.engine) }),
      });
    } else if (action === 'observe') {
      const masks = (argv.masks ?? []).flatMap((m) => String(m).split(/[\s,]+/)).filter(Boolean);
      if (!masks.length) throw new UserError('episode observe needs --masks M…');
      result = await episode.observe(settings, dir, masks);
    } else if (action === 'status') result = await episode.episodeStatus(settings, dir);
    else if (action === 'submit') {
      if ((argv.prediction === undefined) === (argv.estimator === undefined))
        throw new UserError('episode submit needs either --prediction FILE or --estimator NAME');
      if (argv.estimator !== undefined) {
        const { closeEstimatorWorker, submitEstimator } = await import('../../../evaluation/estimator-submission.ts');
        try {
          result = await submitEstimator(settings, dir, argv.estimator);
        } finally {
          await closeEstimatorWorker();
        }
      } else {
        const { readPredictionTable } = await import('../../../analysis/grade.ts');
        const file = argv.prediction!;
        result = await episode.submitPrediction(settings, dir, (dimensions) => readPredictionTable(file, dimensions));
      }
    } else if (action === 'end') {
      if (argv.reason === undefined) throw new UserError('episode end needs --reason TEXT');
      // the reason is shown on one line wherever the episode is (status, refusals, a terminal)
      if (/\p{Cc}/u.test(argv.reason))
        throw new UserError('--reason holds a control character (a newline, tab or escape); write it as one line of text');
      result = await episode.endEpisode(settings, dir, argv.reason);
    } else if (action === 'verify') {
      const { verifyEpisode } = await import('../../../evaluation/calculations.ts');
      const verification = await verifyEpisode(settings, dir);
      for (const call of verification.calls.filter((c) => c.outcome === 'differs'))
        process.stderr.write(`calculation call ${call.call} does not replay: ${call.differences.join('; ')}\n`);
      result = verification;
      code = verification.ok ? 0 : 1;
    } else result = await episode.scoreEpisode(settings, dir, { shared: argv.shared !== false });
    // prediction tables in mask order ('0000' first: a plain object would put '1000' … before it)
    const { orderedJson, withMaskOrderedTables } = await import('../../../evaluation/ordered-json.ts');
    out(orderedJson(withMaskOrderedTables(result), 2));
    return code;
  },
});
