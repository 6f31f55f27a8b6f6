import { DynamicModule, Module } from '@nestjs/common';
import { SessionServer } from '@libs/sessions';
import { PollConsumers, StreamClients, StreamHub } from '@libs/streams';
import { SubscriptionService } from '@libs/subscriptions';
import type { GatewayServices } from '../gateway-services';
import { SessionsAdminController } from './sessions-admin.controller';
import { StreamsController } from './streams.controller';
import { provide } from '../http/provide';

/**
 * Stream consumers' HTTP routes (SSE, long-poll, answers) and the streaming sessions' admin view. The WebSocket
 * routes are served beside Nest: websocket-streams.ts, sessions-routes.ts.
 */
@Module({})
export class StreamsModule {
  static register(s: GatewayServices): DynamicModule {
    return {
      module: StreamsModule,
      controllers: [StreamsController, SessionsAdminController],
      providers: [
        provide(StreamHub, s.streams),
        provide(SubscriptionService, s.subscriptions),
        provide(PollConsumers, s.polls),
        provide(StreamClients, s.streamClients),
        provide(SessionServer, s.sessions),
      ],
    };
  }
}
