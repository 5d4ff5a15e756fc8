/**
 * The settings of the property-based fuzz tests (`*.fuzz.test.ts`, fast-check). `npm test` runs
 * each property for a bounded time with a fixed seed, so two runs try the same inputs;
 * `npm run fuzz` runs them far longer, from a fresh seed each time. A failure reports the seed
 * and the path of the smallest counterexample found; replay it with
 * `SLUICE_FUZZ_SEED=<seed> SLUICE_FUZZ_PATH=<path> npx vitest run <file>`.
 *
 *   SLUICE_FUZZ_RUNS     inputs tried per property (default 300)
 *   SLUICE_FUZZ_SECONDS  the most one property runs (default 3); the test's timeout follows it
 *   SLUICE_FUZZ_SEED     the seed (default 20261124; `random`: a fresh one, printed)
 *   SLUICE_FUZZ_PATH     with the seed: replay that counterexample alone
 */
import fc from 'fast-check';
import { valueSymbol } from 'piscina';
import { expect } from 'vitest';
import { ERROR_CODES, SluiceError } from '../core/errors.ts';
import { runTask, type PipelineTask, type TaskResult } from '../pipeline/tasks.ts';

const env = process.env;
const runs = Number(env.SLUICE_FUZZ_RUNS ?? 300);
const seconds = Number(env.SLUICE_FUZZ_SECONDS ?? 3);
const seed = env.SLUICE_FUZZ_SEED === 'random' ? Math.floor(Math.random() * 2 ** 31) : Number(env.SLUICE_FUZZ_SEED ?? 20261124);
if (env.SLUICE_FUZZ_SEED === 'random') process.stderr.write(`fuzz: seed ${seed}\n`);

/** fast-check parameters for one property. */
export function fuzzParameters<T>(): fc.Parameters<T> {
  return {
    seed,
    numRuns: runs,
    ...(env.SLUICE_FUZZ_PATH ? { path: env.SLUICE_FUZZ_PATH } : {}),
    plugins: [fc.interruptAfterTimeLimit(seconds * 1000) as fc.Plugin<T>],
  };
}

/** A test's timeout: the property's time, shrinking a counterexample, and a margin for a loaded machine. */
export const FUZZ_TEST_TIMEOUT_MS = seconds * 1000 * 3 + 30_000;

/** Whether an error is a refusal the client caused: a SluiceError with a 4xx status. */
export function isClientRefusal(err: unknown): err is SluiceError {
  return err instanceof SluiceError && err.httpStatus >= 400 && err.httpStatus < 500;
}

/** Runs `decode`; passes when it returns, or throws a 4xx SluiceError, and rethrows anything else. */
export function decodesOrRefuses<T>(decode: () => T): T | SluiceError {
  try {
    return decode();
  } catch (err) {
    if (isClientRefusal(err)) return err;
    throw err;
  }
}

/** decodesOrRefuses for an asynchronous decoder. */
export async function decodesOrRefusesAsync<T>(decode: () => Promise<T>): Promise<T | SluiceError> {
  try {
    return await decode();
  } catch (err) {
    if (isClientRefusal(err)) return err;
    throw err;
  }
}

/** Bytes with a few of their bytes changed, inserted or removed, and maybe cut short: a corrupted valid encoding. */
export function mutated(valid: fc.Arbitrary<Uint8Array>): fc.Arbitrary<Uint8Array> {
  const edit = fc.record({ at: fc.nat(), kind: fc.constantFrom('set', 'insert', 'delete'), byte: fc.integer({ min: 0, max: 255 }) });
  return fc.tuple(valid, fc.array(edit, { minLength: 1, maxLength: 6 }), fc.option(fc.nat(), { nil: undefined })).map(([bytes, edits, cut]) => {
    const out = [...bytes];
    for (const { at, kind, byte } of edits) {
      const i = out.length === 0 ? 0 : at % out.length;
      if (kind === 'set' && out.length > 0) out[i] = byte;
      else if (kind === 'insert') out.splice(i, 0, byte);
      else out.splice(i, 1);
    }
    return Uint8Array.from(cut === undefined ? out : out.slice(0, cut % (out.length + 1)));
  });
}

/** A worker task run in this thread, as the pool would answer it (piscina's transfer wrapper taken off). */
export async function runTaskHere(task: PipelineTask): Promise<TaskResult> {
  const answer = (await runTask(task)) as { [valueSymbol]?: TaskResult } & TaskResult;
  return answer[valueSymbol] ?? answer;
}

/** The property of every input a decoder is given: rows, or a refusal with a 4xx status and a message. */
export function rowsOrRefusal(result: TaskResult): void {
  if (result.ok) return;
  const status = ERROR_CODES[result.code].http;
  expect(status, `${result.code}: ${result.message}${result.detail ? `\n${result.detail}` : ''}`).toBeGreaterThanOrEqual(400);
  expect(status, `${result.code}: ${result.message}`).toBeLessThan(500);
  expect(result.message.length).toBeGreaterThan(0);
}
