/**
 * How a `sluice` process ends, for whatever restarts it (docs/guides/operating.md, *Stopping*, lists them).
 * The codes Sluice chooses are here and in cli-command.ts (2, a usage mistake); the others are
 * the shell's 128 + the signal that ended the process, which no JavaScript runs to choose:
 * 134 (SIGABRT: V8's fatal errors, "JavaScript heap out of memory" first among them, printed to
 * stderr just before), 139 (SIGSEGV), 135 (SIGBUS), 132 (SIGILL), 136 (SIGFPE): a crash in
 * native code, chDB's or Node's; 137 (SIGKILL: the kernel's OOM killer, or a supervisor).
 */

/** A stop (SIGTERM, SIGINT) that finished its shutdown in time. */
export const EXIT_STOPPED = 0;
/** A command that failed, a server that could not start, or a stop cut short (deadline, second signal). */
export const EXIT_FAILED = 1;
/** An exception nothing caught, on the main thread of a running server: a bug (sysexits' EX_SOFTWARE). */
export const EXIT_UNCAUGHT_EXCEPTION = 70;

/**
 * How long a fatal log line may take to reach its stream before the process exits anyway: the
 * flush of a log whose reader stopped reading (a full pipe) would otherwise never call back.
 */
export const EXIT_FLUSH_DEADLINE_MS = 1000;
