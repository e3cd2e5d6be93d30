// The page's words in English and Chinese (the lecture it follows teaches attention in Chinese;
// the Chinese page uses its terms). Both languages have the same keys (a test checks it).
import { EN } from './i18n-en.mjs';
import { ZH } from './i18n-zh.mjs';

export const STRINGS = { en: EN, zh: ZH };

export function format(template, values = {}) {
  return template.replace(/\{(\w+)\}/g, (_, key) => String(values[key] ?? ''));
}
