import type { ConnectorKind } from '../../spi';
import { TableConfig, validateTableConfig } from './table-config';
import { TableSink } from './table-sink';

export const postgresTable: ConnectorKind<TableConfig> = {
  kind: 'postgres-table',
  role: 'sink',
  validate: validateTableConfig,
  secretFields: ['connection.password'],
  async openSink(config, ctx) {
    const address = await ctx.pinHost(config.connection.host, config.connection.port, config.connection.database);
    return TableSink.open(config, address);
  },
  subscriptionOf: (config) => config.subscriptionId,
};
