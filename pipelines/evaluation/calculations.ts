// An episode's calculations: the agent's Python run in the sandbox (sandbox/) on the episode's
// evidence, each call a reservation and a receipt in the events log, and their audit (`episode verify`).
//
// A call never holds the episode's lock while it runs (up to its wall limit): under the lock the call
// is reserved (limits and deadline checked, its number, code and evidence committed, the call counted),
// then run outside it, then its receipt committed under the lock. A kill between the two leaves a
// reserved call without a receipt: it still counts against the limit, and `verify` reports it unanswered.
import { createHash } from 'node:crypto';
import { resolve } from 'node:path';
import * as z from 'zod';
import { UserError } from '../core/errors.ts';
import type { Settings } from '../core/settings.ts';
import type { Json } from '../analysis/strict-json.ts';
import { act, commitReceipt, type EpisodeState, readChecked, requireOpen, sessionClock, view } from './episode.ts';
import { CALCULATION_KIND, type Event } from './receipt.ts';
import { publicTask } from './task.ts';
import { type Engine, type EngineName, NATIVE_MEMORY_BYTES } from './sandbox/engines.ts';
import { resolveLimits } from './sandbox/isolation.ts';

/** Python source of one call: at most this many bytes (every call's code is kept in the events log). */
export const MAX_CODE_BYTES = 64 * 1024;

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

/** What the agent gets back from a call (the receipt less its hashes and limits). */
export interface CalculationResult {
  call: number;
  status: string;
  /** What stopped the call (`cpu`, `wall`, `memory`, `output`), null when it ended by itself. */
  killed_by: string | null;
  return_code: number | null;
  stdout: string;
  stderr: string;
  stdout_truncated: boolean;
  stderr_truncated: boolean;
  wall_seconds: number;
  detail: string | null;
  calculations_remaining: number;
  /** The session's seconds left when the call ended (2 decimals), null without a deadline. */
  session_seconds_remaining: number | null;
}

/** The calculation running for each episode folder in this process (the next waits for it). */
const running = new Map<string, Promise<unknown>>();

/**
 * Runs `code` on the episode's evidence in the sandbox, as the module's comment says. Refused (one
 * line, logged) past the call limit, after the deadline, in a closed episode, or where no sandbox can be made.
 * Calls of one episode run one at a time, in order (calls sent at once wait before their reservation):
 * each may hold up to its memory limit, and a client must not multiply it.
 */
export function calculate(settings: Settings, dir: string, code: string): Promise<CalculationResult> {
  const folder = resolve(dir);
  const before = running.get(folder) ?? Promise.resolve();
  const mine = before.then(
    () => calculateNow(settings, folder, code),
    () => calculateNow(settings, folder, code),
  );
  running.set(folder, mine);
  const done = () => {
    if (running.get(folder) === mine) running.delete(folder);
  };
  mine.then(done, done);
  return mine;
}

/**
 * The engine of a name (sandbox/engines.ts): `native` is the pinned runtime (created on first use)
 * under the numerical profile, with the variables of every Python process of the project.
 */
export async function calculationEngine(settings: Settings, name: EngineName = 'pyodide'): Promise<Engine> {
  const engines = await import('./sandbox/engines.ts');
  if (name === 'pyodide') return engines.pyodideEngine;
  const [{ ensurePythonRuntime }, { pythonEnvironment }] = await Promise.all([
    import('../core/runtime.ts'),
    import('../execution/launcher.ts'),
  ]);
  return engines.nativeEngine({ python: ensurePythonRuntime(settings), environment: pythonEnvironment(settings) });
}

/**
 * What a call's code sees, in the benchmark's form (../shared/spec/agent-protocol.md): the observations
 * in acquisition order (the anchors, then each batch's new masks), credits, closed, the calls left after
 * this one, the session's seconds (2 decimals), the public task; and wwref's `call`, this call's number,
 * and `episode`, the episode's id (its receipt's evidence hash then binds the call to this episode).
 */
