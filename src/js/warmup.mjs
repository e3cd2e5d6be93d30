// V8 runs new WebAssembly code in its baseline compiler (Liftoff) and recompiles a function with
// TurboFan only once it has run for a while; a long call therefore runs at a fraction of full
// speed until its functions are hot. A few small calls right after loading make them hot.
export function warmUp(lib) {
}
