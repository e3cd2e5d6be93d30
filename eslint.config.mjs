// The JavaScript lint rules and style, checked by npm test (scripts/lint.sh); `npm run format`
// fixes what can be fixed. ESLint's recommended rules (undefined names, unused variables,
// unreachable code, duplicate keys, …) plus a few that catch bugs, and @stylistic's style set to
// what this code already writes: 2 spaces, single quotes, semicolons, operators at the end of a
// broken line, several short statements on one line allowed.
import js from '@eslint/js';
import stylistic from '@stylistic/eslint-plugin';
import globals from 'globals';

export default [
  js.configs.recommended,
  stylistic.configs.customize({
    indent: 2, quotes: 'single', semi: true, jsx: false, braceStyle: '1tbs', commaDangle: 'always-multiline',
    arrowParens: true,
  }),
  {
    rules: {
      'no-unused-vars': ['error', { ignoreRestSiblings: true }],  // `const { a, ...rest } = o` drops a
      eqeqeq: ['error', 'smart'],
      'array-callback-return': 'error',
      'no-self-compare': 'error',
      'no-template-curly-in-string': 'error',
      'no-throw-literal': 'error',
      'no-unmodified-loop-condition': 'error',
      'no-unreachable-loop': 'error',
      '@stylistic/quotes': ['error', 'single', { avoidEscape: true, allowTemplateLiterals: 'always' }],
      '@stylistic/quote-props': ['error', 'as-needed'],
      '@stylistic/operator-linebreak': ['error', 'after', { overrides: { '?': 'before', ':': 'before' } }],
      '@stylistic/brace-style': ['error', '1tbs', { allowSingleLine: true }],
      '@stylistic/no-multi-spaces': ['error', { ignoreEOLComments: true }],
      '@stylistic/lines-between-class-members': ['error', 'always', { exceptAfterSingleLine: true }],
      '@stylistic/indent-binary-ops': 'off',  // a string's continuation lines are indented as the reader needs
      '@stylistic/max-statements-per-line': 'off',
      '@stylistic/multiline-ternary': 'off',
    },
  },
  // The library runs in browsers, workers and Node: only the globals they share.
  { files: ['src/js/**'], languageOptions: { globals: globals['shared-node-browser'] } },
  { files: ['web/**'], languageOptions: { globals: { ...globals.browser, ...globals.worker } } },
  // Tests and scripts run in Node and hand functions to pages (page.evaluate) and workers.
  { files: ['tests/**', 'scripts/**'], languageOptions: { globals: { ...globals.node, ...globals.browser, ...globals.worker } } },
  // Classic scripts that pages load with <script src>.
  { files: ['**/*.js'], languageOptions: { sourceType: 'script' } },
];