function calculationEvidence(settings: Settings, state: EpisodeState, at: string, call: number): Record<string, Json> {
  const episode = view(state, at);
  const clock = sessionClock(state, at);
  const round2 = (x: number) => Math.round(x * 100) / 100;
  const task = publicTask(settings, {
    condition: state.condition,
    references: state.references,
    family: state.reference.family,
    source: state.reference.source,
    view: episode,
  });
  return {
    observations: episode.observations,
    credits_remaining: episode.credits_remaining,
    closed: episode.closed,
    calculation_calls_remaining: state.limits.calls - call,
    session_seconds_elapsed: round2(clock.seconds_used),
    session_seconds_remaining: clock.seconds_left === null ? null : round2(clock.seconds_left),
    task: task as unknown as Json,
    call,
    ...(state.episode && { episode: state.episode.id }),
  };
}

async function calculateNow(settings: Settings, dir: string, code: string): Promise<CalculationResult> {
  if (typeof code !== 'string') throw new UserError('the calculation code must be a string of Python');
  // refused before the call is reserved: UTF-8 has no bytes for a lone surrogate (encoding it would
  // give U+FFFD, and two codes would share one hash)
  if (/\p{Cs}/u.test(code))
    throw new UserError('the calculation code holds a lone surrogate (U+D800 to U+DFFF alone): it is not Unicode text');
  const bytes = Buffer.byteLength(code, 'utf8');
  const request: Record<string, Json> = { code_sha256: sha256(code), code_bytes: bytes };
  const { sandboxAvailable } = await import('./sandbox/isolation.ts');
  const reserved = await act(settings, dir, 'calculate', request, (state, _surface, at) => {
    requireOpen(state, at, 'calculations');
    const sandbox = sandboxAvailable();
    if (!sandbox.available) throw new UserError(`calculations are not offered here: ${sandbox.reason}`);
    if (bytes > MAX_CODE_BYTES) throw new UserError(`the code is ${bytes} bytes; a calculation takes at most ${MAX_CODE_BYTES}`);
    const limit = state.limits.calls;
    if (state.calls_used >= limit) throw new UserError(`all ${limit} calculation calls of the episode are used`);
    const call = state.calls_used + 1;
    const next = { ...state, calls_used: call };
    const evidence = JSON.stringify(calculationEvidence(settings, next, at, call));
    // a call ends by the session's deadline (at least 1 s): its result must not come after it
    const left = sessionClock(state, at).seconds_left;
    const wallSeconds = left === null ? state.limits.call_seconds : Math.max(1, Math.min(state.limits.call_seconds, Math.ceil(left)));
    const native = (state.limits.engine ?? 'pyodide') === 'native';
    const limits = { wallSeconds, cpuSeconds: state.limits.cpu_seconds, ...(native && { memoryBytes: NATIVE_MEMORY_BYTES }) };
    return {
      state: next,
      event: { call, ...(state.episode && { episode_id: state.episode.id }), code, evidence, evidence_sha256: sha256(evidence), limits },
      receipts: 1,
      result: {
        call,
        evidence,
        limits,
        remaining: limit - call,
        engine: state.limits.engine ?? 'pyodide',
        deadline: state.limits.session_seconds === null ? null : Date.parse(state.started_at) + state.limits.session_seconds * 1000,
      },
    };
  });
  const { runCalculation } = await import('./sandbox/calculation.ts');
  const engine = await calculationEngine(settings, reserved.engine);
  const receipt = await runCalculation({ code, evidence: reserved.evidence, limits: reserved.limits, engine });
  await commitReceipt(dir, reserved.call, receipt as unknown as Record<string, Json>);
  return {
    call: reserved.call,
    status: receipt.status,
    killed_by: receipt.killedBy,
    return_code: receipt.returnCode,
    stdout: receipt.stdout,
    stderr: receipt.stderr,
    stdout_truncated: receipt.stdoutTruncated,
    stderr_truncated: receipt.stderrTruncated,
    wall_seconds: receipt.wallSeconds,
    detail: receipt.detail,
    calculations_remaining: reserved.remaining,
    session_seconds_remaining: reserved.deadline === null ? null : Math.round(Math.max(0, reserved.deadline - Date.now()) / 10) / 100,
  };
}

const Reservation = z.looseObject({
  call: z.number().int(),
  code: z.string(),
  code_sha256: z.string(),
  evidence: z.string(),
  evidence_sha256: z.string(),
});

