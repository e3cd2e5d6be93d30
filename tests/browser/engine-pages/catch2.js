// Runs a Catch2 suite built for the web (?suite=attn_tests_wasm_web, SIMD128, or
// attn_tests_wasm_relaxed_web) and leaves its exit code and output in window.__result for
// tests/browser/engines.test.mjs.
var output = [];
var finish = function (code, extra) {
  if (!window.__result) window.__result = { code: code, output: output.join('\n') + (extra || '') };
};
/* exported Module */  // the Emscripten glue loaded after this script reads it
var Module = {
  arguments: ['--use-colour', 'no'],
  print: function (text) { output.push(text); },
  printErr: function (text) { output.push(text); },
  onExit: function (code) { finish(code); },
  onAbort: function (what) { finish(-1, '\naborted: ' + what); },
};
window.addEventListener('error', function (e) { finish(-2, '\nerror: ' + e.message); });
(function () {
  var suite = new URLSearchParams(location.search).get('suite');
  if (!/^attn_tests_wasm(_relaxed)?_web$/.test(suite || '')) return finish(-3, 'unknown ?suite=' + suite);
  var script = document.createElement('script');
  script.src = '/build/wasm/' + suite + '.js';
  script.onerror = function () { finish(-4, 'could not load ' + script.src); };
  document.body.appendChild(script);
})();
