// The page's words in English and Chinese (the lecture it follows teaches attention in Chinese;
// the Chinese page uses its terms), one module per language, loaded when first shown: a visitor
// downloads only the language the page opens in. Both have the same keys (a test checks it).
const MODULES = { en: () => import('./i18n-en.mjs').then((m) => m.EN), zh: () => import('./i18n-zh.mjs').then((m) => m.ZH) };
const loading = {};

export const loadStrings = (lang) => (loading[lang] ??= MODULES[lang]());

export function format(template, values = {}) {
  return template.replace(/\{(\w+)\}/g, (_, key) => String(values[key] ?? ''));
}
