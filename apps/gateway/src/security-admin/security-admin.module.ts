import { DynamicModule, Module } from '@nestjs/common';
import { AclAdmin, ApiKeyService, PublisherSecretStore, TenantQuotaAdmin } from '@libs/security';
import { TopicNamespace } from '@libs/topics';
import type { GatewayServices } from '../gateway-services';
import { AclController } from './acl.controller';
import { ApiKeysController } from './api-keys.controller';
import { PublisherSecretsController } from './publisher-secrets.controller';
import { TenantQuotaController } from './tenant-quota.controller';
import { TopicGrantsController } from './topic-grants.controller';
import { TopicsController } from './topics.controller';
import { provide } from '../http/provide';

/** Tenants and their access: API keys, publishers' signing secrets, ACL rules, quotas, tenant topics and grants. */
@Module({})
export class SecurityAdminModule {
  static register(s: GatewayServices): DynamicModule {
    return {
      module: SecurityAdminModule,
      controllers: [
        ApiKeysController,
        PublisherSecretsController,
        AclController,
        TenantQuotaController,
        TopicsController,
        TopicGrantsController,
      ],
      providers: [
        provide(ApiKeyService, s.apiKeys),
        provide(PublisherSecretStore, s.publisherSecrets),
        provide(AclAdmin, s.acl),
        provide(TenantQuotaAdmin, s.quotas),
        provide(TopicNamespace, s.topics),
      ],
    };
  }
}
