// The first process of an agent's sandbox in `cohort run --sandbox-agents --sandbox-network none`
// (plain JavaScript: started per episode, it loads nothing but Node's own modules):
//
//   node forwarder.mjs PORT SOCKET -- COMMAND [ARG…]
//
// listens on the sandbox's own 127.0.0.1:PORT (the port of the host's episodes server, so that
// WWREF_MCP_URL is the same URL in every mode) and pipes each connection byte for byte to the Unix
// socket SOCKET (the episode's own, bound into the sandbox), then runs COMMAND with this process's
// stdio and ends as it ends: its exit status, or the same signal. Group signals (the deadline's
// SIGTERM) reach the command directly: this process waits for it rather than dying first. It is the
// sandbox's main process, so nothing it started outlives it (bwrap's pid namespace ends with it).
import { spawn } from 'node:child_process';
import { connect, createServer } from 'node:net';

/** Connections at once: the episode's socket admits as many (episodes-server.ts); past them, closed. */
const MAX_CONNECTIONS = 64;

const [port, socket, dash, command, ...args] = process.argv.slice(2);
if (!/^\d+$/.test(port ?? '') || !socket || dash !== '--' || !command) {
  process.stderr.write('forwarder: usage: node forwarder.mjs PORT SOCKET -- COMMAND [ARG…]\n');
  process.exit(2);
}

const server = createServer((client) => {
  const upstream = connect(socket);
  const fail = () => {
    client.destroy();
    upstream.destroy();
  };
  // a side that closed ends the other once what it was sent is written (an error drops both)
  client.on('error', fail).on('close', () => upstream.end());
  upstream.on('error', fail).on('close', () => client.end());
  client.pipe(upstream);
  upstream.pipe(client);
});
server.maxConnections = MAX_CONNECTIONS;
server.once('error', (error) => {
  process.stderr.write(`forwarder: cannot listen on 127.0.0.1:${port}: ${error.code ?? error.message}\n`);
  process.exit(125);
});
const waited = ['SIGTERM', 'SIGINT', 'SIGHUP'];
for (const signal of waited) process.on(signal, () => {});
server.listen(Number(port), '127.0.0.1', () => {
  const child = spawn(command, args, { stdio: 'inherit' });
  child.once('error', (error) => {
    process.stderr.write(`forwarder: cannot run ${command}: ${error.message}\n`);
    process.exit(127);
  });
  child.once('exit', (code, signal) => {
    if (signal) {
      for (const s of waited) process.removeAllListeners(s);
      process.kill(process.pid, signal);
      setTimeout(() => process.exit(128), 1000).unref(); // a signal this process does not die of
      return;
    }
    process.exit(code ?? 1);
  });
});
