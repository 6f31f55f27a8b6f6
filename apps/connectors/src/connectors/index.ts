import type { ConnectorKind } from '../spi';
import { postgresOutbox } from './postgres-outbox';
import { postgresTable } from './postgres-table';

/** Every connector this runtime ships, by kind: a new connector is one folder and one line here. */
export const CONNECTOR_KINDS: ReadonlyMap<string, ConnectorKind<unknown>> = new Map(
  [postgresOutbox, postgresTable].map((k) => [k.kind, k as ConnectorKind<unknown>]),
);
