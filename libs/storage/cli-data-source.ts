import { loadConfig } from '@libs/config';
import { createDataSource } from './data-source';

/**
 * The DataSource the TypeORM CLI uses (`npm run migration:generate`, `migration:revert`), configured like the
 * runtime, except that a migration may rewrite a large table: no statement timeout, no query deadline.
 */
export default createDataSource({ ...loadConfig().postgres, queryTimeoutMs: 0 }, 'eventmesh-migrations');
