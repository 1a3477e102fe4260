/** `@echogarden/speex-resampler-wasm` ships no types: its entry points are Emscripten module factories. */
declare module "@echogarden/speex-resampler-wasm/simd" {
  const createModule: () => Promise<unknown>;
  export default createModule;
}
