import { Controller, Delete, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { z } from 'zod';
import {
  PUSH_LETTER_RESOLUTIONS,
  PushDeadLetterPage,
  PushDeadLetters,
  PushDeadLetterView,
  pushLetterQuerySchema,
} from '@libs/a2a';
import type { Caller } from '@libs/security';
import { ApiRoute, errors, GATED } from '../http/api-route';
import { CallerParam, GateRoute } from '../http/gate-route';

/** Reading them: whoever may send tasks (`publish`, as the A2A routes where clients set their push configs). */
const READ = { action: 'publish' } as const;
/** Redelivering and removing them: the admin gate, in the caller's tenant. */
const OPERATE = { action: 'admin', admin: true } as const;

const ID = { id: "the push dead letter's id" };
const letterView = z.object({
  id: z.string(),
  taskId: z.string(),
  agent: z.string(),
  configId: z.string().describe("the task's push config the push went to"),
  url: z.string(),
  taskVersion: z.number().int().describe('the task version the push carried'),
  taskState: z.string(),
  attempts: z.number().int(),
  lastError: z.string(),
  lastHttpStatus: z.number().int().nullable(),
  deadLetteredAt: z.string(),
  resolution: z
    .enum(PUSH_LETTER_RESOLUTIONS)
    .nullable()
    .describe(
      'null while dead; superseded: the receiver acknowledged a later version; config-removed: the client removed the config',
    ),
  resolvedAt: z.string().nullable(),
  resolvedVersion: z.number().int().nullable(),
});
const LETTER = { description: 'the letter', schema: letterView };

/**
 * The A2A push notifications given up after the webhook deliveries' last attempt (docs/a2a.md, "Push dead
 * letters"), scoped to the caller's tenant (another tenant's letter is a 404): browse, read one, redeliver one (the
 * task as it is now, once), remove one.
 */
@Controller('a2a/push-dead-letters')
export class A2APushDeadLettersController {
  constructor(private readonly letters: PushDeadLetters) {}

  @Get()
  @ApiRoute({
    summary: "Browse the tenant's A2A push dead letters, oldest first, a page at a time",
    query: pushLetterQuerySchema,
    responses: {
      200: { description: 'a page', schema: z.object({ items: z.array(letterView), next: z.string().nullable() }) },
      ...errors(400),
      ...GATED,
    },
  })
  @GateRoute(READ)
  browse(@CallerParam() caller: Caller, @Query() query: unknown): Promise<PushDeadLetterPage> {
    return this.letters.browse(caller.tenant, query);
  }

  @Get(':id')
  @ApiRoute({ summary: 'One A2A push dead letter', params: ID, responses: { 200: LETTER, ...errors(404), ...GATED } })
  @GateRoute(READ)
  get(@CallerParam() caller: Caller, @Param('id') id: string): Promise<PushDeadLetterView> {
    return this.letters.get(caller.tenant, id);
  }

  @Post(':id/redeliver')
  @ApiRoute({
    summary: "Push the letter's task, as it is now, to its config once; acknowledged, the letter is resolved",
    params: ID,
    responses: {
      200: { ...LETTER, description: 'delivered: the letter, resolved' },
      ...errors(404, 409, 502),
      ...GATED,
    },
  })
  @GateRoute(OPERATE)
  @HttpCode(200)
  redeliver(@CallerParam() caller: Caller, @Param('id') id: string): Promise<PushDeadLetterView> {
    return this.letters.redeliver(caller.tenant, id);
  }

  @Delete(':id')
  @ApiRoute({
    summary: 'Remove an A2A push dead letter',
    params: ID,
    responses: { 204: { description: 'removed' }, ...errors(404), ...GATED },
  })
  @GateRoute(OPERATE)
  @HttpCode(204)
  async remove(@CallerParam() caller: Caller, @Param('id') id: string): Promise<void> {
    await this.letters.remove(caller.tenant, id);
  }
}
