import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { EventMeshClientOptions } from '@eventmesh/client';

/** `EventMeshModule.forRoot` takes the SDK client's options (`url`, `token` or `apiKey`, `topic`, ...). */
export type EventMeshModuleOptions = EventMeshClientOptions;

/**
 * `forRoot(options)` and `forRootAsync({ imports, inject, useFactory })` (or `useClass`/`useExisting`), global by
 * default (`isGlobal: false` to scope it to the importing module).
 */
export const { ConfigurableModuleClass, MODULE_OPTIONS_TOKEN: EVENT_MESH_OPTIONS } =
  new ConfigurableModuleBuilder<EventMeshModuleOptions>({
    moduleName: 'EventMesh',
  })
    .setClassMethodName('forRoot')
    .setExtras({ isGlobal: true }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
    .build();

/**
 * `options` as given, once they are usable: `url` an http(s) URL, `token` a string or a function giving one and
 * `apiKey` a string when given. Throws an error naming the option otherwise (a missing `url` would fail deep in the
 * SDK, one without a scheme at the first publish).
 */
export function checkOptions(options: EventMeshModuleOptions): EventMeshModuleOptions {
  const fail = (what: string, got: string): never => {
    throw new Error(`EventMeshModule: ${what}, got ${got}`);
  };
  if (typeof options !== 'object' || options === null) fail('options must be an object with url', shown(options));
  const { url, token, apiKey } = options;
  // A URL's user information (`user:password@`) is never shown.
  if (!isHttpUrl(url))
    fail(
      'options.url must be an http(s) URL such as http://127.0.0.1:8080',
      typeof url === 'string'
        ? shown(url.replace(/^(?:[a-z][a-z0-9+.-]*:\/\/)?[^/?#]*@/i, (m) => m.replace(/[^/]*@$/, '***@')))
        : shown(url),
    );
  // A credential's value is never shown, only its type.
  if (token !== undefined && typeof token !== 'string' && typeof token !== 'function')
    fail('options.token must be a string or a function giving one', typeName(token));
  if (apiKey !== undefined && typeof apiKey !== 'string') fail('options.apiKey must be a string', typeName(apiKey));
  return options;
}

function isHttpUrl(url: unknown): boolean {
  if (typeof url !== 'string' || !URL.canParse(url)) return false;
  const { protocol } = new URL(url);
  return protocol === 'http:' || protocol === 'https:';
}

function shown(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'object' && value !== null) {
    try {
      return JSON.stringify(value);
    } catch {
      return Object.prototype.toString.call(value);
    }
  }
  return String(value);
}

function typeName(value: unknown): string {
  if (value === null) return 'null';
  const type = Array.isArray(value) ? 'array' : typeof value;
  return `${/^[aeiou]/.test(type) ? 'an' : 'a'} ${type}`;
}
