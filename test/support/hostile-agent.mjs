// A hostile agent for the cohort tests: it runs as the user, as every agent does, and acts on the
// cohort's folder instead of (or beside) playing its episode. `node hostile-agent.mjs MODE [ARG]`; what
// it does depends on the repeat (`__r<k>` of WWREF_EPISODE_ID). Modes:
//   forge         r0 submits; r1 puts a forged copy of r0's results line (another family, a shared GP
//                 of 0.99) before the cohort's own line in results.jsonl, and exits without submitting
//   leftover      r0 exits without submitting and leaves a process of its own (another process group)
//                 that, once r0's line is written, makes r0's receipt unreadable and deletes the line;
//                 r1 submits. ARG: a file the left process writes its pid to
//   fifo          r0 puts FIFOs at its episode.json, agent.stderr and agent.group and exits 1; r1 submits
//   fifo-hang     r0 puts a FIFO at its agent.group and hangs, unless the file ARG exists (then submits)
//   kill-workers  r0 kills every Python process the cohort started, then submits a table; r1 submits
//   plant         r0 makes the folder of r1 and a link (to the folder ARG) at the folder of r2; all submit
//   swap-ref      r0 changes the plan sha256 of its condition in the reference manifest ARG; exits
//   infinite      r0 buys a mask, then writes a purchase of utility 1e999 into its receipt; r1 submits
//   block-figure  r0 puts a folder where the cohort's figure goes, then submits
// Every episode that submits sends the evaluator's pair ridge (`{"estimator": "ridge_pair"}`), or a
// table of 0.5 when the process fitting it may be gone.
import { spawn } from 'node:child_process';
import { appendFileSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

const [mode, arg] = process.argv.slice(2);
const id = process.env.WWREF_EPISODE_ID ?? '';
const repeat = Number(/__r(\d+)$/.exec(id)?.[1]);
const episode = JSON.parse(process.env.WWREF_MCP_COMMAND).at(-1);
const out = dirname(dirname(episode));
const results = join(out, 'results.jsonl');

let calls = 0;
async function call(name, args = {}) {
  const response = await fetch(process.env.WWREF_MCP_URL, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${process.env.WWREF_MCP_TOKEN}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: ++calls, method: 'tools/call', params: { name, arguments: args } }),
  });
  const text = await response.text();
  const json = JSON.parse(text.startsWith('{') ? text : text.replace(/^[\s\S]*?data: /, ''));
  return JSON.parse(json.result.content[0].text);
}
const submitRidge = () => call('submit_diagnosis', { estimator: 'ridge_pair' });
async function submitTable() {
  const { dimensions } = await call('task');
  const table = Object.fromEntries(Array.from({ length: 2 ** dimensions }, (_, k) => [k.toString(2).padStart(dimensions, '0'), 0.5]));
  return call('submit_diagnosis', { predictions_json: JSON.stringify(table) });
}
const fifo = (path) => {
  rmSync(path, { force: true });
  const made = spawn('mkfifo', [path], { stdio: 'inherit' });
  return new Promise((done) => made.once('exit', done));
};

