import { DynamicModule, Module } from '@nestjs/common';
import { AdaptorRegistry } from '@libs/frame';
import { RequestReplyService } from '@libs/request-reply';
import type { GatewayServices } from '../gateway-services';
import { provide } from '../http/provide';
import { RequestReplyController } from './request-reply.controller';

/** Request-reply: `POST /events/request` held until `POST /events/reply` answers it, on any instance. */
@Module({})
export class RequestReplyModule {
  static register(s: GatewayServices): DynamicModule {
    return {
      module: RequestReplyModule,
      controllers: [RequestReplyController],
      providers: [provide(RequestReplyService, s.requestReply), provide(AdaptorRegistry, s.adaptors)],
    };
  }
}
