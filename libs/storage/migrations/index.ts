import { InitialSchema1795960047984 } from './1795960047984-InitialSchema';
import { SubscriptionSigningSecret1795963007921 } from './1795963007921-SubscriptionSigningSecret';
import { DeliveryRetries1795963197938 } from './1795963197938-DeliveryRetries';

/** Every migration, oldest first. New ones come from `npm run migration:generate -- libs/storage/migrations/<Name>`. */
export const MIGRATIONS = [InitialSchema1795960047984, SubscriptionSigningSecret1795963007921, DeliveryRetries1795963197938];
