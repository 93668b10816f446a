// @ts-check
/**
 * Import rules of lib/. Its folders (and a few single files) are layers, listed top to bottom: a
 * file may import its own layer and any layer below it, never one above, and no chain of imports
 * may come back to where it started. Type-only imports count too: a type from an upper layer ties
 * the lower one to it just the same. Entries on one line are one layer (siblings that may import
 * each other, as long as no cycle forms).
 */
const layers = [
  ['cli'], // the nestjs-redis-lock command (the package's bin)
  // The public API, named one by one; `nestjs-redis-lock/inspect`: the types of what users read.
  ['index.ts', 'inspect.ts'],
  // `nestjs-redis-lock/testing`: RedisLockTestingModule (RedisLockModule on the in-memory backend)
  // and its helpers, a second entry point. Nothing imports it: see no-testing-in-main-entry.
  ['testing'],
  ['health'], // the @nestjs/terminus indicator: its own entry point, never loaded by index.ts
  ['module'], // RedisLockModule: wires everything into Nest
  ['decorator'], // @Locked, its interceptor and explorer
  // How lock failures answer on each transport: the filter for all of them, then HTTP, messages
  // (microservices, WebSockets) and GraphQL, then what every transport shares.
  ['transports/lock-exception.filter.ts'],
  ['transports/http', 'transports/messages', 'transports/graphql'],
  ['transports/shared'],
  ['service'], // LockService
  ['locking'], // holds, re-entrancy, runLocked
  ['engine'], // leases, watchdog, waits: the lock lifecycle over a backend
  ['telemetry'], // OpenTelemetry metrics and spans, when @opentelemetry/api is installed
  ['backends', 'kinds'], // the stores (one Redis, Redlock, memory), and each kind's commands on them
  ['options'], // the option types and their validation
  ['lua'], // the Lua scripts
  ['redis'], // connections, pub/sub, Cluster slots
  // Leaves; nest-internals.ts: every key, record and patch of Nest's internals we rely on.
  ['errors', 'keys', 'util', 'nest-internals.ts'],
];

/** `^lib/(a|b)(/|$)`: the files of a layer (folders, or files such as index.ts). */
const pathOf = (/** @type {string[]} */ names) =>
  `^lib/(${names.map((name) => name.replace(/\./g, '\\.')).join('|')})(/|$)`;

/** @type {import('dependency-cruiser').IForbiddenRuleType[]} */
const upwardRules = layers.slice(1).map((names, index) => ({
  name: `no-upward-from-${names.join('+').replace(/\//g, '-')}`,
  comment: `${names.join(', ')} may import only the layers below it in .dependency-cruiser.cjs.`,
  severity: 'error',
  from: { path: pathOf(names) },
  to: { path: pathOf(layers.slice(0, index + 1).flat()) },
}));

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'A cycle means no layer order holds: split out the part both sides need.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    ...upwardRules,
    {
      name: 'no-testing-in-main-entry',
      comment: 'The testing kit has its own entry: a production bundle must not carry it.',
      severity: 'error',
      from: { path: '^lib/', pathNot: '^lib/testing/' },
      to: { path: '^lib/testing/' },
    },
    {
      name: 'no-unlisted-folder',
      comment: 'Every folder of lib/ belongs to a layer: add a new one to the list above.',
      severity: 'error',
      from: { path: '^lib/' },
      to: { path: '^lib/', pathNot: pathOf(layers.flat()) },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Type-only imports (`import type`) are kept, so they obey the layers too.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
