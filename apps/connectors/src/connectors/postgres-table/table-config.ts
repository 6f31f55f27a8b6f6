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
}

/** The longest retention a ledger can be given, in hours (ten years). */
const MAX_LEDGER_RETENTION_HOURS = 87600;

const ATTRIBUTES = ['id', 'source', 'type', 'subject', 'time', 'data'];

export function validateTableConfig(raw: unknown): TableConfig {
  const o = object(raw, 'config');
  const mode = oneOf(o, '', 'mode', ['append', 'upsert'] as const, 'append');
  const mapping = object(o.columns, 'columns');
  const columns: Record<string, ColumnValue> = {};
  for (const [column, value] of Object.entries(mapping)) {
    identifier({ [column]: column }, 'columns', column);
    if (typeof value !== 'string' || !(ATTRIBUTES.includes(value) || /^data(\.[A-Za-z0-9_]+)+$/.test(value)))
      throw new ConfigFieldError(`columns.${column}`, `expected one of ${ATTRIBUTES.join(', ')} or data.<field>`);
    columns[column] = value as ColumnValue;
  }
  if (Object.keys(columns).length === 0) throw new ConfigFieldError('columns', 'expected at least one column');
  const key = Array.isArray(o.key) ? o.key : [];
  if (mode === 'upsert') {
    if (key.length === 0) throw new ConfigFieldError('key', 'upsert needs the columns of the unique key');
    key.forEach((k, i) => {
      if (typeof k !== 'string' || !(k in columns))
        throw new ConfigFieldError(`key.${i}`, 'expected a column named in columns');
    });
  }
  return {
    subscriptionId: text(o, '', 'subscriptionId'),
    connection: postgresTarget(o.connection, 'connection'),
    table: tableName(o, '', 'table'),
    mode,
    key: key as string[],
    columns,
    ledgerRetentionHours: integerIn(o, '', 'ledgerRetentionHours', 0, MAX_LEDGER_RETENTION_HOURS, 0),
  };
}