const StoredReceipt = z.looseObject({
  status: z.enum(['ok', 'error', 'timed_out', 'over_memory', 'output_limit']),
  killedBy: z.enum(['cpu', 'wall', 'memory', 'output']).nullable(),
  returnCode: z.number().nullable(),
  stdout: z.string(),
  stderr: z.string(),
  stdoutTruncated: z.boolean(),
  stderrTruncated: z.boolean(),
  stdoutSha256: z.string(),
  stderrSha256: z.string(),
  codeSha256: z.string(),
  evidenceSha256: z.string(),
  limits: z.strictObject({ cpuSeconds: z.number(), wallSeconds: z.number(), memoryBytes: z.number(), outputBytes: z.number() }),
  engine: z.enum(['pyodide', 'native']).optional(),
});

const ReservedLimits = z.strictObject({ wallSeconds: z.number(), cpuSeconds: z.number(), memoryBytes: z.number().optional() });

/**
 * Why a call's limits are not the episode's: those it was reserved with (the CPU seconds and memory the
 * episode fixed, wall seconds at most its call's), the receipt's (those it was reserved with, resolved)
 * and the receipt's engine (the episode's). A call is re-run only with limits that pass: an edited
 * receipt never makes `verify` run code for longer than the episode allowed.
 */
function limitDifferences(state: EpisodeState, reserved: Json | undefined, receipt: { limits: object; engine?: string }): string[] {
  const engine = state.limits.engine ?? 'pyodide';
  const differ: string[] = [];
  if ((receipt.engine ?? 'pyodide') !== engine) differ.push(`the receipt names the ${receipt.engine} engine, the episode's is ${engine}`);
  const limits = ReservedLimits.safeParse(reserved);
  if (!limits.success) return [...differ, 'the reserved limits are malformed'];
  const { wallSeconds, cpuSeconds, memoryBytes } = limits.data;
  if (
    cpuSeconds !== state.limits.cpu_seconds ||
    !(wallSeconds >= 1 && wallSeconds <= state.limits.call_seconds) ||
    memoryBytes !== (engine === 'native' ? NATIVE_MEMORY_BYTES : undefined)
  )
    return [
      ...differ,
      `the reserved limits (${JSON.stringify(limits.data)}) are not the episode's (${state.limits.cpu_seconds} CPU seconds, ` +
        `at most ${state.limits.call_seconds} wall seconds)`,
    ];
  const resolved = resolveLimits(limits.data) as unknown as Record<string, number>;
  const stored = receipt.limits as Record<string, number>;
  if (Object.keys(resolved).some((key) => resolved[key] !== stored[key]))
    differ.push(`the receipt's limits (${JSON.stringify(stored)}) are not those its call was reserved with`);
  return differ;
}

export interface CallVerification {
  call: number;
  /**
   * `replayed` (same status, return code and output), `stopped` (a limit on time or memory stopped it, in
   * the receipt or the re-run: where it stopped depends on timing, so only the status is compared and
   * the call is not said to replay), `differs`, or `unanswered` (reserved, no receipt: the host was killed mid-call).
   */
  outcome: 'replayed' | 'stopped' | 'differs' | 'unanswered';
  status: string | null;
  outputs_compared: boolean;
  differences: string[];
}

export interface EpisodeVerification {
  ok: boolean;
  calls: CallVerification[];
}

/** What the evidence of a call reserved after `before` (the log's events up to it) must say: its observations and credits. */
function evidenceFacts(before: Event[]): { observations: { mask: string; utility: number }[]; credits_remaining: number | null } {
  const observations: { mask: string; utility: number }[] = [];
  let credits: number | null = null;
  for (const e of before) {
    if (e.kind !== 'action' || e.outcome !== 'ok' || (e.action !== 'start' && e.action !== 'observe')) continue;
    const masks = e.action === 'start' ? e.masks : e.new_masks;
    const utilities = e.utilities;
    if (Array.isArray(masks) && Array.isArray(utilities))
      observations.push(...masks.map((mask, k) => ({ mask: String(mask), utility: Number(utilities[k]) })));
    if (typeof e.credits_after === 'number') credits = e.credits_after;
  }
  return { observations, credits_remaining: credits };
}

/**
 * The evidence's facts that differ from the episode's at the reservation (hashes bind the evidence to the
 * receipt, not to the episode: a rewrite of both, e.g. utilities not bought put into the evidence, shows here).
 */
