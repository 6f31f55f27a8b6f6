import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { DeadLetterDetail, DeadLetterPage, DeadLetterReplays, DeadLetterService, ReplayView } from '../../../libs/dead-letters';
import type { Caller } from '../../../libs/security';
import { CallerParam, GateRoute } from './gate-route';

/** Reading a subscription's dead letters: whoever may subscribe to its topic (as GET /subscriptions/{id}). */
const READ = { action: 'subscribe', topic: { subscriptionParam: 'id' } } as const;
/** Replaying and purging them: the admin gate, the admin action on the subscription's topic, in the caller's tenant. */
const OPERATE = { action: 'admin', admin: true, topic: { subscriptionParam: 'id' } } as const;

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
  @GateRoute(READ)
  browse(@Param('id') id: string, @Query() query: unknown, @CallerParam() caller: Caller): Promise<DeadLetterPage> {
    return this.deadLetters.browse(id, caller.tenant, query);
  }

  @Delete(':id/dead-letters')
  @GateRoute(OPERATE)
  @HttpCode(200)
  purge(@Param('id') id: string, @Query() query: unknown, @CallerParam() caller: Caller): Promise<{ deleted: number }> {
    return this.deadLetters.purge(id, caller.tenant, query);
  }

  @Post(':id/dead-letters/replays')
  @GateRoute(OPERATE)
  @HttpCode(202)
  replay(@Param('id') id: string, @Body() body: unknown, @CallerParam() caller: Caller): Promise<ReplayView> {
    return this.replays.start(id, caller.tenant, body);
  }

  @Get(':id/dead-letters/replays/:replayId')
  @GateRoute(OPERATE)
  replayProgress(@Param('id') id: string, @Param('replayId') replayId: string, @CallerParam() caller: Caller): Promise<ReplayView> {
    return this.replays.get(id, caller.tenant, replayId);
  }

  @Delete(':id/dead-letters/replays/:replayId')
  @GateRoute(OPERATE)
  @HttpCode(202)
  cancelReplay(@Param('id') id: string, @Param('replayId') replayId: string, @CallerParam() caller: Caller): Promise<ReplayView> {
    return this.replays.cancel(id, caller.tenant, replayId);
  }

  @Get(':id/dead-letters/:letterId')
  @GateRoute(READ)
  letter(@Param('id') id: string, @Param('letterId') letterId: string, @CallerParam() caller: Caller): Promise<DeadLetterDetail> {
    return this.deadLetters.get(id, caller.tenant, letterId);
  }
}
