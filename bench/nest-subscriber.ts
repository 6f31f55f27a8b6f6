import { Injectable, Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { CloudEvent } from 'cloudevents';
import { EventMeshModule, MeshHandlerExplorer, OnMeshEvent } from '@eventmesh/nestjs';
import { until } from './support';

/**
 * The NestJS module's subscriber for bench:e2e: a Nest application context whose one provider has an
 * `@OnMeshEvent` method recording each event's arrival. The module ensures the subscription `name` (the bench creates it first on
 * the dispatching instance, so it is found there, not pinned to a gateway-only one) and consumes it with the
 * SDK's consumer (window 1000, handler calls as many, ack after the method resolved), inside Nest's context as
 * any user's handler runs. Resolves with its close (drain, then close: `app.close()`).
 */
export async function nestSubscriber(
  url: string,
  topic: string,
  name: string,
  record: (id: string) => void,
): Promise<() => Promise<void>> {
  @Injectable()
  class Recorder {
    @OnMeshEvent({ topic, name, window: 1000 })
    onEvent(event: CloudEvent<unknown>): void {
      record(event.id);
    }
  }

  @Module({ imports: [EventMeshModule.forRoot({ url })], providers: [Recorder] })
  class BenchApp {}

  const app: INestApplicationContext = await NestFactory.createApplicationContext(BenchApp, { logger: false });
  const explorer = app.get(MeshHandlerExplorer);
  await until(
    'the NestJS consumer connected',
    () => (explorer.consumerStates().every((c) => c.state === 'connected') ? true : undefined),
    60000,
  );
  return () => app.close();
}
