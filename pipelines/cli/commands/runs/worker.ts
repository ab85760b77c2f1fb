import { UserError } from '../../../core/errors.ts';
import { defineCommand } from '../../command.ts';
import { WORKERS_CEILING, wholeNumber, withRuntime } from '../../options.ts';

export default defineCommand({
  command: 'worker',
  describe: 'start Dask worker processes for a scheduler: the pinned runtime, the numerical profile, one computation thread each',
  builder: (y) =>
    withRuntime(y)
      .option('scheduler', { type: 'string', describe: 'Dask scheduler address, e.g. tcp://10.0.0.5:8786' })
      .option('nworkers', { type: 'string', default: '1', describe: 'worker processes on this machine' })
      .option('host', { type: 'string', describe: 'interface to listen on (default 127.0.0.1 for a local scheduler, else chosen by Dask)' })
      .option('print-env', {
        type: 'boolean',
        default: false,
        describe: 'print the environment Dask workers of this project need (for job scripts) and exit',
      }),
  run: async (argv, { settings, out }) => {
    const { startWorkers, workerEnvironment } = await import('../../../execution/dask/cluster.ts');
    if (argv.printEnv) {
      // single-quoted for a POSIX shell: a quote inside a value is closed, escaped and reopened
      for (const [name, value] of Object.entries(workerEnvironment(settings))) out(`export ${name}='${value.replaceAll("'", "'\\''")}'`);
      return 0;
    }
    if (!argv.scheduler) throw new UserError('wwref worker needs --scheduler ADDRESS (e.g. tcp://10.0.0.5:8786)');
    const nworkers = wholeNumber(argv.nworkers, 'nworkers'); // decimal digits: not 0x2, 1e0 or +2
    if (nworkers < 1 || nworkers > WORKERS_CEILING)
      throw new UserError(`--nworkers takes a whole number from 1 to ${WORKERS_CEILING}, not ${nworkers}`);
    if (!/^(tcp|tls|ucx|inproc):\/\/\S+$/.test(argv.scheduler))
      throw new UserError(`--scheduler ${argv.scheduler} is not a Dask address (e.g. tcp://10.0.0.5:8786)`);
    out(
      `starting ${nworkers} Dask worker process(es) for ${argv.scheduler} ` +
        `(numerical profile ${settings.profile.name}, one thread each); Ctrl-C stops them`,
    );
    const workers = startWorkers(settings, { scheduler: argv.scheduler, nworkers, host: argv.host, inherit: true });
    const stop = () => void workers.stop();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    const result = await workers.process;
    return result.exitCode ? 1 : 0;
  },
});
