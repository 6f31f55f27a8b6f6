// Lint: typescript-eslint with type information. Floating promises are errors everywhere; workflow code may not
// import Node built-ins or I/O libraries (it must stay deterministic and bundle for the Temporal sandbox).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { builtinModules } from 'node:module';

const nodeBuiltins = builtinModules.flatMap((m) => [m, `node:${m}`]);
const ioLibraries = [
  'kafkajs',
  'pg',
  'typeorm',
  'fastify',
  'pino',
  'cloudevents',
  'zod',
  '@nestjs/*',
  '@temporalio/worker',
  '@temporalio/client',
  '@temporalio/activity',
  '@temporalio/testing',
  '**/libs/**',
  '@libs/*',
  '**/apps/**',
];

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'packages/*/dist/**',
      'examples/*/dist/**',
      'packages/nestjs/health.*',
      'node_modules/**',
      '.tools/**',
      '.data/**',
      'coverage/**',
      'eslint.config.mjs',
      'jest.config.js',
      '.dependency-cruiser.cjs',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-console': 'error',
    },
  },
  {
    // A lib's index.ts is its public API: each name listed on purpose, so what other code may use is read in one place;
    // no file of a lib re-exports another file or lib wholesale either.
    files: ['libs/**/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        { selector: 'ExportAllDeclaration', message: "List the lib's public names: export { ... } from './file'." },
      ],
    },
  },
  {
    files: ['workflows/**/*.ts', 'contracts/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          paths: nodeBuiltins.map((name) => ({ name, message: 'Workflow code is deterministic: no Node built-ins.' })),
          patterns: [
            {
              group: ioLibraries,
              allowTypeImports: true,
              message: 'Workflow code does no I/O: import activities and libraries as types only.',
            },
          ],
        },
      ],
      'no-restricted-globals': [
        'error',
        { name: 'setInterval', message: 'Use workflow timers (sleep, condition).' },
        { name: 'process', message: 'Workflow code has no process.' },
      ],
    },
  },
  {
    // The SDK is a package users install: it may not reach into the server's code (or anything outside itself).
    files: ['packages/client/src/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/libs/**', '**/apps/**', '**/workflows/**', '**/activities/**', '../../*'],
              message: 'The SDK imports nothing outside packages/client.',
            },
          ],
        },
      ],
    },
  },
  {
    // The NestJS module is a package too: the SDK through '@eventmesh/client', nothing of the server's.
    files: ['packages/nestjs/src/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/libs/**', '**/apps/**', '**/workflows/**', '**/activities/**', '../../*'],
              message: 'The NestJS module imports nothing outside packages/nestjs.',
            },
          ],
        },
      ],
    },
  },
  {
    // The persistence rule (docs/architecture.md#persistence): the runtime's SQL is in libs/storage. Exceptions: the
    // epoch fence (libs/fence), the connector runtime (a process of its own: its schema, and its connectors' own
    // databases), and the probes that are not persistence (health's `SELECT 1`, the liveness lock's session lock).
    files: ['libs/**/*.ts', 'apps/**/*.ts', 'activities/**/*.ts'],
    ignores: [
      '**/*.spec.ts',
      'libs/storage/**',
      'libs/fence/**',
      'apps/connectors/**',
      'libs/health/health.service.ts',
      'libs/ownership/liveness-lock.ts',
    ],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: "CallExpression[callee.property.name='query'][arguments.0.type=/^(Literal|TemplateLiteral)$/]",
          message: 'SQL lives in libs/storage (docs/architecture.md#persistence): call a store of libs/storage.',
        },
        {
          selector: "MemberExpression[property.name='manager'][object.type!='ThisExpression']",
          message: 'Entities are read and written in libs/storage (docs/architecture.md#persistence): call its store.',
        },
      ],
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          paths: [{ name: 'pg', allowTypeImports: true, message: 'Postgres is reached through libs/storage.' }],
        },
      ],
    },
  },
  {
    files: ['test/**/*.ts', '**/*.spec.ts', 'scripts/**/*.ts', 'bench/**/*.ts', 'examples/**/*.ts'],
    rules: { 'no-console': 'off' },
  },
);
