import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { GatePolicy } from '../../../libs/security';

/** Applied to every route of the gateway (APP_GUARD): hands each request to the gate policy. */
@Injectable()
export class RequestGateGuard implements CanActivate {
  constructor(private readonly policy: GatePolicy) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const request = context.switchToHttp().getRequest<FastifyRequest>();
    await this.policy.admit({
      route: `${request.method} ${request.routeOptions.url ?? request.url}`,
      headers: request.headers,
      remoteAddress: request.ip,
    });
    return true;
  }
}
