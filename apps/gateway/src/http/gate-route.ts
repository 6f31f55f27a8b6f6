import { CanActivate, createParamDecorator, ExecutionContext, Injectable, SetMetadata } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { ANONYMOUS, Caller, GateAction, gateHeadersOf, GateRequest, SecurityGate } from '@libs/security';
import { rawBodyOf } from './body-parsers';
import { wroteNothing } from '../publish/publish-route';
import { requestIdOfRequest } from './request-log';

/**
 * Where a route's topic comes from, for the ACL: the `topic` query parameter or body field (the runtime's default
 * topic when absent), a path parameter, or the subscription a path parameter or body field names (its topic as
 * the caller's tenant sees it).
 */
export type TopicSource =
  | { query: string }
  | { body: string }
  | { param: string }
  | { subscriptionParam: string }
  | { subscriptionBody: string };

/** What the gate must know of a route. Every route declares one (`gate-route.spec.ts` holds them to it). */
export type GateRouteSpec =
  | { public: true }
  | {
      action: GateAction;
      /** The admin API's own gate rather than the ingress gate. */
      admin?: boolean;
      topic?: TopicSource;
      /**
       * The body is a publish (signature, publish quota, one event): always, or when the predicate says so (an A2A
       * agent's endpoint: a send is, a read is not).
       */
      publishes?: boolean | ((r: RouteRequest) => boolean);
      /**
       * The request holds a stream connection while it is open (stream quota): always, or when the predicate says so
       * (a route that answers some requests with a stream: an A2A agent's JSON-RPC endpoint, by the method).
       */
      stream?: boolean | ((r: RouteRequest) => boolean);
      createsSubscription?: boolean;
      /** The handshake of a multiplexed connection whose every operation passes the gate on its own (GateRequest.connection). */
      connection?: boolean;
      /** A runtime-wide admin route (partitions, instances, orphans): the operator tenant's admins only. */
      operator?: boolean;
    };

const GATE_ROUTE = 'eventmesh:gate-route';

/** Declares how the gate treats a route (or every route of a controller). */
export const GateRoute = (spec: GateRouteSpec) => SetMetadata(GATE_ROUTE, spec);

/** The gates of the gateway: one for the ingress routes, one for the admin API. */
export class Gates {
  constructor(
    readonly ingress: SecurityGate,
    readonly admin: SecurityGate,
    /** The topic of a subscription, as `tenant` sees it (undefined when it has none by that id). */
    readonly subscriptionTopic: (id: string, tenant: string) => Promise<string | undefined>,
    readonly defaultTopic: string,
  ) {}
}

const CALLER = Symbol('caller');
const AUTHENTICATED = Symbol('authenticated');

/** Keeps TokenAuth's verdict on the headers, reached before the body was read (authenticate-first.ts), for the guard. */
export function keepAuthenticated(request: FastifyRequest, gated: GateRequest): void {
  if (gated.authenticated)
    (request as unknown as Record<symbol, GateRequest['authenticated']>)[AUTHENTICATED] = gated.authenticated;
}

/** The caller the gate admitted for this request (`ANONYMOUS` on a public route). */
export function callerOf(request: FastifyRequest | object): Caller {
  return (request as Record<symbol, Caller | undefined>)[CALLER] ?? ANONYMOUS;
}

/** A handler parameter: the caller the gate admitted (its tenant scopes every resource the handler touches). */
export const CallerParam = createParamDecorator((_: unknown, context: ExecutionContext): Caller =>
  callerOf(context.switchToHttp().getRequest()),
);

