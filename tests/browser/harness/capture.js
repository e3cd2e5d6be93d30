// Put first in every HTML page that tests/browser/browsers.mjs serves: records the page's console
// errors and warnings, uncaught errors, unhandled rejections and resources that failed to load in
// window.__pageProblems, for the engines driven over classic WebDriver, which cannot report them
// (Firefox, WebKitGTK). A classic script from the page's own origin, so a strict CSP allows it. It
// sees the page's main thread only: a worker's console stays out of reach.
(function () {
  var problems = [];
  Object.defineProperty(window, '__pageProblems', { value: problems });
  var text = function (args) {
    return Array.prototype.map.call(args, function (a) { return a instanceof Error ? a.message : String(a); }).join(' ');
  };
  [['error', 'error'], ['warn', 'warning']].forEach(function (pair) {
    var original = console[pair[0]];
    console[pair[0]] = function () {
      problems.push(pair[1] + ': ' + text(arguments));
      return original.apply(this, arguments);
    };
  });
  window.addEventListener('error', function (e) {
    if (e instanceof ErrorEvent) problems.push('pageerror: ' + e.message.replace(/^(Uncaught )?(Error: )?/, ''));
    else if (e.target && e.target !== window) problems.push('requestfailed: ' + (e.target.src || e.target.href));
  }, true);
  window.addEventListener('unhandledrejection', function (e) {
    var r = e.reason;
    problems.push('pageerror: ' + (r instanceof Error ? r.message : String(r)));
  });
})();
