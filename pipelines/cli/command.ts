// What a command module is: its yargs name, description and options, and a run function that gets
// the parsed arguments and the process's settings and returns the exit status (0 when it returns none).
import type { ArgumentsCamelCase, Argv } from 'yargs';
import type { Settings } from '../core/settings.ts';

export interface CommandContext {
  settings: Settings;
  /** One line of the command's output on stdout. */
  out: (line?: string) => void;
}

export interface Command<T = unknown> {
  command: string;
  describe: string;
  builder: (y: Argv) => Argv<T>;
  /** `--references` of this command names a folder of another kind (a pack, add-source's target): not the catalog's. */
  ownReferences?: (argv: ArgumentsCamelCase<T>) => boolean;
  run: (argv: ArgumentsCamelCase<T>, context: CommandContext) => Promise<number | void> | number | void;
}

/** A command, with its argument types inferred from its builder. */
export function defineCommand<T>(command: Command<T>): Command<T> {
  return command;
}
