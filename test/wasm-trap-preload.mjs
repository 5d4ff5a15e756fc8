// Preloaded (`node --import`) into processes of test/wasm-traps.test.ts, and by nothing else:
// Sluice itself has no way to be made to trap. In each worker thread, the first instance of the
// WebAssembly transcoder (an instance exporting `transcode` and `__stack_pointer`) starts with
// its stack pointer at 0, as a bug could leave it: the first stack frame of its first request
// lies outside its memory, and the module traps on an out-of-bounds access.
import { isMainThread } from 'node:worker_threads';

if (!isMainThread) {
  const Instance = WebAssembly.Instance;
  let broken = false;
  WebAssembly.Instance = function BrokenFirstInstance(module, imports) {
    const instance = new Instance(module, imports);
    if (!broken && instance.exports.transcode && instance.exports.__stack_pointer) {
      broken = true;
      instance.exports.__stack_pointer.value = 0;
    }
    return instance;
  };
}
