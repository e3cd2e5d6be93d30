// Which language the page opens in: ?lang=zh or ?lang=en in the address, else the visitor's last
// choice on this site (a press of English / 中文, kept in localStorage), else the first of the
// browser's languages (navigator.languages) that is English or Chinese, else English.
export const LANGUAGES = ['en', 'zh'];
const KEY = 'attention-wasm-demo.lang';
const known = (tag) => LANGUAGES.find((lang) => tag?.toLowerCase() === lang || tag?.toLowerCase().startsWith(`${lang}-`));

// Storage can be refused (a privacy setting, a sandboxed frame): the page then just forgets.
function stored() {
  try { return localStorage.getItem(KEY); } catch { return null; }
}

export function openingLanguage() {
  const asked = new URLSearchParams(location.search).get('lang');
  const browser = navigator.languages?.length ? navigator.languages : [navigator.language];
  return known(asked) ?? known(stored()) ?? browser.map(known).find(Boolean) ?? 'en';
}

// The visitor chose `lang`: remembered for the next visit, and written into the address if it
// names a language (so that reloading keeps the choice).
export function rememberLanguage(lang) {
  try { localStorage.setItem(KEY, lang); } catch { /* not remembered */ }
  const url = new URL(location.href);
  if (url.searchParams.has('lang')) {
    url.searchParams.set('lang', lang);
    history.replaceState(history.state, '', url);
  }
}
