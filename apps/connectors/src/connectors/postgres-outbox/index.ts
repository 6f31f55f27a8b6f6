import type { ConnectorKind } from '../../spi';
import { OutboxConfig, validateOutboxConfig } from './outbox-config';
import { OutboxSource } from './outbox-source';

export const postgresOutbox: ConnectorKind<OutboxConfig> = {
  kind: 'postgres-outbox',
  role: 'source',
  validate: validateOutboxConfig,
  secretFields: ['connection.password'],
  async openSource(config, ctx) {
    const address = await ctx.pinHost(config.connection.host, config.connection.port, config.connection.database);
    return OutboxSource.open(config, address);
  },
};
