import Module from 'node:module';
import path from 'node:path';

/**
 * The tree's path alias (`@libs/<name>` is `libs/<name>`, tsconfig.json) for code jest loads outside its module
 * registry, where its moduleNameMapper does not apply: the global setup (imported first there) and the child
 * processes a unit spec runs on TypeScript source (libs/kafkajs-patches/kafkajs-encoding.spec.ts).
 */
const libs = path.resolve(__dirname, '../../libs');
type Resolve = (request: string, ...rest: unknown[]) => string;
const resolver = Module as unknown as { _resolveFilename: Resolve };
const resolve = resolver._resolveFilename;
resolver._resolveFilename = function (this: unknown, request: string, ...rest: unknown[]): string {
  return resolve.call(this, request.startsWith('@libs/') ? libs + request.slice('@libs'.length) : request, ...rest);
};
