// The tasks a page's main thread ran while `work` went on, from a Chromium trace: for each task
// its wall time and its CPU time (the thread's own time, which other processes on a loaded
// machine do not stretch), in ms. Chromium only (Playwright's browser.startTracing).
export async function mainThreadTasks(browser, page, work) {
  await browser.startTracing(page, { categories: ['devtools.timeline', 'disabled-by-default-devtools.timeline'] });
  try {
    await work();
  } finally {
    var trace = JSON.parse(String(await browser.stopTracing()));
  }
  const events = trace.traceEvents ?? trace;
  const url = page.url();
  // The page's renderer process, and its main thread in it.
  const started = events.find((e) => e.name === 'TracingStartedInBrowser');
  const pid = started?.args?.data?.frames?.find((f) => url.startsWith(f.url) || f.url.startsWith(url))?.processId;
  const main = events.find((e) => e.name === 'thread_name' && e.args?.name === 'CrRendererMain' && (pid === undefined || e.pid === pid));
  if (!main) throw new Error('mainThreadTasks: no main thread of the page in the trace');
  return events.filter((e) => e.name === 'RunTask' && e.ph === 'X' && e.pid === main.pid && e.tid === main.tid)
    .map((e) => ({ wall: e.dur / 1000, cpu: (e.tdur ?? e.dur) / 1000 }));
}
