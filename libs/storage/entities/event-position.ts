import { Column, PrimaryColumn } from 'typeorm';
import type { PrimaryColumnOptions } from 'typeorm';
import { bigintAsNumber } from './bigint.transformer';

type ColumnDecorator = (options: PrimaryColumnOptions) => PropertyDecorator;

/**
 * The columns of a place in the Kafka log, declared once: `topic`, `partition` and, for an event, `kafka_offset`.
 * Entities embed them with `@Column(() => EventPosition, { prefix: false })`, so the column names stay as they are.
 * TypeORM marks a column primary where it is declared, so the position comes twice from the one declaration below:
 * as plain columns, and as a part of its table's primary key (the `...Key` classes).
 */
function partitionColumns(column: ColumnDecorator) {
  class PartitionColumns {
    @column({ type: 'text' })
    topic!: string;

    @column({ type: 'integer' })
    partition!: number;
  }
  return PartitionColumns;
}

function positionColumns(column: ColumnDecorator) {
  class PositionColumns extends partitionColumns(column) {
    @column({ name: 'kafka_offset', type: 'bigint', transformer: bigintAsNumber })
    offset!: number;
  }
  return PositionColumns;
}

/** One partition of a topic, as a part of its table's primary key (a subscription's offset, a skipped range). */
export class LogPartitionKey extends partitionColumns(PrimaryColumn) {}

/** Where one event is in the log: its topic, partition and offset. */
export class EventPosition extends positionColumns(Column) {}

/** An EventPosition that is a part of its table's primary key. */
export class EventPositionKey extends positionColumns(PrimaryColumn) {}
