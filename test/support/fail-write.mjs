// Test double loaded with `node --import` (test/support/doubles.ts): the next atomic write of the file
// named by TEST_FAIL_WRITE (its temporary `<name>.<pid>.<ms>.tmp`) fails as a full disk would.
import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { basename } from 'node:path';

const target = process.env.TEST_FAIL_WRITE;
if (target) {
  const writeFileSync = fs.writeFileSync;
  fs.writeFileSync = function (path, ...rest) {
    if (typeof path === 'string' && basename(path).startsWith(`${target}.`) && path.endsWith('.tmp')) {
      throw Object.assign(new Error(`ENOSPC: no space left on device, write '${path}'`), { code: 'ENOSPC', syscall: 'write' });
    }
    return writeFileSync.call(this, path, ...rest);
  };
  syncBuiltinESMExports();
}
