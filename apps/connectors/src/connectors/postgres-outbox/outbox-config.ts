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
  /** The source of a row without a source column value. */
  defaultSource: string;
  /** Delete rows once their publish is acknowledged and the position past them committed. */
  deletePublished: boolean;
  batchSize: number;
}

export function validateOutboxConfig(raw: unknown): OutboxConfig {
  const o = object(raw, 'config');
  const c: Fields = o.columns === undefined ? {} : object(o.columns, 'columns');
  const optionalColumn = (key: string) => (c[key] === undefined ? undefined : identifier(c, 'columns', key));
  return {
    connection: postgresTarget(o.connection, 'connection'),
    table: tableName(o, '', 'table'),
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
    defaultSource: optionalText(o, '', 'defaultSource') ?? '/outbox',
    deletePublished: flag(o, '', 'deletePublished', false),
    batchSize: integerIn(o, '', 'batchSize', 1, 5000, 500),
  };
}
