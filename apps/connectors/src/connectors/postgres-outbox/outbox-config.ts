import {
  flag,
  Fields,
  identifier,
  integerIn,
  object,
  optionalText,
  postgresTarget,
  PostgresTarget,
  tableName,
  text,
} from '../config-fields';

/** The `postgres-outbox` source's config (docs/connectors.md#postgres-outbox-source). */
export interface OutboxConfig {
  connection: PostgresTarget;
  table: { schema: string; table: string };
  columns: {
    id: string;
    /** `xid8 NOT NULL DEFAULT pg_current_xact_id()`: the writing transaction, what orders rows by commit. */
    txid: string;
    aggregateType: string;
    aggregateId: string;
    type: string;
    payload: string;
    /** Optional columns: the event's source, subject, and destination topic (else routed by aggregate type). */
    source?: string;
    subject?: string;
    topic?: string;
  };
  /** The topic of a row without a topic column value: `${aggregateType}` replaced by the row's aggregate type. */
  topicTemplate: string;
  /** The source of a row without a source column value (default `/outbox/<database>/<schema>.<table>`). */
  defaultSource: string;
  /** Delete rows once their publish is acknowledged and the position past them committed. */
  deletePublished: boolean;
  batchSize: number;
}

export function validateOutboxConfig(raw: unknown): OutboxConfig {
  const o = object(raw, 'config');
  const c: Fields = o.columns === undefined ? {} : object(o.columns, 'columns');
  const optionalColumn = (key: string) => (c[key] === undefined ? undefined : identifier(c, 'columns', key));
  const connection = postgresTarget(o.connection, 'connection');
  const table = tableName(o, '', 'table');
  return {
    connection,
    table,
    columns: {
      id: identifier(c, 'columns', 'id', 'id'),
      txid: identifier(c, 'columns', 'txid', 'txid'),
      aggregateType: identifier(c, 'columns', 'aggregateType', 'aggregatetype'),
      aggregateId: identifier(c, 'columns', 'aggregateId', 'aggregateid'),
      type: identifier(c, 'columns', 'type', 'type'),
      payload: identifier(c, 'columns', 'payload', 'payload'),
      source: optionalColumn('source'),
      subject: optionalColumn('subject'),
      topic: optionalColumn('topic'),
    },
    topicTemplate: text(o, '', 'topicTemplate', 'outbox.event.${aggregateType}'),
    // The table's own by default: two outbox tables' rows with one id are two events (source and id are an event's
    // identity), where one source for every table made them one, and consumers dropped the second as a duplicate.
    defaultSource:
      optionalText(o, '', 'defaultSource') ?? `/outbox/${connection.database}/${table.schema}.${table.table}`,
    deletePublished: flag(o, '', 'deletePublished', false),
    batchSize: integerIn(o, '', 'batchSize', 1, 5000, 500),
  };
}
