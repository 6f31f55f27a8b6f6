import { Controller, Get, Req } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { A2ABroker, meshCatalogCardOf } from '@libs/a2a';
import type { Caller } from '@libs/security';
import { a2aCardUrlOf, meshRpcUrlOf } from './a2a-paths';
import { ApiRoute, GATED } from '../http/api-route';
import { CallerParam, GateRoute, Gates } from '../http/gate-route';

/**
 * A2A discovery at the host root: a client that knows only the mesh's address looks for
 * `/.well-known/agent-card.json` there and finds the mesh's own card, a catalog of the caller tenant's agents
 * (libs/a2a/agents/mesh-catalog-card.ts), whose interface is the mesh's own endpoint (a2a-rpc.controller.ts). Gate action `publish`, as the agents' own cards (a2a-agents.controller.ts).
 */
@Controller('.well-known')
export class A2ADiscoveryController {
  constructor(
    private readonly broker: A2ABroker,
    private readonly gates: Gates,
  ) {}

  @Get('agent-card.json')
  @ApiRoute({
    summary: "The mesh's own A2A card: the tenant's agents as its skills, each with its card's URL",
    responses: { 200: { description: 'the card', schema: z.looseObject({}) }, ...GATED },
  })
  @GateRoute({ action: 'publish' })
  async card(@CallerParam() caller: Caller, @Req() request: FastifyRequest): Promise<Record<string, unknown>> {
    const agents = await this.broker.list(caller.tenant, {});
    return meshCatalogCardOf(
      caller.tenant,
      agents.map((a) => ({ name: a.name, card: a.card, cardUrl: a2aCardUrlOf(request, a.name) })),
      meshRpcUrlOf(request),
      { tokens: this.gates.ingress.stats().filters.includes('token') },
    );
  }
}
