// Test double loaded with `node --import` (test/support/doubles.ts): writes of the file named by
// TEST_FAIL_WRITE fail as a full disk would. An atomic write (its temporary `<name>.<pid>.<n>.tmp`,
// written by writeFileSync or through a descriptor) fails after the temporary file is created, empty; a write through a descriptor opened on the file itself (an append) is short: half its
// bytes reach the file, then ENOSPC, as when the disk fills in the middle of a line.
import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { basename } from 'node:path';

const target = process.env.TEST_FAIL_WRITE;
const full = (path) => Object.assign(new Error(`ENOSPC: no space left on device, write '${path}'`), { code: 'ENOSPC', syscall: 'write' });
if (target) {
  const { writeFileSync, openSync, closeSync, writeSync } = fs;
  /** Descriptors open on the target, and whether their next write is the short one. */
  const targets = new Map();
  fs.writeFileSync = function (path, ...rest) {
    if (typeof path === 'string' && basename(path).startsWith(`${target}.`) && path.endsWith('.tmp')) {
      closeSync(openSync(path, 'wx')); // the file is made, its bytes are not: as when the disk fills
      throw full(path);
    }
    return writeFileSync.call(this, path, ...rest);
  };
  fs.openSync = function (path, ...rest) {
    const fd = openSync.call(this, path, ...rest);
    if (typeof path === 'string' && basename(path) === target) targets.set(fd, path);
    // a temporary file of an atomic write opened by descriptor (core/fsutil.ts): created, no byte written
    else if (typeof path === 'string' && basename(path).startsWith(`${target}.`) && path.endsWith('.tmp')) targets.set(fd, null);
    return fd;
  };
  fs.closeSync = function (fd, ...rest) {
    targets.delete(fd);
    return closeSync.call(this, fd, ...rest);
  };
  fs.writeSync = function (fd, data, ...rest) {
    const path = targets.get(fd);
    if (path === undefined) return writeSync.call(this, fd, data, ...rest);
    if (path === null) throw full(target);
    targets.set(fd, null); // the next write finds the disk full
    const bytes = typeof data === 'string' ? Buffer.from(data) : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    const [offset = 0, length = bytes.length - offset, position = null] = typeof data === 'string' ? [] : rest;
    const half = Math.max(1, Math.floor(length / 2));
    return writeSync.call(this, fd, bytes, offset, half, position);
  };
  syncBuiltinESMExports();
}
