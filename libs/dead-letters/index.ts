export {
  BROWSE_DEFAULT_LIMIT,
  BROWSE_MAX_LIMIT,
  browseQuerySchema,
  purgeQuerySchema,
  replayBodySchema,
} from './dead-letter-query';
export { DeadLetterService } from './dead-letter-service';
export type { DeadLetterDetail, DeadLetterPage } from './dead-letter-service';
export { DeadLetterReplays } from './dead-letter-replays';
export type { ReplayView } from './dead-letter-replays';
