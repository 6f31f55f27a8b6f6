import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { HealthIndicatorService, TerminusModule } from '@nestjs/terminus';
import { EventMeshTestingModule } from '../testing/event-mesh-testing.module';
import { OnMeshEvent } from '../mesh-handler.decorators';
import type { MeshHandlerExplorer } from '../mesh-handler.explorer';
import { EventMeshHealthIndicator } from './event-mesh.health';

@Injectable()
class Handler {
  @OnMeshEvent({ topic: 'orders', name: 'orders-handler' })
  handle() {}
}

describe('EventMeshHealthIndicator', () => {
  it("is up with each consumer's subscription and state while every consumer is connected", async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [TerminusModule, EventMeshTestingModule.forRoot()],
      providers: [Handler, EventMeshHealthIndicator],
    }).compile();
    await moduleRef.init();
    expect(moduleRef.get(EventMeshHealthIndicator).isHealthy()).toEqual({
      eventmesh: {
        status: 'up',
        consumers: [{ subscription: 'orders-handler', subscriptionId: expect.any(String), state: 'connected' }],
      },
    });
    await moduleRef.close();
  });

  it('is down while a consumer is not connected', () => {
    const consumers = [
      { subscription: 'a', subscriptionId: '1', state: 'connected' },
      { subscription: 'b', subscriptionId: '2', state: 'reconnecting' },
    ];
    const indicator = new EventMeshHealthIndicator(new HealthIndicatorService(), {
      consumerStates: () => consumers,
    } as unknown as MeshHandlerExplorer);
    expect(indicator.isHealthy('mesh')).toEqual({ mesh: { status: 'down', consumers } });
  });
});
