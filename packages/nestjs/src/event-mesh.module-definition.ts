import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { EventMeshClientOptions } from '@eventmesh/client';

/** `EventMeshModule.forRoot` takes the SDK client's options (`url`, `token` or `apiKey`, `topic`, ...). */
export type EventMeshModuleOptions = EventMeshClientOptions;

/**
 * `forRoot(options)` and `forRootAsync({ imports, inject, useFactory })` (or `useClass`/`useExisting`), global by
 * default (`isGlobal: false` to scope it to the importing module).
 */
export const { ConfigurableModuleClass, MODULE_OPTIONS_TOKEN: EVENT_MESH_OPTIONS } =
  new ConfigurableModuleBuilder<EventMeshModuleOptions>({
    moduleName: 'EventMesh',
  })
    .setClassMethodName('forRoot')
    .setExtras({ isGlobal: true }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
    .build();
