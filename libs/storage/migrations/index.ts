import { InitialSchema1795960047984 } from './1795960047984-InitialSchema';
import { SubscriptionSigningSecret1795963007921 } from './1795963007921-SubscriptionSigningSecret';
import { DeliveryRetries1795963197938 } from './1795963197938-DeliveryRetries';
import { PendingRequests1795964509962 } from './1795964509962-PendingRequests';
import { PartitionLeaseRenewal1795968576120 } from './1795968576120-PartitionLeaseRenewal';
import { DispatchRuns1796100895213 } from './1796100895213-DispatchRuns';
import { SkippedRanges1796101139817 } from './1796101139817-SkippedRanges';
import { DeadLetterPositionKey1796101550983 } from './1796101550983-DeadLetterPositionKey';
import { PendingRequestHolder1796300000001 } from './1796300000001-PendingRequestHolder';
import { ApiKeys1796400000001 } from './1796400000001-ApiKeys';
import { PublisherSecrets1796410000001 } from './1796410000001-PublisherSecrets';
import { GateAclQuota1796420000001 } from './1796420000001-GateAclQuota';
import { ResourceTenant1796430000001 } from './1796430000001-ResourceTenant';
import { StreamPresence1796500000001 } from './1796500000001-StreamPresence';
import { A2AAgents1796520000001 } from './1796520000001-A2AAgents';
import { DeadLetterReplay1796600000001 } from './1796600000001-DeadLetterReplay';
import { OffsetsGeneration1796610000001 } from './1796610000001-OffsetsGeneration';
import { StreamPresenceClients1796610000002 } from './1796610000002-StreamPresenceClients';
import { A2AAgentStyle1796630000001 } from './1796630000001-A2AAgentStyle';
import { A2ATaskEvents1796700000000 } from './1796700000000-A2ATaskEvents';
import { A2APushConfigs1796710000000 } from './1796710000000-A2APushConfigs';
import { A2ATaskTurns1796720000000 } from './1796720000000-A2ATaskTurns';
import { A2ATaskEventsPublished1796800000000 } from './1796800000000-A2ATaskEventsPublished';
import { A2ATaskRequestRecord1796900000000 } from './1796900000000-A2ATaskRequestRecord';
import { A2APushDeadLetters1797000000000 } from './1797000000000-A2APushDeadLetters';
import { A2APushDeadLetterAge1797100000000 } from './1797100000000-A2APushDeadLetterAge';
import { A2ATaskRetention1797200000000 } from './1797200000000-A2ATaskRetention';
import { A2ATaskIdleRetention1797300000000 } from './1797300000000-A2ATaskIdleRetention';
import { A2ATaskAgentResends1797400000000 } from './1797400000000-A2ATaskAgentResends';
import { SubscriptionName1797460000000 } from './1797460000000-SubscriptionName';
import { TenantTopics1797500000000 } from './1797500000000-TenantTopics';
import { TopicGrants1797500000001 } from './1797500000001-TopicGrants';
import { SessionAgentsAndHomes1797600000000 } from './1797600000000-SessionAgentsAndHomes';
import { PresenceHolders1797700000000 } from './1797700000000-PresenceHolders';
import { SessionUsage1797700000001 } from './1797700000001-SessionUsage';
import { AgentRegistrations1797800000000 } from './1797800000000-AgentRegistrations';

/** Every migration, oldest first. New ones come from `npm run migration:generate -- libs/storage/migrations/<Name>`. */
export const MIGRATIONS = [
  InitialSchema1795960047984,
  SubscriptionSigningSecret1795963007921,
  DeliveryRetries1795963197938,
  PendingRequests1795964509962,
  PartitionLeaseRenewal1795968576120,
  DispatchRuns1796100895213,
  SkippedRanges1796101139817,
  DeadLetterPositionKey1796101550983,
  PendingRequestHolder1796300000001,
  ApiKeys1796400000001,
  PublisherSecrets1796410000001,
  GateAclQuota1796420000001,
  ResourceTenant1796430000001,
  StreamPresence1796500000001,
  A2AAgents1796520000001,
  DeadLetterReplay1796600000001,
  OffsetsGeneration1796610000001,
  StreamPresenceClients1796610000002,
  A2AAgentStyle1796630000001,
  A2ATaskEvents1796700000000,
  A2APushConfigs1796710000000,
  A2ATaskTurns1796720000000,
  A2ATaskEventsPublished1796800000000,
  A2ATaskRequestRecord1796900000000,
  A2APushDeadLetters1797000000000,
  A2APushDeadLetterAge1797100000000,
  A2ATaskRetention1797200000000,
  A2ATaskIdleRetention1797300000000,
  A2ATaskAgentResends1797400000000,
  SubscriptionName1797460000000,
  TenantTopics1797500000000,
  TopicGrants1797500000001,
  SessionAgentsAndHomes1797600000000,
  PresenceHolders1797700000000,
  SessionUsage1797700000001,
  AgentRegistrations1797800000000,
];
