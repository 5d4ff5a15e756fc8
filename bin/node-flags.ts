/**
 * Node flags every `sluice` process starts with. They must be on the command line: V8 reads
 * them when it sets up the heap, and setting them at run time does nothing. The places that
 * start Sluice (the shebang of bin/sluice.mjs, `npm start`, the Dockerfile's ENTRYPOINT) spell
 * them out, and test/node-flags.test.ts checks that they do; the bench's processes and those of
 * test/sluice-processes.ts are spawned as `node <these> bin/sluice.mjs`.
 *
 * --no-memory-reducer: V8 shrinks an idle process's heap, and a gateway that then took an even
 * load of ~1,600 requests/s ran full collections back to back (29 % of its main thread), spent
 * twice its CPU per span and fell seconds behind; a gateway that had not idled took the same
 * load at its usual cost (bench/HISTORY.md, *Results*, 2026-11-25). A server's load comes back:
 * its heap keeps the size its last busy minute needed.
 *
 * --disable-wasm-trap-handler: V8 checks the WebAssembly transcoder's memory accesses itself
 * rather than catching the SIGSEGV of an access out of bounds. Its signal handler does not
 * survive chDB, which takes the process's signal handlers as it opens and whose dispositions
 * storage/chdb-session.ts puts back to the default: a trap in the module would end the process
 * (pipeline/wasm/traps.test.ts shows both). With it a trap is an exception, the request
 * is served by JavaScript and the instance replaced; the checks cost a few per cent of the
 * module's time. Without it the worker threads transcode with JavaScript (pipeline/wasm/select.ts).
 */
export const SLUICE_NODE_FLAGS: readonly string[] = ['--no-memory-reducer', '--disable-wasm-trap-handler'];
