import { defineCommand } from '../../command.ts';
import { withReferences, withRuntime } from '../../options.ts';

export default defineCommand({
  command: 'doctor',
  describe: "print this machine's runtime identity and numerical profile, and whether it reproduces the references bit for bit",
  builder: (y) => withRuntime(withReferences(y)),
  run: async (_argv, { settings, out }) => {
    const { doctor } = await import('../../../jobs/doctor.ts');
    const result = await doctor(settings);
    for (const line of result.lines) out(line);
    return result.reproduces ? 0 : 1;
  },
});
