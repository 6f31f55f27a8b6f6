import { loadConfig } from '../config';
import { createDataSource } from './data-source';

/** The DataSource the TypeORM CLI uses (`npm run migration:generate`, `migration:revert`), configured like the runtime. */
export default createDataSource(loadConfig().postgres, 'eventmesh-migrations');
