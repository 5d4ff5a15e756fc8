#!/usr/bin/env -S node --no-memory-reducer --disable-wasm-trap-handler
// The `sluice` executable: loads the TypeScript sources through tsx and runs the CLI. Its Node
// flags are bin/node-flags.ts's (`env -S` passes them: GNU coreutils 8.30+, macOS).
import { register } from 'tsx/esm/api';

register();
const { run } = await import('./cli.ts');
await run(process.argv.slice(2));
