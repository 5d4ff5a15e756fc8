// Preloaded (`node --import`) into a `sluice serve` by test/fatal-processes.test.ts, and by
// nothing else: Sluice itself has no way to be told to fail. On SIGUSR2 the main thread does
// what FATAL_TEST_ACTION names, as a bug in a request's handling would:
//   heap  — allocates until V8 ends the process ("JavaScript heap out of memory");
//   throw — throws an exception nothing catches.
const action = process.env.FATAL_TEST_ACTION;

process.on('SIGUSR2', () => {
  if (action === 'throw') throw new Error('thrown by test/fatal-preload.mjs');
  if (action === 'heap') {
    const kept = [];
    for (;;) kept.push(Array.from({ length: 10_000 }, (_, i) => ({ i })));
  }
});
