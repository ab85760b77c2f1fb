// Labels of an episode or a cohort (`--label KEY=VALUE…`: the agent, the run, …): recorded in the
// episode's state and start event, and in every results line of a cohort. One set of rules for both.
import { UserError } from '../core/errors.ts';

/** A name: a letter, then letters, digits, '_', '.', '-'. */
const LABEL_KEY = /^[A-Za-z][A-Za-z0-9_.-]{0,63}$/;
const LABEL_VALUE_MAX = 256;
const MAX_LABELS = 32;

/** `labels` as given, checked (one-line refusals): a few short names and printable values. */
export function checkLabels(labels: Readonly<Record<string, string>> = {}): Record<string, string> {
  const entries = Object.entries(labels);
  if (entries.length > MAX_LABELS) throw new UserError(`at most ${MAX_LABELS} labels, not ${entries.length}`);
  for (const [key, value] of entries) {
    if (!LABEL_KEY.test(key))
      throw new UserError(
        `label ${JSON.stringify(key.slice(0, 70))}: a key is a name (a letter, then letters, digits, '_', '.', '-'; at most 64)`,
      );
    if (typeof value !== 'string' || value.length > LABEL_VALUE_MAX || /[\u0000-\u001f]/.test(value))
      throw new UserError(`label ${key}: a value of at most ${LABEL_VALUE_MAX} characters without control characters`);
  }
  return Object.fromEntries(entries);
}

/** `KEY=VALUE` items of `--label`, refused with one line when malformed or repeated. */
export function parseLabels(items: readonly string[]): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const item of items) {
    const at = item.indexOf('=');
    if (at < 1) throw new UserError(`--label takes KEY=VALUE, not ${JSON.stringify(item.slice(0, 80))}`);
    const key = item.slice(0, at);
    if (Object.hasOwn(labels, key)) throw new UserError(`--label ${key} is given twice`);
    labels[key] = item.slice(at + 1);
  }
  return checkLabels(labels);
}
