import { DynamicModule, Module } from '@nestjs/common';
import { A2ABroker, PushDeadLetters } from '@libs/a2a';
import type { GatewayServices } from '../gateway-services';
import { A2AAgentsController } from './a2a-agents.controller';
import { A2ADiscoveryController } from './a2a-discovery.controller';
import { A2APushDeadLettersController } from './a2a-push-dead-letters.controller';
import { A2ARestController } from './a2a-rest.controller';
import { A2ARpcController } from './a2a-rpc.controller';
import { provide } from '../http/provide';

/** A2A: the agents' registry, their cards, the JSON-RPC and REST endpoints, and pushes given up (docs/a2a.md). */
@Module({})
export class A2AModule {
  static register(s: GatewayServices): DynamicModule {
    return {
      module: A2AModule,
      controllers: [
        A2AAgentsController,
        A2ADiscoveryController,
        A2APushDeadLettersController,
        A2ARpcController,
        A2ARestController,
      ],
      providers: [provide(A2ABroker, s.a2a), provide(PushDeadLetters, s.pushDeadLetters)],
    };
  }
}
