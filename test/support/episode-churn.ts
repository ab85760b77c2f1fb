// A client that acts on one episode as fast as it can, to be killed (SIGKILL) at a random moment by
// test/analysis/episode-faults.test.ts (which bundles it first): `node episode-churn.mjs EPISODE SEED`. It buys one
// or two random masks at a time, reads the status, submits when no credit is left, then scores.
import { loadSettings } from '../../pipelines/core/settings.ts';
import { episodeStatus, observe, scoreEpisode, submitPrediction } from '../../pipelines/evaluation/episode.ts';
import { allMasks } from '../../pipelines/catalog/masks.ts';
import { seededRandom } from './random.ts';

const [ep, seed] = process.argv.slice(2);
const settings = loadSettings();
const random = seededRandom(Number(seed));
process.stdout.write('ready\n'); // the test's kill is timed from here
for (;;) {
  try {
    const view = await episodeStatus(settings, ep!);
    if (view.closed) await scoreEpisode(settings, ep!, { shared: false });
    else if (view.credits_remaining === 0) await submitPrediction(settings, ep!, (d) => allMasks(d).map(() => 0.5));
    else {
      const masks = allMasks(view.dimensions);
      await observe(settings, ep!, [random.pick(masks), random.pick(masks)]);
    }
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`);
  }
}
