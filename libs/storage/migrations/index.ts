import { InitialSchema1795960047984 } from './1795960047984-InitialSchema';

/** Every migration, oldest first. New ones come from `npm run migration:generate -- libs/storage/migrations/<Name>`. */
export const MIGRATIONS = [InitialSchema1795960047984];
