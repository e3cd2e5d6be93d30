// The harness's Firefox driver: Debian's Firefox ESR, headless, driven over Marionette — classic
// WebDriver (webdriver.mjs) spoken to Firefox directly (marionette.mjs), as geckodriver does. One
// session, its windows the pages; problems come from capture.js (a worker's console is out of reach).
// Not WebDriver BiDi: a BiDi session makes Firefox's Remote Agent listen for worker registrations,
// and with that listener `new Worker()` inside a worker now and then never returns — see
// docs/development.md, "The browser engines".
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startGroup } from './process.mjs';
import { marionette } from './marionette.mjs';
import { classicSession } from './webdriver.mjs';

const FIREFOX = process.env.FIREFOX_PATH ?? '/usr/bin/firefox-esr';
// Read at startup, before Marionette applies its own recommended preferences: a free port (written
// to <profile>/MarionetteActivePort), and a closed network with no first-run or update pages.
const PREFS = {
  'marionette.port': 0,
  'app.update.disabledForTesting': true,
  'browser.shell.checkDefaultBrowser': false,
  'browser.startup.homepage_override.mstone': 'ignore',
  'browser.startup.page': 0,
  'browser.aboutwelcome.enabled': false,
  'datareporting.policy.dataSubmissionEnabled': false,
  'toolkit.telemetry.reportingpolicy.firstRun': false,
  'toolkit.legacyUserProfileCustomizations.stylesheets': true,  // USER_CHROME
};
// The browser window keeps its toolbar usable by staying 500 px wide or more: let it narrow to a
// phone's width (only the toolbar gets cramped).
const USER_CHROME = ':root { min-width: 0 !important; }\n';

export async function launch() {
  const profile = mkdtempSync(join(tmpdir(), 'attn-firefox-'));
  writeFileSync(join(profile, 'user.js'), Object.entries(PREFS).map(([k, v]) => `user_pref(${JSON.stringify(k)}, ${JSON.stringify(v)});\n`).join(''));
  mkdirSync(join(profile, 'chrome'));
  writeFileSync(join(profile, 'chrome', 'userChrome.css'), USER_CHROME);
  const removeProfile = () => {
    try { rmSync(profile, { recursive: true, force: true, maxRetries: 5 }); } catch { /* still in use: a stray temp dir */ }
  };
  const browser = startGroup('Firefox', FIREFOX, ['--marionette', '--headless', '-no-remote', '--profile', profile], { onStop: removeProfile });
  let connection;
  try {
    const port = await browser.started(async () => {
      try { return Number(readFileSync(join(profile, 'MarionetteActivePort'), 'utf8')) || null; } catch { return null; }
    });
    connection = await marionette(port);
    const session = await classicSession({ name: 'Firefox', call: connection.call, fullShot: '/moz/screenshot/full' });
    return {
      name: 'Firefox',
      via: 'headless, over Marionette (classic WebDriver)',
      version: session.version,
      minWidth: session.minWidth,
      open: session.open,
      async close() {
        await session.close();
        connection.close();
        browser.stop();
        await browser.gone;
        removeProfile();  // again, once Firefox has stopped writing to it
      },
    };
  } catch (error) {
    connection?.close();
    browser.stop();
    throw error;
  }
}
