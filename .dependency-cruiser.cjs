// Boundary lint (`npm run lint:boundaries`, docs/architecture.md#boundaries). A "unit" is a top-level folder
// (contracts, workflows, activities, scripts, bench) or one folder of apps/, libs/ or packages/. The layers, from the top:
//
//   scripts, bench            entry points: may import anything below
//   apps/instance             composes the other two apps
//   apps/connectors           a client of the runtime: the SDK and the reusable libs only (rule below)
//   apps/gateway, apps/worker may import libs, activities and contracts (no workflow file: they start workflows by name)
//   activities                may import libs and contracts, never a workflow
//   libs                      may import other libs (through their index.ts) and contracts; never apps, activities
//                             or workflows
//   workflows                 deterministic code for the Temporal sandbox: imports contracts only
//   contracts                 the Temporal contracts (names, signals, queries, updates, search attributes, inputs,
//                             results, activity interfaces): import nothing of this tree
//   packages/*                client packages: import nothing of the server
//
// Type-only imports count everywhere (tsPreCompilationDeps): a type import is a dependency a reader has to follow.
// Test files (test/, *.spec.ts) are not cruised: they may reach into what they test.
// `npm run lint:boundaries` fails on any violation: the tree has none, so each rule holds everywhere.
const UNIT = '((?:apps|libs|packages)/[^/]+|[^/]+)';
const UNIT_FOLDER = '((apps|libs|packages)/[^/]+|contracts|workflows|activities|scripts|bench)';

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-cycle-between-units',
      comment:
        'Units that import each other, directly or around a circle (type-only imports counted), whatever files the ' +
        'imports are in: none of them can be read, tested or moved on its own.',
      severity: 'error',
      scope: 'folder',
      from: { path: `^${UNIT_FOLDER}$` },
      to: { path: `^${UNIT_FOLDER}$`, circular: true },
    },
    {
      name: 'no-cycle-across-units',
      comment:
        'The same at the level of files: an import cycle that leaves its unit, with the files it runs through. A ' +
        'cycle inside one unit is that unit’s own business.',
      severity: 'error',
      from: { path: `^${UNIT}/` },
      to: { circular: true, via: { pathNot: '^$1/' } },
    },
    {
      name: 'no-lib-internals',
      comment: 'Another lib is imported through its index.ts only: the rest of its files are its internals.',
      severity: 'error',
      from: { path: `^${UNIT}/` },
      to: { path: '^libs/[^/]+/', pathNot: ['^$1/', '^libs/[^/]+/index\\.ts$'] },
    },
    {
      name: 'libs-by-alias',
      comment:
        'Code outside a lib imports it by its path alias, `@libs/<name>` (tsconfig.json), never by a relative path: ' +
        'where a lib is used reads the same from every folder, and a lib can move without its users changing.',
      severity: 'error',
      from: { path: `^${UNIT}/` },
      to: { path: '^libs/', pathNot: '^$1/', dependencyTypesNot: ['aliased-tsconfig'] },
    },
    {
      name: 'workflows-import-only-contracts',
      comment:
        'Workflow code is bundled for the Temporal sandbox and replayed: it imports nothing of this tree but ' +
        'contracts/ (npm packages are checked by eslint.config.mjs).',
      severity: 'error',
      from: { path: '^workflows/' },
      to: { path: '^(apps|libs|activities|packages|scripts|bench|test)/' },
    },
    {
      name: 'contracts-import-nothing',
      comment: 'The Temporal contracts are the bottom layer, imported by workflows, activities, libs and apps.',
      severity: 'error',
      from: { path: '^contracts/' },
      to: { path: '^(apps|libs|workflows|activities|packages|scripts|bench|test)/' },
    },
    {
      name: 'nothing-imports-workflows',
      comment:
        'Workflow code is bundled for the worker from its folder (scripts/build-workflow-bundle.ts) and started by the ' +
        'name and signature its contract declares (contracts/): no other code imports a workflow file.',
      severity: 'error',
      from: { path: '^(apps|libs|activities|packages|contracts|scripts|bench)/' },
      to: { path: '^workflows/' },
    },
    {
      name: 'libs-below-apps-and-activities',
      comment: 'libs are the lowest server layer: they import no app and no activity.',
      severity: 'error',
      from: { path: '^libs/' },
      to: { path: '^(apps|activities)/' },
    },
    {
      name: 'activities-below-apps',
      severity: 'error',
      from: { path: '^activities/' },
      to: { path: '^apps/' },
    },
    {
      name: 'apps-gateway-and-worker-apart',
      comment: 'apps/instance composes the gateway and the worker; they do not import each other or the instance.',
      severity: 'error',
      from: { path: '^apps/(gateway|worker)/' },
      to: { path: '^apps/', pathNot: '^apps/$1/' },
    },
    {
      name: 'connectors-outside-the-runtime',
      comment:
        'The connector runtime (apps/connectors) is a client of the event runtime: it talks to it through the SDK ' +
        'only, and imports none of its internals (no other app, no activity, no runtime lib). Allowed: the SDK, the ' +
        'contracts, and the libs meant for reuse: config, logging, errors, the fence, the security gate library.',
      severity: 'error',
      from: { path: '^apps/connectors/' },
      to: {
        path: '^(apps|libs|activities|workflows)/',
        pathNot: ['^apps/connectors/', '^libs/(config|logging|errors|fence|security)/'],
      },
    },
    {
      name: 'nothing-imports-entry-points',
      comment: 'scripts/, bench/ and test/ sit on top: no server or client code imports them.',
      severity: 'error',
      from: { path: '^(apps|libs|contracts|workflows|activities|packages)/' },
      to: { path: '^(scripts|bench|test)/' },
    },
    {
      name: 'packages-import-no-server',
      comment: 'A client package is published on its own: it imports nothing of the server.',
      severity: 'error',
      from: { path: '^packages/' },
      to: { path: '^(apps|libs|contracts|workflows|activities|scripts|bench|test)/' },
    },
    {
      name: 'packages-apart',
      comment: 'Each client package imports another only as a package (its name, through node_modules).',
      severity: 'error',
      from: { path: '^packages/([^/]+)/' },
      // By its name (`@eventmesh/client`, mapped to its source by tsconfig's paths in this repo, to its build in an
      // install): allowed. By a relative path into its folder: refused.
      to: { path: '^packages/', pathNot: '^packages/$1/', dependencyTypesNot: ['aliased-tsconfig'] },
    },
    {
      name: 'not-to-unresolvable',
      comment: 'An import that resolves to nothing: a typo, or a dependency missing from package.json.',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    includeOnly: '^(apps|libs|packages|contracts|workflows|activities|scripts|bench)/',
    doNotFollow: { path: 'node_modules' },
    exclude: { path: ['(^|/)test/', '\\.(e2e-)?spec\\.ts$', '(^|/)dist/', '(^|/)node_modules/', '^\\.(data|tools)/'] },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js', '.json', '.d.ts'] },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
