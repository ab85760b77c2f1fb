/** A mistake the user can fix (bad input, missing file, failed check): the CLI prints its message, no stack. */
export class UserError extends Error {
  override name = 'UserError';
}
