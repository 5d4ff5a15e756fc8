import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import { nativeUws } from './gateway/http/uws.ts';

/**
 * The files whose tests go through the HTTP front end. They run once more on uWebSockets.js (the
 * harness's testConfig reads SLUICE_TEST_HTTP_ENGINE), the engine `SLUICE_HTTP_ENGINE=uws`
 * chooses, so it gets the same tests as the default node:http.
 */
const HTTP_FACING = [
  'test/refusals.test.ts',
  'test/agent-api.test.ts',
  'test/otlp-traces.test.ts',
  'test/otlp-logs.test.ts',
  'test/otlp-metrics.test.ts',
  'test/rate-limit.test.ts',
  'test/relay-admin.test.ts',
  'test/console-api.test.ts',
  'test/relay-submissions.test.ts',
  'test/relay-notifications.test.ts',
  'test/relay-idempotency.test.ts',
  'test/relay-captcha.test.ts',
  'test/relay-delivery.test.ts',
  'test/storage-backlog.test.ts',
  'test/storage-down.test.ts',
  'test/http-hostile.test.ts',
  'test/metrics.test.ts',
  'test/openapi-conformance.test.ts',
  'test/api-docs-browser.test.ts',
  'test/query-endpoint.test.ts',
];

// As `npm start` and the image run Sluice: glibc's mmap threshold pinned, so freed request
// bodies go back to the kernel (docs/guides/operating.md, Memory). glibc reads it when a process starts, so it is
// set here, before the test processes are forked.
process.env.MALLOC_MMAP_THRESHOLD_ ??= '131072';

export default defineConfig({
  test: {
    // libchdb binds one data directory per process: every test file gets its own process.
    pool: 'forks',
    // One file per core. Vitest's default leaves a core free, which on a 2-core machine runs the
    // files one after the other, though most of their time is spent waiting on the processes,
    // servers and disk they test. Two at once ran the suite in 8.1 minutes where one at a time took
    // 11–15 (2 cores, 2026-11-24).
    maxWorkers: availableParallelism(),
    // As Sluice runs (bin/node-flags.ts): a WebAssembly trap is an exception even with chDB in the
    // process, so servers started by the tests run the WebAssembly transcoder, as `npm start` does.
    execArgv: ['--disable-wasm-trap-handler'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // expect.poll waits several seconds, not vitest's 1 s: on a loaded 2-core machine a page's
    // answer to a click can take longer (a drag-to-zoom's URL did, beside the full suite).
    expect: { poll: { timeout: 15_000 } },
    projects: [
      { extends: true, test: { name: 'node-http', include: ['**/*.test.ts'], exclude: ['node_modules/**'] } },
      // uWebSockets.js's native binary exists for Node 20 only; elsewhere Sluice serves with node:http.
      ...(nativeUws().uws ? [{ extends: true as const, test: { name: 'uws', include: HTTP_FACING, env: { SLUICE_TEST_HTTP_ENGINE: 'uws' } } }] : []),
    ],
  },
});
