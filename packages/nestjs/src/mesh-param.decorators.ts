import { PipeTransform, Type } from '@nestjs/common';
import { ROUTE_ARGS_METADATA } from '@nestjs/common/constants';
import { assignMetadata } from '@nestjs/common/decorators/http/route-params.decorator';
import type { ParamsFactory } from '@nestjs/core/helpers/external-context-creator';
import type { CloudEvent } from 'cloudevents';

/**
 * Where the parameter decorators record what each argument of a mesh handler is (read by ExternalContextCreator):
 * the key of Nest's own route arguments, because Nest's scanner instantiates (with injection) the pipe classes it
 * finds under that key on a provider's methods, and a pipe class under any other key would be silently skipped.
 * Handlers are methods of providers, never routes, so the two uses do not meet.
 */
export const MESH_ARGS_METADATA = ROUTE_ARGS_METADATA;

/** What a mesh handler's argument can be: the whole event, its data (or one property of it), or the delivery. */
export enum MeshParamType {
  EVENT,
  DATA,
  DELIVERY,
}

type Pipe = Type<PipeTransform> | PipeTransform;

function meshParam(type: MeshParamType, property: string | Pipe | undefined, pipes: Pipe[]): ParameterDecorator {
  return (target, key, index) => {
    const data = typeof property === 'string' ? property : undefined;
    const allPipes = property === undefined || typeof property === 'string' ? pipes : [property, ...pipes];
    const args = Reflect.getMetadata(MESH_ARGS_METADATA, target.constructor, key!) ?? {};
    Reflect.defineMetadata(
      MESH_ARGS_METADATA,
      assignMetadata(args, type, index, data, ...allPipes),
      target.constructor,
      key!,
    );
  };
}

/** The event's `data` (or its `property`), through the given pipes and the app's global pipes (e.g. ValidationPipe). */
export const MeshData = (property?: string | Pipe, ...pipes: Pipe[]): ParameterDecorator =>
  meshParam(MeshParamType.DATA, property, pipes);

/** The whole CloudEvent, through the given pipes. */
export const MeshCloudEvent = (...pipes: Pipe[]): ParameterDecorator =>
  meshParam(MeshParamType.EVENT, undefined, pipes);

/** The SDK's `HandlerContext` of the delivery (`deliveryId`, `transport`); the in-memory client adds `attempt`. */
export const MeshDelivery = (): ParameterDecorator => meshParam(MeshParamType.DELIVERY, undefined, []);

/** Maps the handler's call arguments, `(event, delivery)`, to what each decorated parameter asked for. */
export const meshParamsFactory: ParamsFactory = {
  exchangeKeyForValue(type: number, data: unknown, [event, delivery]: [CloudEvent, unknown]) {
    switch (type as MeshParamType) {
      case MeshParamType.EVENT:
        return event;
      case MeshParamType.DATA: {
        const body = event.data as Record<string, unknown> | undefined;
        return typeof data === 'string' ? body?.[data] : body;
      }
      case MeshParamType.DELIVERY:
        return delivery;
    }
  },
};
