#!/usr/bin/env node
// Entry point of the `wwref` command: runs the TypeScript CLI through tsx, so there is no build step.
import { register } from 'tsx/esm/api';
register();
const { cliProcess } = await import('../pipelines/cli/main.ts');
await cliProcess();
