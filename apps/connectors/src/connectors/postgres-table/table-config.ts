import { ConfigFieldError } from '../../spi';
import {
  identifier,
  integerIn,
  object,
  oneOf,
  postgresTarget,
  PostgresTarget,
  tableName,
  text,
} from '../config-fields';

/** What a column is filled with: an attribute of the event, its data, or a field of its data (`data.order.id`). */
export type ColumnValue = 'id' | 'source' | 'type' | 'subject' | 'time' | 'data' | `data.${string}`;

/** The `postgres-table` sink's config (docs/connectors.md#postgres-table-sink). */
export interface TableConfig {
  /** The STREAM subscription (of the job's tenant) the sink consumes. */
  subscriptionId: string;
  connection: PostgresTarget;
  table: { schema: string; table: string };
  mode: 'append' | 'upsert';
  /** Upsert: the columns of the table's unique key; a later event with the same key replaces the row. */
  key: string[];
  columns: Record<string, ColumnValue>;
  /**
   * Hours an event's ledger row is kept; 0 (the default): for good. Past it, the sink forgets the event, and a
   * redelivery or republish of it writes it again.
   */
  ledgerRetentionHours: number;
  /**
   * What records the events written: `ledger` (the default), a ledger row per event beside the table; `table`, the
   * table's own unique index on the columns of the event's source and id (append mode only), so the row is the
   * record and there is no ledger.
   */
  dedupe: 'ledger' | 'table';
}

/** The longest retention a ledger can be given, in hours (ten years). */
const MAX_LEDGER_RETENTION_HOURS = 87600;

const ATTRIBUTES = ['id', 'source', 'type', 'subject', 'time', 'data'];

export function validateTableConfig(raw: unknown): TableConfig {
  const o = object(raw, 'config');
  const mode = oneOf(o, '', 'mode', ['append', 'upsert'] as const, 'append');
  const mapping = object(o.columns, 'columns');
  for (const [column, value] of Object.entries(mapping)) {
    identifier({ [column]: column }, 'columns', column);
    if (typeof value !== 'string' || !(ATTRIBUTES.includes(value) || /^data(\.[A-Za-z0-9_]+)+$/.test(value)))
      throw new ConfigFieldError(`columns.${column}`, `expected one of ${ATTRIBUTES.join(', ')} or data.<field>`);
  }
  // Own data properties, whatever their names: a column named __proto__ is a column like any other.
  const columns = Object.fromEntries(Object.entries(mapping)) as Record<string, ColumnValue>;
  if (Object.keys(columns).length === 0) throw new ConfigFieldError('columns', 'expected at least one column');
  const key = mode === 'upsert' ? upsertKey(o.key, columns) : [];
  if (mode !== 'upsert' && o.key !== undefined && o.key !== null)
    throw new ConfigFieldError('key', 'only an upsert has a key; give mode upsert, or no key');
  const ledgerRetentionHours = integerIn(o, '', 'ledgerRetentionHours', 0, MAX_LEDGER_RETENTION_HOURS, 0);
  const dedupe = oneOf(o, '', 'dedupe', ['ledger', 'table'] as const, 'ledger');
  if (dedupe === 'table') {
    if (mode !== 'append')
      throw new ConfigFieldError('dedupe', 'table needs mode append (an upsert records its events in the ledger)');
    for (const attribute of ['source', 'id'])
      if (Object.values(columns).filter((v) => v === attribute).length !== 1)
        throw new ConfigFieldError('columns', `dedupe table needs exactly one column of the event's ${attribute}`);
    if (ledgerRetentionHours > 0)
      throw new ConfigFieldError('ledgerRetentionHours', 'expected 0 with dedupe table: there is no ledger');
  }
  return {
    subscriptionId: text(o, '', 'subscriptionId'),
    connection: postgresTarget(o.connection, 'connection'),
    table: tableName(o, '', 'table'),
    mode,
    key,
    columns,
    ledgerRetentionHours,
    dedupe,
  };
}

/** The upsert's key: columns of the mapping (its own), each once. */
function upsertKey(value: unknown, columns: Record<string, ColumnValue>): string[] {
  const key = Array.isArray(value) ? (value as unknown[]) : [];
  if (key.length === 0) throw new ConfigFieldError('key', 'upsert needs the columns of the unique key');
  key.forEach((k, i) => {
    if (typeof k !== 'string' || !Object.hasOwn(columns, k))
      throw new ConfigFieldError(`key.${i}`, 'expected a column named in columns');
    if (key.indexOf(k) !== i) throw new ConfigFieldError(`key.${i}`, `${k} is in the key already`);
  });
  return key as string[];
}