function evidenceDifferences(
  evidence: string,
  facts: { observations: { mask: string; utility: number }[]; credits_remaining: number | null; call: number; episode?: string },
): string[] {
  let parsed: Record<string, Json>;
  try {
    parsed = JSON.parse(evidence) as Record<string, Json>;
  } catch {
    return ['the reserved evidence is not JSON'];
  }
  const differ: string[] = [];
  const observations = Array.isArray(parsed.observations)
    ? parsed.observations.map((o) => ({ mask: (o as Record<string, Json>)?.mask, utility: (o as Record<string, Json>)?.utility }))
    : null;
  if (JSON.stringify(observations) !== JSON.stringify(facts.observations))
    differ.push("the reserved evidence's observations are not the episode's at the reservation");
  if (parsed.credits_remaining !== facts.credits_remaining)
    differ.push(`the reserved evidence's credits (${String(parsed.credits_remaining)}) are not the episode's at the reservation`);
  if (parsed.call !== facts.call) differ.push(`the reserved evidence names call ${String(parsed.call)}`);
  if (parsed.episode !== facts.episode)
    differ.push(`the reserved evidence names episode ${String(parsed.episode).slice(0, 40)}, not this one (${String(facts.episode)})`);
  return differ;
}

/**
 * Re-runs every recorded calculation of the episode in the sandbox and compares each receipt byte for
 * byte (sandbox/calculation.ts `verifyReceipt`); the reservation's code and evidence are the inputs,
 * and their hashes must be the receipt's. The log is first read and checked as every action reads it
 * (refused, one line, when the rules could not have produced it: a receipt before its reservation, a
 * call of another episode, a utility that is not the reference's), so no call is said to replay in a
 * log `status` refuses.
 */
export async function verifyEpisode(settings: Settings, dir: string): Promise<EpisodeVerification> {
  const { verifyReceipt } = await import('./sandbox/calculation.ts');
  const { state, events } = readChecked(settings, dir);
  const calls: CallVerification[] = [];
  const reservations = events.filter((e) => e.kind === 'action' && e.action === 'calculate' && e.outcome === 'ok');
  for (const event of reservations) {
    const facts = evidenceFacts(events.slice(0, events.indexOf(event)));
    const reservation = Reservation.safeParse(event);
    if (!reservation.success) throw new UserError(`the events log of ${dir} holds a calculation reserved without its code or evidence`);
    const { call, code, evidence } = reservation.data;
    const answer = events.find((e) => e.kind === CALCULATION_KIND && e.call === call);
    if (!answer) {
      calls.push({ call, outcome: 'unanswered', status: null, outputs_compared: false, differences: [] });
      continue;
    }
    const differences: string[] = [];
    if (sha256(code) !== reservation.data.code_sha256) differences.push('the reserved code is not the code its sha256 names');
    if (sha256(evidence) !== reservation.data.evidence_sha256)
      differences.push('the reserved evidence is not the evidence its sha256 names');
    differences.push(...evidenceDifferences(evidence, { ...facts, call, ...(state.episode && { episode: state.episode.id }) }));
    const receipt = StoredReceipt.safeParse(answer.receipt);
    if (!receipt.success) {
      calls.push({
        call,
        outcome: 'differs',
        status: null,
        outputs_compared: false,
        differences: [...differences, 'the receipt is malformed'],
      });
      continue;
    }
    const limits = limitDifferences(state, event.limits, receipt.data);
    if (limits.length) {
      calls.push({
        call,
        outcome: 'differs',
        status: receipt.data.status,
        outputs_compared: false,
        differences: [...differences, ...limits],
      });
      continue;
    }
    // the receipt's shape is checked above; verifyReceipt reads only those fields
    const engine = await calculationEngine(settings, receipt.data.engine ?? 'pyodide');
    const verified = await verifyReceipt(receipt.data as never, code, evidence, engine);
    differences.push(...verified.differences);
    calls.push({
      call,
      outcome: differences.length ? 'differs' : verified.outcome,
      status: receipt.data.status,
      outputs_compared: verified.outputsCompared,
      differences,
    });
  }
  return { ok: calls.every((c) => c.outcome !== 'differs'), calls };
}
