// Episodes: free anchors, paid distinct masks, whole-batch refusal, closing submission, reference
// identity checked at every action, strict JSON, the events log, and two processes buying at once.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { cliInProcess, cliProcess } from '../support/cli.ts';
import { maskOf, writeSurfaceCatalog } from '../support/fixtures.ts';
import { lockFolder } from '../../pipelines/references/lock.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-episode-'));
const refs = join(dir, 'references');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const utility = (k: number) => 0.2 + 0.03 * k;
const catalog = (u: (k: number) => number) => writeSurfaceCatalog(refs, [{ condition: 'toy', dimensions: 4, utility: (_z, k) => u(k) }]);
catalog(utility);

let count = 0;
const freshEpisode = () => join(dir, `ep${++count}`);
const run = async (args: string[]) => {
  const r = await cliInProcess(['episode', ...args], ROOT);
  return { ...r, json: r.code === 0 ? JSON.parse(r.stdout) : undefined };
};
const start = (ep: string, budget: number | string = 3) =>
  run(['start', '--episode', ep, '--condition', 'toy', '--budget', String(budget), '--references', refs]);
const observe = (ep: string, ...masks: string[]) => run(['observe', '--episode', ep, '--masks', ...masks]);
const events = (ep: string) =>
  readFileSync(join(ep, 'events.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
const state = (ep: string) => readFileSync(join(ep, 'episode.json'), 'utf8');
const table = (value: (k: number) => number) => {
  const path = join(dir, `t${++count}.json`);
  writeFileSync(path, JSON.stringify(Object.fromEntries(Array.from({ length: 16 }, (_, k) => [maskOf(k, 4), value(k)]))));
  return path;
};
const refused = (r: { code: number; stderr: string }, pattern: RegExp) => {
  expect(r.code).toBe(2);
  expect(r.stderr).toMatch(pattern);
  expect(r.stderr.trim().split('\n')).toHaveLength(1);
};

describe('episode', () => {
  it('starts with the two anchors free and buys each new distinct mask once', async () => {
    const ep = freshEpisode();
    const s = await start(ep, 3);
    expect(s.json).toEqual({
      condition: 'toy',
      dimensions: 4,
      budget: 3,
      credits_remaining: 3,
      closed: false,
      observations: [
        { mask: '0000', utility: utility(0) },
        { mask: '1111', utility: utility(15) },
      ],
      calculations: { limit: 20, used: 0, remaining: 20 },
      session: { seconds_used: 0, seconds_left: null, deadline_seconds: null },
    });
    // a batch with a repeat and an anchor: two new masks, two credits
    const a = await observe(ep, '0101', '0101,1111', '0011');
    expect(a.json.new_masks).toEqual(['0101', '0011']);
    expect(a.json.credits_remaining).toBe(1);
    expect(a.json.observations).toEqual([
      { mask: '0101', utility: utility(5) },
      { mask: '1111', utility: utility(15) },
      { mask: '0011', utility: utility(3) },
    ]);
    // asking again is free
    const again = await observe(ep, '0011', '0000');
    expect([again.json.new_masks, again.json.credits_remaining]).toEqual([[], 1]);
    const status = await run(['status', '--episode', ep]);
    expect(status.json.observations.map((o: { mask: string }) => o.mask)).toEqual(['0000', '1111', '0101', '0011']);
    expect(events(ep).map((e) => [e.action, e.credits_before, e.credits_after, e.outcome])).toEqual([
      ['start', 3, 3, 'ok'],
      ['observe', 3, 1, 'ok'],
      ['observe', 1, 1, 'ok'],
      ['status', 1, 1, 'ok'],
    ]);
    expect(events(ep)[1]).toMatchObject({ masks: ['0101', '0101', '1111', '0011'], new_masks: ['0101', '0011'] });
  });

  it('refuses an over-budget batch whole, spending nothing, and a bad mask', async () => {
    const ep = freshEpisode();
    await start(ep, 2);
    await observe(ep, '1000');
    const before = state(ep);
    refused(await observe(ep, '0001', '0010'), /needs 2 credit\(s\) for its new masks, 1 remain: refused whole, nothing spent/);
    refused(await observe(ep, '01', '00x1'), /not a mask of 4 options .*"01", "00x1"/);
    expect(state(ep)).toBe(before);
    expect(
      events(ep)
        .slice(-2)
        .map((e) => [e.outcome, e.credits_after]),
    ).toEqual([
      ['refused', 1],
      ['refused', 1],
    ]);
    expect((await observe(ep, '0001')).json.credits_remaining).toBe(0);
    refused(await observe(ep, '0010'), /needs 1 credit/);
  });

  it('closes on submission; scores only a closed episode, with every observation replacing its cell', async () => {
    const ep = freshEpisode();
    await start(ep, 1);
    await observe(ep, '0110');
    refused(await run(['score', '--episode', ep]), /still open: submit a prediction first/);
    const submitted = await run(['submit', '--episode', ep, '--prediction', table(() => 0.5)]);
    expect(submitted.json.closed).toBe(true);
    refused(await observe(ep, '0111'), /the episode is closed/);
    refused(await run(['submit', '--episode', ep, '--prediction', table(() => 0.4)]), /already submitted/);
    const score = (await run(['score', '--episode', ep])).json;
    expect(score.observed).toEqual(['0000', '0110', '1111']);
    expect([score.prediction_table['0110'], score.prediction_table['0101'], score.budget, score.purchased]).toEqual([
      utility(6),
      0.5,
      1,
      1,
    ]);
    // the observed anchor 1111 is the predicted maximum: the exact optimum of this increasing surface
    expect([score.selected_mask, score.exact_optimal_choice]).toEqual(['1111', true]);
  });

  it('refuses every action once the reference changed mid-episode', async () => {
    const ep = freshEpisode();
    await start(ep, 2);
    catalog((k) => utility(k) + 0.001);
    try {
      refused(
        await observe(ep, '0001'),
        /reference of condition 'toy' in .* changed since the episode started \(table_sha256 [0-9a-f]+ -> [0-9a-f]+\)/,
      );
      refused(await run(['status', '--episode', ep]), /changed since the episode started/);
      expect(events(ep).at(-1)).toMatchObject({ action: 'status', outcome: 'refused' });
    } finally {
      catalog(utility);
    }
    expect((await observe(ep, '0001')).json.credits_remaining).toBe(1);
  });

  it('reads strict JSON only: a submission with a key written twice, a state edited by hand', async () => {
    const ep = freshEpisode();
    await start(ep, 1);
    const dup = join(dir, 'dup.json');
    const pairs = Array.from({ length: 16 }, (_, k) => `"${maskOf(k, 4)}": 0.5`);
    writeFileSync(dup, `{${[...pairs, '"\\u0030001": 0.9'].join(', ')}}`);
    refused(await run(['submit', '--episode', ep, '--prediction', dup]), /duplicate key "0001"/);
    expect(JSON.parse(state(ep)).closed).toBe(false);
    writeFileSync(join(ep, 'episode.json'), state(ep).replace('"credits_remaining": 1', '"credits_remaining": 1, "credits_remaining": 9'));
    refused(await run(['status', '--episode', ep]), /episode state .* is not strict JSON: duplicate key "credits_remaining"/);
    writeFileSync(join(ep, 'episode.json'), state(ep).replace('"credits_remaining": 1, "credits_remaining": 9', '"credits_remaining": 9'));
    refused(
      await run(['status', '--episode', ep]),
      /episode state .* is not the state its events log records \(credits_remaining differ\)/,
    );
  });

  it('refuses a receipt the rules could never produce, and a state that is not its receipt', async () => {
    const ep = freshEpisode();
    await start(ep, 2);
    await observe(ep, '0110');
    const good = { state: state(ep), log: readFileSync(join(ep, 'events.jsonl'), 'utf8') };
    const restore = () => {
      writeFileSync(join(ep, 'episode.json'), good.state);
      writeFileSync(join(ep, 'events.jsonl'), good.log);
    };
    /** Edits line `k` of the receipt (the copy of the state removed, so that only the receipt speaks). */
    const editLog = (k: number, change: (e: Record<string, any>) => void) => {
      const lines = good.log
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      change(lines[k]);
      writeFileSync(join(ep, 'events.jsonl'), `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`);
      rmSync(join(ep, 'episode.json'), { force: true });
    };
    const cases: [number, (e: Record<string, any>) => void, RegExp][] = [
      [
        0,
        (e) => (e.utilities[0] = 0.99),
        /records an episode the rules could not produce: the observed utility of 0000 is not the reference's/,
      ],
      [1, (e) => (e.utilities[0] = 0.99), /the observed utility of 0110 is not the reference's/],
      [0, (e) => (e.masks = ['0000', '0111']), /the unpaid observations are 0000, 0111, not the two anchors 0000, 1111/],
      [0, (e) => (e.budget = 14), /line 2: credits 2 -> 1, where the actions before it give 14 -> 13/],
      [1, (e) => (e.action = 'start'), /line 2: a second start/],
      [
        1,
        (e) => {
          Object.assign(e, { new_masks: ['0110', '0110'], utilities: [utility(6), utility(6)], credits_after: 0 });
        },
        /a mask observed twice/,
      ],
      [1, (e) => (e.credits_before = 3), /line 2: credits 3 -> 1/],
      [1, (e) => delete e.utilities, /line 2: a purchase without a utility for each new mask/],
      [0, (e) => (e.reference.dimensions = 6), /dimensions 6|not a mask of 6 options/],
      [0, (e) => delete e.references, /line 1: a start without its condition, budget, reference folder/],
    ];
    for (const [k, change, pattern] of cases) {
      editLog(k, change);
      for (const action of ['status', 'score']) refused(await run([action, '--episode', ep]), pattern);
    }
    // a copy of the state edited consistently (budget 2 -> 14, credits raised by 12): refused against the receipt's start
    restore();
    const raised = JSON.parse(good.state);
    raised.budget = 14;
    raised.credits_remaining += 12;
    writeFileSync(join(ep, 'episode.json'), JSON.stringify(raised));
    for (const action of ['status', 'observe']) {
      const r = await run(action === 'status' ? ['status', '--episode', ep] : ['observe', '--episode', ep, '--masks', '0001', '0010']);
      refused(r, /episode state .* is not the state its events log records \(budget, credits_remaining differ\)/);
    }
    restore();
    const submitted = await run(['submit', '--episode', ep, '--prediction', table(() => 0.5)]);
    expect(submitted.code).toBe(0);
    const closed = { state: state(ep), log: readFileSync(join(ep, 'events.jsonl'), 'utf8') };
    const submit = JSON.parse(closed.log.trim().split('\n').at(-1)!);
    expect(submit).toMatchObject({ kind: 'action', action: 'submit', table_sha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
    // the submission replaced in the copy of the state, or in the receipt: refused, not scored
    const better = JSON.parse(closed.state);
    better.submission.prediction_table['0001'] = utility(1);
    writeFileSync(join(ep, 'episode.json'), JSON.stringify(better));
    refused(await run(['score', '--episode', ep]), /not the state its events log records \(submission differ\)/);
    writeFileSync(join(ep, 'episode.json'), closed.state);
    writeFileSync(join(ep, 'events.jsonl'), closed.log.replace('"0001":0.5', `"0001":${utility(1)}`));
    refused(
      await run(['score', '--episode', ep]),
      /line 3: the submitted table's sha256 is not [0-9a-f]{64}, the one recorded at submission/,
    );
    writeFileSync(join(ep, 'events.jsonl'), closed.log);
    expect((await run(['score', '--episode', ep])).code).toBe(0);
  });

  it('keeps the events log bounded: a batch is checked before it is logged, repeated reads are one line', async () => {
    const ep = freshEpisode();
    await start(ep, 3);
    refused(await observe(ep, ...Array.from({ length: 17 }, (_, k) => maskOf(k % 16, 4))), /batch of 17 masks is more than the 16 masks/);
    const long = '01'.repeat(20000);
    refused(await observe(ep, long, '0001'), /not a mask of 4 options .*"0101010101010101…"/);
    const refusal = readFileSync(join(ep, 'events.jsonl'), 'utf8').trim().split('\n').at(-1)!;
    expect(refusal.length).toBeLessThan(1000);
    expect(JSON.parse(refusal)).toMatchObject({
      action: 'observe',
      outcome: 'refused',
      n_masks: 2,
      masks_sample: ['0101010101010101…', '0001'],
    });
    for (let k = 0; k < 5; k++) expect((await run(['status', '--episode', ep])).code).toBe(0);
    await observe(ep, '0001');
    await run(['status', '--episode', ep]);
    await run(['status', '--episode', ep]);
    const log = events(ep);
    expect(log.map((e) => [e.action, e.outcome, e.calls])).toEqual([
      ['start', 'ok', undefined],
      ['observe', 'refused', undefined],
      ['observe', 'refused', undefined],
      ['status', 'ok', 5],
      ['observe', 'ok', undefined],
      ['status', 'ok', 2],
    ]);
    expect(log[3].first_at <= log[3].at).toBe(true);
  });

  it('refuses a second start in the folder, a budget beyond the masks, and options of another action', async () => {
    const ep = freshEpisode();
    await start(ep, 0);
    refused(await start(ep, 1), /already holds an episode/);
    const never = freshEpisode();
    refused(await start(never, 15), /--budget must be a whole number from 0 to 14/);
    expect(existsSync(never)).toBe(false); // a refused start creates nothing
    refused(await start(freshEpisode(), '1.5'), /--budget takes one whole number written in decimal digits, not '1.5'/);
    for (const written of ['0x3', '3e0', '+3', ' '])
      refused(await start(freshEpisode(), written), /--budget takes one whole number written in decimal digits/);
    refused(await run(['observe', '--episode', ep, '--masks', '0001', '--budget', '3']), /episode observe does not take --budget/);
    refused(await run(['status', '--episode', join(dir, 'nothing-here')]), /does not exist/);
    refused(
      await run(['start', '--episode', join(refs, 'ep'), '--condition', 'toy', '--budget', '1', '--references', refs]),
      /is inside .* which only wwref itself writes/,
    );
  });

  it('an action waits for the episode lock held by another', async () => {
    const ep = freshEpisode();
    await start(ep, 2);
    const release = await lockFolder(ep);
    const before = state(ep);
    const buying = cliProcess(['episode', 'observe', '--episode', ep, '--masks', '0001'], ROOT);
    try {
      await new Promise((r) => setTimeout(r, 4000));
      expect(state(ep)).toBe(before); // still waiting
    } finally {
      release();
    }
    expect((await buying).code).toBe(0);
    expect(JSON.parse(state(ep)).credits_remaining).toBe(1);
  });

  it('two processes buying at once never overspend the budget', async () => {
    const ep = freshEpisode();
    await start(ep, 4);
    const buy = (masks: string[]) => cliProcess(['episode', 'observe', '--episode', ep, '--masks', ...masks], ROOT);
    const outcomes = await Promise.all([buy(['0001', '0010', '0011']), buy(['0100', '0101', '0110'])]);
    expect(outcomes.map((o) => o.code).sort()).toEqual([0, 2]);
    const final = JSON.parse(state(ep));
    expect(final.credits_remaining).toBe(1);
    expect(final.observations.filter((o: { paid: boolean }) => o.paid)).toHaveLength(3);
    expect(
      events(ep)
        .filter((e) => e.action === 'observe')
        .map((e) => e.outcome)
        .sort(),
    ).toEqual(['ok', 'refused']);
  });
});
