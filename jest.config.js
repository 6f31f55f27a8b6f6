// Three tiers (and fault injection, test/faults): unit specs beside the code (fakes allowed), integration specs against the real servers, and
// end-to-end specs that run real instance processes. Integration and e2e run serially (`--runInBand`) and share
// one set of servers, started by scripts/test.sh (or by the global setup when jest is run directly).
// @a2a-js/sdk ships a CommonJS build, but it requires jose 6, which is ESM only (nested at
// node_modules/@a2a-js/sdk/node_modules/jose; the project's own jose is 5, CommonJS). Plain Node 20.19+ loads
// it through require(esm); jest's module runtime cannot, so that one package's files are compiled to CommonJS
// by ts-jest (allowJs) and let through transformIgnorePatterns. The SDK runs with the jose it ships with.
const sdkJose = '/@a2a-js/sdk/node_modules/jose/';
const transform = {
  '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json', diagnostics: false }],
  [`^.+${sdkJose}.+\\.js$`]: [
    'ts-jest',
    { tsconfig: { allowJs: true, module: 'commonjs', target: 'es2022' }, diagnostics: false },
  ],
};
const base = {
  testEnvironment: 'node',
  transform,
  transformIgnorePatterns: [`^(?!.*${sdkJose}).*/node_modules/`],
  moduleFileExtensions: ['ts', 'js', 'json'],
  setupFiles: ['<rootDir>/test/support/quiet-logs.ts'],
  // Server state and the checkouts `npm run bench:ab` compares with: not this tree's modules.
  modulePathIgnorePatterns: ['<rootDir>/.data/'],
  // The repo's own packages from their sources, as tsconfig.json's paths resolve them (no build needed to test).
  moduleNameMapper: {
    '^@eventmesh/client$': '<rootDir>/packages/client/src',
    '^@eventmesh/nestjs$': '<rootDir>/packages/nestjs/src',
    '^@libs/(.*)$': '<rootDir>/libs/$1',
  },
};

module.exports = {
  testTimeout: 60000,
  projects: [
    {
      ...base,
      displayName: 'unit',
      testMatch: [
        '<rootDir>/libs/**/*.spec.ts',
        '<rootDir>/apps/**/*.spec.ts',
        '<rootDir>/activities/**/*.spec.ts',
        '<rootDir>/test/replay/**/*.spec.ts',
        '<rootDir>/test/workflows/**/*.spec.ts',
        '<rootDir>/test/faults/**/*.spec.ts',
        '<rootDir>/packages/*/src/**/*.spec.ts',
        '<rootDir>/scripts/**/*.spec.ts',
      ],
    },
    {
      ...base,
      displayName: 'integration',
      testMatch: ['<rootDir>/test/integration/**/*.spec.ts'],
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      setupFilesAfterEnv: ['<rootDir>/test/support/suite-cleanup.ts'],
    },
    {
      ...base,
      displayName: 'e2e',
      testMatch: ['<rootDir>/test/e2e/**/*.e2e-spec.ts'],
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      setupFilesAfterEnv: ['<rootDir>/test/support/suite-cleanup.ts'],
    },
    {
      // Fault injection under load (docs/failure-matrix.md): real instance processes, a fault proxy in front of
      // a server, and servers killed and restarted. Serial, like e2e, and under the same shared-server lock.
      ...base,
      displayName: 'faults',
      testMatch: ['<rootDir>/test/faults/**/*.e2e-spec.ts'],
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      setupFilesAfterEnv: ['<rootDir>/test/support/suite-cleanup.ts'],
    },
  ],
};
