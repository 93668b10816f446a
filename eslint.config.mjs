// @ts-check
import eslint from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'coverage/', '**/node_modules/', 'bench/results/'] },
  eslint.configs.recommended,
  ...tseslint.configs.recommended,
  prettier,
  {
    languageOptions: {
      globals: {
        require: 'readonly',
        module: 'writable',
        process: 'readonly',
        console: 'readonly',
        __dirname: 'readonly',
      },
      // Type-aware rules: each file is checked with the tsconfig.json nearest to it (bench/ has
      // its own, since its peer libraries live in bench/node_modules). The plain .js files of the
      // repo belong to no tsconfig, so they get a default project.
      parserOptions: {
        projectService: {
          allowDefaultProject: [
            '*.js',
            '*.mjs',
            '*.cjs',
            'compat/*.js',
            'test/support/*.js',
            'tools/*.js',
            'sample-app/image/*.js',
          ],
          // One default project per plain JS file; there are more than the default cap of 8.
          maximumDefaultProjectFileMatchCount_THIS_WILL_SLOW_DOWN_LINTING: 32,
        },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // A promise nobody awaits loses its rejection (an unhandled rejection, or a lock released
      // before the work it guards has finished); `void` marks the few that are meant to run free.
      '@typescript-eslint/no-floating-promises': 'error',
      // An async callback where a plain one is expected (an event listener, a forEach) runs
      // unawaited and its rejection goes nowhere.
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/no-unnecessary-type-assertion': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
    },
  },
  {
    files: ['lib/**/*.ts'],
    ignores: ['lib/**/*.spec.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'error' },
  },
  {
    // The bench's peer libraries live in bench/node_modules, installed only by `npm run bench`;
    // without them their classes type as `any`, and the casts that adapt them look unnecessary.
    files: ['bench/lib/contenders.ts'],
    rules: { '@typescript-eslint/no-unnecessary-type-assertion': 'off' },
  },
  {
    files: ['**/*.js'],
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
