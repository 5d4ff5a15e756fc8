/**
 * Every chDB Session of Sluice is opened here, so that a fatal error still ends the process.
 *
 * When chDB starts its engine (the first Session on a data dir, and again after every Session
 * was closed) it installs ClickHouse's crash handlers for SIGABRT, SIGSEGV, SIGBUS, SIGILL,
 * SIGFPE, SIGSYS, SIGTRAP and SIGTSTP. ClickHouse's server pairs them with a thread that prints
 * the crash report; chDB starts no such thread, so the handler writes to a pipe nobody reads
 * and then sleeps, waiting for that report, for 300 s before the default action runs (a
 * process left so died 306 s after its OOM here). V8 ends a process that ran out of heap with
 * abort(), so `sluice serve` answered "JavaScript heap out of memory" by hanging for five
 * minutes with its ports and the data dir held, its event loop stopped (SIGTERM reaches
 * Node's listener, which never runs). gdb on such a process: the main
 * thread in libchdb.so's handler, under node::OOMErrorHandler → abort(), in clock_nanosleep.
 *
 * The default dispositions are put back after every open: then abort() and a crash end the
 * process at once (exit status 128 + the signal), which a supervisor sees and restarts. Node
 * has no call to set a disposition, but libuv restores the default when the last listener of a
 * signal is removed, so adding and removing one does it (tried on Node 20: SigCgt in
 * /proc/self/status loses the signal). Nothing of Sluice listens to these signals; one that did
 * would keep its handler, and chDB's would stay in place for that signal.
 *
 * SIGSEGV was Node's before chDB took it (V8's WebAssembly bounds-check traps): after chDB it
 * is the default, so a WebAssembly out-of-bounds access ends the process rather than hanging it.
 */
import type { Session } from 'chdb';

/** The signals chDB's engine catches to print a crash report it never prints. */
export const CHDB_CRASH_SIGNALS: readonly NodeJS.Signals[] = ['SIGABRT', 'SIGSEGV', 'SIGBUS', 'SIGILL', 'SIGFPE', 'SIGSYS', 'SIGTRAP', 'SIGTSTP'];

/**
 * Opens a chDB Session on `engineDir` and gives the crash signals back their default action.
 * `engineArgs` start the engine with them if this Session is the one that starts it
 * (storage/chdb-engine.ts).
 */
export async function openChdbSession(engineDir: string, engineArgs: readonly string[] = []): Promise<Session> {
  const { Session } = await import('chdb');
  const session = new Session(engineDir, engineArgs.length > 0 ? { connectionArgs: [...engineArgs] } : {});
  restoreDefaultCrashSignals();
  return session;
}

/** Puts back the default action of CHDB_CRASH_SIGNALS that nothing in this process listens to. */
export function restoreDefaultCrashSignals(): void {
  const noop = () => {};
  for (const signal of CHDB_CRASH_SIGNALS) {
    if (process.listenerCount(signal) > 0) continue;
    process.on(signal, noop);
    process.off(signal, noop);
  }
}