/** Applied to every route (APP_GUARD): runs the route's gate, and keeps the admitted caller on the request. */
@Injectable()
export class GateGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly gates: Gates,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const spec = this.reflector.getAllAndOverride<GateRouteSpec | undefined>(GATE_ROUTE, [
      context.getHandler(),
      context.getClass(),
    ]);
    if (!spec) throw new EventMeshError(ErrorCode.Internal, 'route has no gate declaration');
    if ('public' in spec) return true;
    const request = context.switchToHttp().getRequest<FastifyRequest>();
    const raw = spec.publishes || typeof spec.stream === 'function' ? rawBodyOf(request) : undefined;
    const gated = gateRequestOf(this.gates, spec, { ...routeRequestOf(request), body: request.body, raw });
    // TokenAuth decided on the headers before the body was read (authenticate-first.ts): not asked again.
    gated.authenticated = (request as unknown as Record<symbol, GateRequest['authenticated']>)[AUTHENTICATED];
    const admission = await (spec.admin ? this.gates.admin : this.gates.ingress).admit(gated);
    (request as unknown as Record<symbol, Caller>)[CALLER] = admission.caller;
    // What the admission holds (a stream connection) is given back when the answer ends or its connection closes:
    // the response's close, not the request's, which a request with a body has emitted once the body was read.
    const response = context.switchToHttp().getResponse<FastifyReply>().raw;
    if (response.closed) admission.release();
    else response.once('close', admission.release);
    // A publish the route refuses after the gate charged it (bad input, a reply for no pending request, the
    // tenant's pending requests at their cap) gets its charge back: a refused request is not charged. Not a 408:
    // a request-reply that timed out published its event.
    if (gated.publish) {
      response.once('finish', () => {
        if (response.statusCode !== 408 && wroteNothing(response.statusCode, undefined)) admission.refund();
      });
    }
    return true;
  }
}

/** What the gate reads of a Fastify request before its body: its route, id, headers, address, query and path. */
export function routeRequestOf(request: FastifyRequest): RouteRequest {
  return {
    route: `${request.method} ${request.routeOptions.url ?? request.url}`,
    requestId: requestIdOfRequest(request.raw),
    headers: gateHeadersOf(request.raw),
    remoteAddress: request.ip,
    query: request.query as Record<string, unknown>,
    params: request.params as Record<string, string>,
  };
}

export interface RouteRequest {
  route: string;
  /** The id the gateway gave the request (request-log.ts); the gate makes one when absent. */
  requestId?: string;
  headers: Record<string, string | string[] | undefined>;
  remoteAddress: string;
  query?: Record<string, unknown>;
  params?: Record<string, string>;
  body?: unknown;
  raw?: Buffer;
}

/** The gate's view of a request to a route with this spec. */
export function gateRequestOf(
  gates: Gates,
  spec: Exclude<GateRouteSpec, { public: true }>,
  r: RouteRequest,
): GateRequest {
  const request: GateRequest = {
    route: r.route,
    requestId: r.requestId,
    action: spec.action,
    headers: r.headers,
    remoteAddress: r.remoteAddress,
    ...((typeof spec.stream === 'function' ? spec.stream(r) : spec.stream) ? { stream: true } : {}),
    ...(spec.createsSubscription ? { createsSubscription: true } : {}),
    ...(spec.connection ? { connection: true } : {}),
    ...(spec.operator ? { operatorOnly: true } : {}),
    // Every admin route hands out power (credentials, ACL rules, quotas, operator actions): an authenticated caller only.
    ...(spec.admin || spec.operator ? { privileged: true } : {}),
    ...((typeof spec.publishes === 'function' ? spec.publishes(r) : spec.publishes)
      ? { body: r.raw, publish: { events: 1, bytes: r.raw?.length ?? 0 } }
      : {}),
  };
  const source = spec.topic;
  if (!source) return request;
  if ('query' in source) request.topic = stringOr(r.query?.[source.query], gates.defaultTopic);
  else if ('body' in source)
    request.topic = stringOr((r.body as Record<string, unknown> | undefined)?.[source.body], gates.defaultTopic);
  else if ('param' in source) request.topic = r.params?.[source.param];
  else {
    const named =
      'subscriptionParam' in source
        ? r.params?.[source.subscriptionParam]
        : (r.body as Record<string, unknown> | undefined)?.[source.subscriptionBody];
    const id = typeof named === 'string' ? named : '';
    request.topicOf = (caller) => gates.subscriptionTopic(id, caller.tenant);
  }
  return request;
}

const stringOr = (value: unknown, fallback: string): string =>
  typeof value === 'string' && value !== '' ? value : fallback;