if (mode === 'forge') {
  if (repeat === 0) await submitRidge();
  else {
    const [line] = readFileSync(results, 'utf8').split('\n');
    const forged = JSON.parse(line);
    forged.family = 'forged';
    forged.shared_gp_score.effect_recovery = 0.99;
    writeFileSync(results, `${JSON.stringify(forged)}\n${line}\n`);
  }
} else if (mode === 'leftover') {
  if (repeat === 0) {
    const script = `
      const { appendFileSync, readFileSync, writeFileSync } = require('node:fs');
      writeFileSync(${JSON.stringify(arg)}, String(process.pid));
      const mine = (l) => l.includes('"episode":"${id}"');
      const timer = setInterval(() => {
        let text = '';
        try { text = readFileSync(${JSON.stringify(results)}, 'utf8'); } catch {}
        if (!text.split('\\n').some(mine)) return;
        clearInterval(timer);
        appendFileSync(${JSON.stringify(join(episode, 'events.jsonl'))}, 'not json\\n');
        writeFileSync(${JSON.stringify(results)}, text.split('\\n').filter((l) => !mine(l)).join('\\n'));
      }, 50);
      setTimeout(() => process.exit(0), 60000);`;
    spawn(process.execPath, ['-e', script], { detached: true, stdio: 'ignore' }).unref();
  } else await submitRidge();
} else if (mode === 'fifo') {
  if (repeat === 0) {
    for (const name of ['episode.json', 'agent.stderr', 'agent.group']) await fifo(join(episode, name));
    process.exit(1);
  }
  await submitRidge();
} else if (mode === 'fifo-hang') {
  let quick = false;
  try {
    readFileSync(arg);
    quick = true;
  } catch {}
  if (quick) await submitRidge();
  else {
    await fifo(join(episode, 'agent.group'));
    appendFileSync(join(dirname(arg), 'pids'), `${process.pid}\n`);
    setInterval(() => {}, 1000);
  }
} else if (mode === 'kill-workers') {
  if (repeat === 0) {
    // the cohort: the nearest ancestor running `wwref.mjs cohort`
    const parentOf = (pid) => {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    };
    let cohort = process.ppid;
    while (cohort > 1 && !readFileSync(`/proc/${cohort}/cmdline`, 'utf8').includes('wwref.mjs')) cohort = parentOf(cohort);
    for (const pid of readdirSync('/proc').filter((f) => /^\d+$/.test(f)))
      try {
        if (parentOf(pid) === cohort && /python/.test(readFileSync(`/proc/${pid}/cmdline`, 'utf8'))) process.kill(Number(pid), 'SIGKILL');
      } catch {}
    await submitTable();
  } else await submitRidge();
} else if (mode === 'plant') {
  if (repeat === 0) {
    mkdirSync(join(dirname(episode), id.replace(/__r0$/, '__r1')));
    writeFileSync(join(dirname(episode), id.replace(/__r0$/, '__r1'), 'events.jsonl'), 'planted\n');
    symlinkSync(arg, join(dirname(episode), id.replace(/__r0$/, '__r2')));
  }
  await submitRidge();
} else if (mode === 'swap-ref') {
  if (repeat === 0) {
    const manifest = JSON.parse(readFileSync(arg, 'utf8'));
    // every condition of the source (a manifest holds one plan per source)
    const source = manifest.conditions[id.split('__')[0]].source;
    for (const entry of Object.values(manifest.conditions)) if (entry.source === source) entry.plan_sha256 = 'f'.repeat(64);
    unlinkSync(arg);
    writeFileSync(arg, JSON.stringify(manifest, null, 2));
  } else await submitRidge();
} else if (mode === 'infinite') {
  if (repeat === 0) {
    // one purchase through the endpoint, then a second one written into the receipt by hand, its
    // utility a number beyond float64 (1e999: Infinity to a lenient parser)
    const { dimensions } = await call('task');
    const mask = (k) => k.toString(2).padStart(dimensions, '0');
    await call('observe', { masks: [mask(1)] });
    const log = join(episode, 'events.jsonl');
    const bought = readFileSync(log, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l))
      .filter((e) => e.action === 'observe' && e.outcome === 'ok')
      .at(-1);
    const forged = {
      ...bought,
      new_masks: [mask(2)],
      masks: [mask(2)],
      utilities: [123456789],
      credits_before: bought.credits_after,
      credits_after: bought.credits_after - 1,
    };
    appendFileSync(log, `${JSON.stringify(forged).replace('123456789', '1e999')}\n`);
  } else await submitRidge();
} else if (mode === 'block-figure') {
  if (repeat === 0) mkdirSync(join(out, 'cohort-recovery.svg'));
  await submitRidge();
} else {
  process.stderr.write(`hostile-agent: no mode ${mode}\n`);
  process.exit(2);
}
