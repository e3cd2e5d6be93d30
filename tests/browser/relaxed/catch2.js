// Runs the Catch2 suite built for the web with relaxed SIMD (attn_tests_wasm_relaxed_web) and
// leaves its exit code and output in window.__result for tests/browser/relaxed.test.mjs.
var output = [];
var finish = function (code, extra) {
  if (!window.__result) window.__result = { code: code, output: output.join('\n') + (extra || '') };
};
var Module = {
  arguments: ['--use-colour', 'no'],
  print: function (text) { output.push(text); },
  printErr: function (text) { output.push(text); },
  onExit: function (code) { finish(code); },
  onAbort: function (what) { finish(-1, '\naborted: ' + what); },
};
window.addEventListener('error', function (e) { finish(-2, '\nerror: ' + e.message); });
