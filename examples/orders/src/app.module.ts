import { Module } from '@nestjs/common';
import { ConfigModule, ConfigService } from '@nestjs/config';
import { EventMeshModule } from '@eventmesh/nestjs';
import { OrdersController } from './orders.controller';
import { OrdersHandler } from './orders.handler';

@Module({
  imports: [
    ConfigModule.forRoot({ isGlobal: true }),
    EventMeshModule.forRootAsync({
      inject: [ConfigService],
      useFactory: (config: ConfigService) => ({
        url: config.get('EVENTMESH_URL', 'http://127.0.0.1:8080'),
        token: config.get('EVENTMESH_TOKEN'),
      }),
    }),
  ],
  controllers: [OrdersController],
  providers: [OrdersHandler],
})
export class AppModule {}
