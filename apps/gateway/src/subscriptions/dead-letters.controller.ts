import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import {
  browseQuerySchema,
  DeadLetterDetail,
  DeadLetterPage,
  DeadLetterReplays,
  DeadLetterService,
  purgeQuerySchema,
  replayBodySchema,
  ReplayView,
} from '@libs/dead-letters';
import type { Caller } from '@libs/security';
import { z } from 'zod';
import { ApiRoute, errors, GATED } from '../http/api-route';
import { CallerParam, GateRoute } from '../http/gate-route';

/** Reading a subscription's dead letters: whoever may subscribe to its topic (as GET /subscriptions/{id}). */
const READ = { action: 'subscribe', topic: { subscriptionParam: 'id' } } as const;
/** Replaying and purging them: the admin gate, the admin action on the subscription's topic, in the caller's tenant. */
const OPERATE = { action: 'admin', admin: true, topic: { subscriptionParam: 'id' } } as const;

const ID = { id: "the subscription's id" };
const REPLAY_ID = { ...ID, replayId: "the replay's id (its workflow is dlq-replay/<replayId>)" };
const letterView = z.looseObject({
  id: z.string(),
  topic: z.string(),
  partition: z.number().int(),
  offset: z.number().int(),
  eventId: z.string(),
  attributes: z.looseObject({}),
  attempts: z.number().int(),
  lastError: z.string(),
  firstFailedAt: z.string(),
  lastFailedAt: z.string(),
  deadLetteredAt: z.string(),
  replayedAt: z.string().nullable(),
  replayId: z.string().nullable(),
});
const pageSchema = z.looseObject({ items: z.array(letterView), next: z.string().nullable() });
const detailSchema = letterView.extend({ event: z.looseObject({}).nullable(), dataBase64: z.string().nullable() });
const replayView = z.looseObject({
  replayId: z.string(),
  subscriptionId: z.string(),
  state: z.string(),
  total: z.number().int(),
  replayed: z.number().int(),
  failed: z.number().int(),
  skipped: z.number().int(),
  remaining: z.number().int(),
  ratePerSecond: z.number().int(),
  requestedAt: z.string(),
  workflowId: z.string(),
});

/**
 * A subscription's dead-letter queue (docs/api.md, "Dead letters"; docs/operations.md, "Replaying dead
 * letters"): browse with filters and cursor paging, read one letter with its event, replay (the Temporal
 * workflow `dlq-replay/<replayId>`), follow or cancel a replay, purge. Scoped by the caller's tenant: another
 * tenant's subscription answers 404 like a missing one.
 */
@Controller('subscriptions')
export class DeadLettersController {
  constructor(
    private readonly deadLetters: DeadLetterService,
    private readonly replays: DeadLetterReplays,
  ) {}

  @Get(':id/dead-letters')
  @ApiRoute({
    summary: 'Browse the dead letters, filtered, a page at a time',
    params: ID,
    query: browseQuerySchema,
    responses: { 200: { description: 'a page', schema: pageSchema }, ...errors(400, 404), ...GATED },
  })
  @GateRoute(READ)
  browse(@Param('id') id: string, @Query() query: unknown, @CallerParam() caller: Caller): Promise<DeadLetterPage> {
    return this.deadLetters.browse(id, caller.tenant, query);
  }

  @Delete(':id/dead-letters')
  @ApiRoute({
    summary: 'Purge the dead letters matching the filters (confirm=<subscription id>)',
    params: ID,
    query: purgeQuerySchema,
    responses: {
      200: { description: 'how many were deleted', schema: z.object({ deleted: z.number().int() }) },
      ...errors(400, 404),
      ...GATED,
    },
  })
  @GateRoute(OPERATE)
  @HttpCode(200)
  purge(@Param('id') id: string, @Query() query: unknown, @CallerParam() caller: Caller): Promise<{ deleted: number }> {
    return this.deadLetters.purge(id, caller.tenant, query);
  }

  @Post(':id/dead-letters/replays')
  @ApiRoute({
    summary: 'Replay dead letters to this subscription (the workflow dlq-replay/<replayId>)',
    params: ID,
    body: { schema: replayBodySchema },
    responses: { 202: { description: 'started', schema: replayView }, ...errors(400, 404), ...GATED },
  })
  @GateRoute(OPERATE)
  @HttpCode(202)
  replay(@Param('id') id: string, @Body() body: unknown, @CallerParam() caller: Caller): Promise<ReplayView> {
    return this.replays.start(id, caller.tenant, body);
  }

  @Get(':id/dead-letters/replays/:replayId')
  @ApiRoute({
    summary: "A replay's progress",
    params: REPLAY_ID,
    responses: { 200: { description: 'its progress', schema: replayView }, ...errors(404), ...GATED },
  })
  @GateRoute(OPERATE)
  replayProgress(
    @Param('id') id: string,
    @Param('replayId') replayId: string,
    @CallerParam() caller: Caller,
  ): Promise<ReplayView> {
    return this.replays.get(id, caller.tenant, replayId);
  }

  @Delete(':id/dead-letters/replays/:replayId')
  @ApiRoute({
    summary: 'Cancel a replay (it stops after the batch in flight)',
    params: REPLAY_ID,
    responses: { 202: { description: 'cancel requested', schema: replayView }, ...errors(404), ...GATED },
  })
  @GateRoute(OPERATE)
  @HttpCode(202)
  cancelReplay(
    @Param('id') id: string,
    @Param('replayId') replayId: string,
    @CallerParam() caller: Caller,
  ): Promise<ReplayView> {
    return this.replays.cancel(id, caller.tenant, replayId);
  }

  @Get(':id/dead-letters/:letterId')
  @ApiRoute({
    summary: 'One dead letter with its event',
    params: { ...ID, letterId: "the dead letter's id" },
    responses: { 200: { description: 'the letter', schema: detailSchema }, ...errors(404), ...GATED },
  })
  @GateRoute(READ)
  letter(
    @Param('id') id: string,
    @Param('letterId') letterId: string,
    @CallerParam() caller: Caller,
  ): Promise<DeadLetterDetail> {
    return this.deadLetters.get(id, caller.tenant, letterId);
  }
}
