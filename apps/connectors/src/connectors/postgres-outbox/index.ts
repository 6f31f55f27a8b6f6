import type { ConnectorKind } from '../../spi';
import { OutboxConfig, validateOutboxConfig } from './outbox-config';
import { OutboxSource, parsePosition } from './outbox-source';

export const postgresOutbox: ConnectorKind<OutboxConfig> = {
  kind: 'postgres-outbox',
  role: 'source',
  validate: validateOutboxConfig,
  secretFields: ['connection.password'],
  validatePosition(position) {
    try {
      parsePosition(position);
      return undefined;
    } catch (e) {
      return (e as Error).message;
    }
  },
  async openSource(config, ctx) {
    const address = await ctx.pinHost(config.connection.host, config.connection.port, config.connection.database);
    return OutboxSource.open(config, address);
  },
};
