/** A mistake the user can fix (bad input, missing file, failed check): the CLI prints its message, no stack. */
export class UserError extends Error {
  override name = 'UserError';
}

/** The user stopped a job (Ctrl-C, SIGTERM): its cleanup has run; the CLI exits with 128 + the signal's number. */
export class Interrupted extends UserError {
  override name = 'Interrupted';
  constructor(
    readonly signal: NodeJS.Signals,
    message: string,
  ) {
    super(message);
  }

  get exitCode(): number {
    return signal2code[this.signal] ?? 130;
  }
}

const signal2code: Partial<Record<NodeJS.Signals, number>> = { SIGINT: 130, SIGTERM: 143, SIGHUP: 129 };
