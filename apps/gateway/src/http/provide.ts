import type { Provider } from '@nestjs/common';

/** A provider of an instance the composition built (every service of the gateway is one). */
export function provide<T>(token: unknown, value: T): Provider {
  return { provide: token as never, useValue: value };
}
