#!/usr/bin/env node
// The `sluice` executable: loads the TypeScript sources through tsx and runs the CLI.
import { register } from 'tsx/esm/api';

register();
const { run } = await import('./cli.ts');
await run(process.argv.slice(2));
